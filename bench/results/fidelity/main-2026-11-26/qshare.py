"""Hypothesis: a depth-1 reader's CPU falls when the other thread runs deep IO at the same time.
Residual (measured - first order) on core k in windows where thread k runs disk_rand_read_4k,
against the deep-IO fraction on the other thread."""
import sys, glob, tomllib, numpy as np
sys.path.insert(0, '/work/s26/e2e/wt')
from mimesys.forward.model import load_forward_model
from mimesys.plan import Plan
from mimesys.trace import Trace
cat = {s['name']: s for s in tomllib.load(open('/work/main/stressors/catalog.toml', 'rb'))['stressor']}
for O in sys.argv[1:]:
    fm = load_forward_model(f'{O}/forward'); f = fm.first
    depth = np.array([ (cat[n].get('params', {}).get('depth', 1) if cat[n]['class'] == 'disk' else 0) for n in f.catalog_names], float)
    m = f.catalog_names.index('disk_rand_read_4k')
    rows = []
    for d in sorted(glob.glob(f'{O}/eval-rep*')):
        for p in sorted(glob.glob(f'{d}/plans/*.h5')):
            key = p.split('/')[-1][:-3]
            a = np.asarray(Plan.read(p).compositions, float); ex = Trace.read(f'{d}/executed/{key}.h5')
            T = min(len(a), ex.T); a = a[:T]; pr = f.predict(a)
            for k in range(2):
                c = f'cpu.util.core{f.thread_cores[k]}'
                r = ex.column(c)[:T] - pr[:, f.metric_names.index(c)]
                deep = (a[:, :, 1 - k] * (depth >= 16)).sum(1)
                anyio = (a[:, :, 1 - k] * (depth >= 1)).sum(1)
                for w in range(T):
                    if a[w, m, k] > 0.05 and np.isfinite(r[w]):
                        rows.append((a[w, m, k], deep[w], anyio[w], r[w]))
    R = np.array(rows)
    print(O.split('/')[-1], "windows with the sync reader on a thread:", len(R))
    if len(R):
        lo, hi = R[:, 1] < 0.1, R[:, 1] >= 0.1
        for tag, sel in (("other thread deep IO < 0.1", lo), ("other thread deep IO >= 0.1", hi)):
            if sel.any():
                print(f"  {tag}: n={sel.sum()}  mean resid {R[sel, 3].mean():+.4f}  per unit sync fraction {np.mean(R[sel, 3] / R[sel, 0]):+.3f}  mean sync frac {R[sel, 0].mean():.2f} deep {R[sel, 1].mean():.2f}")
