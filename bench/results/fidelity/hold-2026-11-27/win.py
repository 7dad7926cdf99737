"""One mix's core, window by window: target, hold, executed, error and the plan's thread.

    python win.py OUT/LABEL MIX CORE [EVAL_DIR]       # EVAL_DIR: eval-rep0 (default)
"""
import sys, numpy as np
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[4]))
from mimesys.plan import Plan
from mimesys.trace import Trace
from mimesys.catalog import load_catalog
O, mix, k = sys.argv[1], sys.argv[2], int(sys.argv[3])
cat = load_catalog(); cls = {s.name: s.resource_class for s in cat.stressors}
d = f'{O}/' + (sys.argv[4] if len(sys.argv) > 4 else 'eval-rep0')
plan = Plan.read(f'{d}/plans/{mix}__inverse.h5'); a = np.asarray(plan.compositions, float)
ex = Trace.read(f'{d}/executed/{mix}__inverse.h5'); tg = Trace.read(f'{O}/../targets/{mix}.h5')
T = min(len(a), ex.T, tg.T); c = f'cpu.util.core{k}'
isc = np.array([cls.get(n) == 'cpu' for n in plan.catalog_names])
bt = plan.core_busy_target
for t in range(T):
    comp = a[t, :, k]; names = [f"{plan.catalog_names[m]}:{comp[m]:.2f}" for m in np.nonzero(comp > 0)[0]]
    print(f"{t:3d} tgt {tg.column(c)[t]:.3f} hold {bt[t,k] if bt is not None else float('nan'):.3f} ex {ex.column(c)[t]:.3f} e {ex.column(c)[t]-tg.column(c)[t]:+.3f}  {' '.join(names)}")
