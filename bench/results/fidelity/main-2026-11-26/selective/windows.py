import sys, numpy as np, os
sys.path.insert(0, '/work/s26/e2e/wt')
from mimesys.trace import Trace
O='/work/s26/e2e/out'; L=os.environ.get('L','30min-sel'); mix=os.environ.get('MIX','kv_compress')
tgt=Trace.read(f'{O}/targets/{mix}.h5')
ex={(m,r):Trace.read(f'{O}/{L}/eval-rep{r}/executed/{mix}__{m}.h5') for m in ('inverse','single') for r in (0,1)}
for k in (0,1):
  c=f'cpu.util.core{k}'
  print(c, 'w  t  inv0 inv1 sg0 sg1')
  for w in range(0,22):
    print(w, f"{tgt.column(c)[w]:.3f}", ' '.join(f"{ex[key].column(c)[w]:.3f}" for key in ex))
