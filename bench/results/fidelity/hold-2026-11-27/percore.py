"""Per mix, per core: executed - target per window (aligned, no DTW), inverse vs single: bias,
mean |err|, and both split by what the plan's thread ran: `cpu` compute only (exact as
compiled), `held` compute and something else (the hold sizes the compute), `nocpu` something
other than compute alone (held with a 0 ns reserve since 073e0ef), `idle` nothing.

    python percore.py OUT/LABEL [EVAL_GLOB]     # EVAL_GLOB: eval-rep? (default), eval-rep?-combined
"""
import sys, glob, numpy as np
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[4]))
from mimesys.plan import Plan
from mimesys.trace import Trace
from mimesys.catalog import load_catalog
O = sys.argv[1]
cls = {s.name: s.resource_class for s in load_catalog().stressors}
rows = {}
for d in sorted(glob.glob(f'{O}/' + (sys.argv[2] if len(sys.argv) > 2 else 'eval-rep?'))):
    for p in sorted(glob.glob(f'{d}/plans/*.h5')):
        key = p.split('/')[-1][:-3]
        mix, meth = key.split('__')
        plan = Plan.read(p); a = np.asarray(plan.compositions, float)
        ex = Trace.read(f'{d}/executed/{key}.h5')
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
