"""Per-core residual (measured - first-order predicted) regressed on each thread's plan
fractions, over every inverse and single replay of the e2e run: which stressor's share on its
own core is off in mixtures."""
import sys, glob, numpy as np
sys.path.insert(0, '/work/s26/e2e/wt')
from mimesys.forward.model import load_forward_model
from mimesys.plan import Plan
from mimesys.trace import Trace
O = sys.argv[1] if len(sys.argv) > 1 else '/work/s26/e2e/out/30min-main'
fm = load_forward_model(f'{O}/forward'); f = fm.first
X, y = [], []
for d in sorted(glob.glob(f'{O}/eval-rep*')):
    for p in sorted(glob.glob(f'{d}/plans/*.h5')):
        key = p.split('/')[-1][:-3]
        plan = Plan.read(p); a = np.asarray(plan.compositions, float)
        ex = Trace.read(f'{d}/executed/{key}.h5')
        pr = f.predict(a)
        T = min(len(a), ex.T)
        for k, c in enumerate(('cpu.util.core0', 'cpu.util.core1')):
            n = f.metric_names.index(c)
            r = ex.column(c)[:T] - pr[:T, n]
            ok = np.isfinite(r)
            X.append(a[:T, :, k][ok]); y.append(r[ok])
X = np.concatenate(X); y = np.concatenate(y)
used = X.sum(0) > 1.0
Xu = np.c_[X[:, used], np.ones(len(X))]
coef, *_ = np.linalg.lstsq(Xu, y, rcond=None)
names = np.array(f.catalog_names)[used]
print("windows", len(y), "mean |resid|", np.abs(y).mean().round(4), "intercept", coef[-1].round(4))
for nm, c, tot in sorted(zip(names, coef[:-1], X[:, used].sum(0)), key=lambda t: t[1]):
    m = f.catalog_names.index(nm)
    print(f"{nm:34s} coef {c:+.3f}  own {f.own[m]:.3f}  thread-windows {tot:.1f}")
