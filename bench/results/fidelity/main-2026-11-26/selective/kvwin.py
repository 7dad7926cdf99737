import sys, numpy as np, os
sys.path.insert(0, '/work/s26/e2e/wt')
from mimesys.plan import Plan
from mimesys.trace import Trace
O='/work/s26/e2e/out'; L=os.environ.get('L','30min-hold'); mix=os.environ.get('MIX','kv_compress')
METH=os.environ.get('METH','inverse')
tgt=Trace.read(f'{O}/targets/{mix}.h5')
for rep in (0,1):
  d=f'{O}/{L}/eval-rep{rep}'
  pi=Plan.read(f'{d}/plans/{mix}__{METH}.h5'); ei=Trace.read(f'{d}/executed/{mix}__{METH}.h5')
  a=np.asarray(pi.compositions,float); names=pi.catalog_names
  hb=np.asarray(pi.core_busy_target,float)
  for k in range(2):
    c=f'cpu.util.core{k}'; t=tgt.column(c); e=ei.column(c); T=min(len(t),len(e))
    err=e[:T]-t[:T]
    print(rep,k,'mean err',err.mean().round(4),'mean|err|',np.abs(err).mean().round(4), 'n<-0.01',(err<-0.0099).sum(),'n>0.01',(err>0.0099).sum())
    for w in np.argsort(err)[:4]:
      comp={names[j]:round(a[w,j,k],2) for j in np.nonzero(a[w,:,k]>0.005)[0]}
      print('   w',w,'t',round(t[w],3),'e',round(e[w],3),'hold',(round(float(hb[w,k]),3) if hb.ndim==2 else None),comp)
