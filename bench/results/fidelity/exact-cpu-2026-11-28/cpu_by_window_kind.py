"""Per window and core, |replay − target| per-core CPU of single and inverse paired by window, split
by what the inverse plan runs on that thread: io (anything not of class cpu), after-io, compute, idle.
usage: cpu_by_window_kind.py OUT LABEL EVAL_SUFFIX"""
import sys, glob, numpy as np
from mimesys.trace import Trace
from mimesys.plan import Plan
from mimesys.catalog import load_catalog
R, label, suf = sys.argv[1], sys.argv[2], sys.argv[3]
cls = {s.name: s.resource_class for s in load_catalog().stressors}
agg = {}
for mix in ['burst_serve','db_bulk','kv_compress','net_stream','web_compile']:
    t = Trace.read(f'{R}/targets/{mix}.h5')
    for rep in sorted(glob.glob(f'{R}/{label}/eval-rep[0-9]{suf}')):
        es = Trace.read(f'{rep}/executed/{mix}__single.h5'); ei = Trace.read(f'{rep}/executed/{mix}__inverse.h5')
        p = Plan.read(f'{rep}/plans/{mix}__inverse.h5')
        io = np.array([cls.get(n) not in ('cpu',) for n in p.catalog_names])
        for k in range(2):
            a = t.column(f'cpu.util.core{k}'); s_ = es.column(f'cpu.util.core{k}'); i_ = ei.column(f'cpu.util.core{k}')
            T = min(len(a), len(s_), len(i_), p.T)
            iol = p.compositions[:T, io, k].sum(1); cs = p.compositions[:T, :, k].sum(1)
            prev_io = np.r_[0, iol[:-1]]
            cat = np.where(iol > 0.01, 'io', np.where(prev_io > 0.01, 'after-io', np.where(cs > 0, 'compute', 'idle')))
            for c in ['io', 'after-io', 'compute', 'idle']:
                sel = (cat == c) & np.isfinite(a[:T]) & np.isfinite(s_[:T]) & np.isfinite(i_[:T])
                d = agg.setdefault((mix, c), [[], []])
                d[0] += list(np.abs(s_[:T] - a[:T])[sel]); d[1] += list(np.abs(i_[:T] - a[:T])[sel])
tot = {}
for (mix, c), (s_, i_) in sorted(agg.items()):
    if s_:
        print(f'{mix:12s} {c:9s} n={len(s_):3d} single |e| {np.mean(s_):.4f} inverse |e| {np.mean(i_):.4f}  sum-diff {np.sum(i_)-np.sum(s_):+.3f}')
        t_ = tot.setdefault(c, [0, 0, 0]); t_[0] += len(s_); t_[1] += np.sum(s_); t_[2] += np.sum(i_)
for c, (n, s_, i_) in tot.items():
    print(f'ALL {c:9s} n={n} single {s_/n:.4f} inverse {i_/n:.4f} sum-diff {i_-s_:+.3f}')
