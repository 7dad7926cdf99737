import sys, numpy as np
sys.path.insert(0, '/work/s26/e2e/wt')
from mimesys.forward.model import load_forward_model
from mimesys.plan import Plan
from mimesys.trace import Trace
O = '/work/s26/e2e/out'
fm = load_forward_model(f'{O}/30min-main/forward'); first = fm.first
mix = sys.argv[1] if len(sys.argv) > 1 else 'burst_serve'
tgt = Trace.read(f'{O}/targets/{mix}.h5')
for rep in (0, 1):
    d = f'{O}/30min-main/eval-rep{rep}'
    plan = Plan.read(f'{d}/plans/{mix}__inverse.h5'); a = np.asarray(plan.compositions, float)
    ex = Trace.read(f'{d}/executed/{mix}__inverse.h5')
    pr = fm.predict_plan(a, first_order_only=True)[0]
    T = min(len(a), ex.T)
    c = 'cpu.util.core0'; n = fm.metric_names.index(c)
    t, e, p = tgt.column(c)[:T], ex.column(c)[:T], pr[:T, n]
    ri = fm.metric_names.index('disk.read_iops')
    print(f"rep{rep} mean|t-e| {np.nanmean(np.abs(t-e)):.4f} mean(p-e) {np.nanmean(p-e):+.4f}")
    bad = np.argsort(-(p - e))[:10]
    for i in sorted(bad):
        th0 = [(plan.catalog_names[m][:26], round(float(a[i, m, 0]), 2)) for m in range(a.shape[1]) if a[i, m, 0] > 0.02]
        print(f"  w{i:2d} t={t[i]:.3f} p={p[i]:.3f} e={e[i]:.3f} riops p={pr[i, ri]:.0f} e={ex.column('disk.read_iops')[i]:.0f} t={tgt.column('disk.read_iops')[i]:.0f} th0={th0}")
