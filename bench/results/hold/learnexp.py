import sys, numpy as np, os
sys.path.insert(0,'/work/main'); sys.path.insert(0,'/work/main/bench')
import agentd.schedule as sc
from hold import run
from mimesys.catalog import load_catalog
from mimesys.plan import Plan
from mimesys.trace import Trace
from pathlib import Path
def learned_hold_ppm(plan, durations, compute, waits):
    T,_,K=durations.shape; out=np.full((T,K),sc.HOLD_NONE,np.uint32); target=plan.core_busy_target
    if target is None: return out
    runs=durations>0; ok=runs[:,compute,:].any(axis=1)&np.isfinite(target); at=runs[:,waits&~compute,:].any(axis=1)
    out[ok]=np.round(np.clip(target[ok].astype(np.float64),0,1)*1e6).astype(np.uint32); out[ok&at]|=np.uint32(0x80000000); return out
if os.environ.get('MODE')=='learned': sc.hold_ppm=learned_hold_ppm; runner='/tmp/ls/build/mimesys-runner'
else: runner='/work/main/stressors/build/mimesys-runner'
O='/work/s26/e2e/out'; cat=load_catalog('/work/rep25/stressors/catalog.toml')
mix=os.environ.get('MIX','kv_compress')
p=Plan.read(f'{O}/30min-sel/eval-rep0/plans/{mix}__inverse.h5')
a=np.array(p.compositions); a[:, list(cat.paced()), :]=0
p=Plan.from_catalog(a.astype(np.float32), cat, window_s=p.window_s, seed=0, core_busy_target=p.core_busy_target)
tgt=Trace.read(f'{O}/targets/{mix}.h5')
b=run(runner,p,cat,[0,1],Path('/var/tmp')); T=min(len(b),tgt.T)
r=[]
for k in (0,1):
    e=b[:T,k]-tgt.column(f'cpu.util.core{k}')[:T]; r.append(f"core{k} bias {e.mean():+.4f} abs {np.abs(e).mean():.4f}")
print(os.environ.get('MODE','selective'), mix, ' | '.join(r))
