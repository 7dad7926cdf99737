"""Mean replay / mean target per resource metric, per mix and method (eval dirs given)."""
import sys, glob, numpy as np
from mimesys.trace import Trace
R, label, suf = sys.argv[1], sys.argv[2], (sys.argv[3] if len(sys.argv) > 3 else '')
names = ['disk.read_Bps', 'disk.write_Bps', 'net.lo.tx_Bps', 'mem.used_B']
for tp in sorted(glob.glob(f'{R}/targets/*.h5')):
    if tp.endswith('.rerun.h5'): continue
    mix = tp.split('/')[-1][:-3]; t = Trace.read(tp)
    for m in ['single', 'inverse']:
        ex = [Trace.read(p) for p in sorted(glob.glob(f'{R}/{label}/eval-rep[0-9]{suf}/executed/{mix}__{m}.h5'))]
        if not ex: continue
        row = []
        for n in names:
            a = np.nanmean(t.column(n)); b = np.mean([np.nanmean(e.column(n)) for e in ex])
            row.append(f'{n.split(".")[-2] if n!="mem.used_B" else "mem"}.{n.split(".")[-1][:5]} {b/a if a > 0 else float("nan"):.2f} ({a/1e6:.1f} MB)')
        print(f'{mix:12s} {m:8s} ' + ' | '.join(row))
