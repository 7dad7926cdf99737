"""Per mix, per core: executed - target per window (aligned, no DTW), inverse vs single: bias,
mean |err|, and mean |err| split by what the plan's thread ran (compute only / mixed / idle)."""
import sys, glob, json, numpy as np
sys.path.insert(0, '/work/s27/wt')
from mimesys.plan import Plan
from mimesys.trace import Trace
from mimesys.catalog import load_catalog
O = sys.argv[1]
cls = {s.name: s.resource_class for s in load_catalog().stressors}
rows = {}
for d in sorted(glob.glob(f'{O}/eval-rep*')):
    for p in sorted(glob.glob(f'{d}/plans/*.h5')):
        key = p.split('/')[-1][:-3]
        mix, meth = key.split('__')
        plan = Plan.read(p); a = np.asarray(plan.compositions, float)
        ex = Trace.read(f'{d}/executed/{key}.h5')
        tg = Trace.read(f'{O}/../targets/{mix}.h5') if False else None
        tgt = Trace.read(glob.glob(f'{O}/../targets/{mix}.h5')[0])
        T = min(len(a), ex.T, tgt.T)
        isc = np.array([cls.get(n) == 'cpu' for n in plan.catalog_names])
        for k in range(2):
            c = f'cpu.util.core{k}'
            e = ex.column(c)[:T] - tgt.column(c)[:T]
            comp = a[:T, :, k]
            kind = np.where(comp.sum(1) < 1e-6, 'idle', np.where(comp[:, ~isc].sum(1) < 1e-6, 'cpu', np.where(comp[:, isc].sum(1) > 1e-6, 'held', 'nocpu')))
            r = rows.setdefault((meth, mix, k), {'e': [], 'kind': []})
            r['e'].append(e); r['kind'].append(kind)
for (meth, mix, k), r in sorted(rows.items(), key=lambda t: (t[0][1], t[0][2], t[0][0])):
    e = np.concatenate(r['e']); kind = np.concatenate(r['kind']); ok = np.isfinite(e)
    parts = '  '.join(f"{kk}:{(kind[ok]==kk).sum():3d} |e| {np.abs(e[ok][kind[ok]==kk]).mean():.4f} b {e[ok][kind[ok]==kk].mean():+.4f}"
                      for kk in ('cpu', 'held', 'nocpu', 'idle') if (kind[ok]==kk).any())
    print(f"{mix:12s} core{k} {meth:8s} bias {e[ok].mean():+.4f} |e| {np.abs(e[ok]).mean():.4f}   {parts}")
