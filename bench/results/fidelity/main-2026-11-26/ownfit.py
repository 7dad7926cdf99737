"""Fit per-stressor own-share adjustments on the campaign's samples (per-core residual of the
first order ~ thread fractions, ridge toward 0, IO stressors only), then test on the replays."""
import sys, glob, numpy as np
sys.path.insert(0, '/work/s26/e2e/wt')
from mimesys.forward.model import load_forward_model
from mimesys.plan import Plan
from mimesys.trace import Trace
from controller.dataset import Dataset
O = '/work/s26/e2e/out/30min-main'
fm = load_forward_model(f'{O}/forward'); f = fm.first
ds = Dataset.read(f'{O}/dataset.h5')
cls = f.classes
io = np.array([c in ('disk', 'network') for c in cls])
print("io stressors", io.sum())
def rows(a, obs, names):
    pr = f.predict(a)
    X, y = [], []
    for k, c in enumerate(('cpu.util.core0', 'cpu.util.core1')):
        n = f.metric_names.index(c); no = names.index(c)
        r = obs[:, no] - pr[:, n]
        ok = np.isfinite(r)
        X.append(a[:, :, k][ok]); y.append(r[ok])
    return np.concatenate(X), np.concatenate(y)
Xc, yc = rows(ds.action.astype(float), ds.obs.astype(float), ds.names)
print("campaign windows", len(yc), "mean|r|", np.abs(yc).mean().round(4))
def fit(X, y, lam):
    Xi = X[:, io]; A = Xi.T @ Xi + lam * np.eye(io.sum())
    d = np.linalg.solve(A, Xi.T @ (y - np.median(y)))
    return d
# replays
Xr, yr = [], []
for d in sorted(glob.glob(f'{O}/eval-rep*')):
    for p in sorted(glob.glob(f'{d}/plans/*inverse.h5')):
        key = p.split('/')[-1][:-3]
        a = np.asarray(Plan.read(p).compositions, float); ex = Trace.read(f'{d}/executed/{key}.h5')
        T = min(len(a), ex.T)
        X, y = rows(a[:T], ex.select(['cpu.util.core0', 'cpu.util.core1'] )[:T] if False else np.stack([ex.column(n)[:T] for n in ex.names], 1), ex.names)
        Xr.append(X); yr.append(y)
Xr, yr = np.concatenate(Xr), np.concatenate(yr)
print("replay windows", len(yr), "mean|r| before", np.abs(yr).mean().round(4))
for lam in (0.3, 1, 3, 10, 30):
    d = fit(Xc, yc, lam)
    yr2 = yr - Xr[:, io] @ d
    print(lam, "replay mean|r| after", np.abs(yr2).mean().round(4), "campaign after", np.abs(yc - Xc[:, io] @ d).mean().round(4),
          {f.catalog_names[m]: round(float(v), 3) for m, v in zip(np.where(io)[0], d) if abs(v) > 0.03})
