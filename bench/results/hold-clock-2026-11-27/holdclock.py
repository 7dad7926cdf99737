"""Replay the real mixes' inverse plans with the runner alone, --hold-clock ticks vs auto, in
alternation; per window the core's busy/total from /proc/stat against the plan's core busy target."""
import sys, os, json, numpy as np
sys.path.insert(0, '/work/main'); sys.path.insert(0, '/work/main/bench')
from pathlib import Path
from hold import run
from mimesys.catalog import load_catalog
from mimesys.plan import Plan
runner = '/work/main/stressors/build/mimesys-runner'
cat = load_catalog('/work/main/stressors/catalog.toml')
D = sys.argv[1]          # eval dir with plans/
mixes = sys.argv[2].split(',')
rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 1
res = {}
for r in range(rounds):
    for mix in mixes:
        p = Plan.read(f'{D}/plans/{mix}__inverse.h5')
        a = np.array(p.compositions); a[:, list(cat.paced()), :] = 0
        T = min(p.T, int(os.environ.get('T', '60')))
        p = Plan.from_catalog(a[:T].astype(np.float32), cat, window_s=p.window_s, seed=0,
                              core_busy_target=p.core_busy_target[:T])
        for clock in (('ticks', 'auto') if r % 2 == 0 else ('auto', 'ticks')):
            b = run(Path(runner), p, cat, [0, 1], Path('/var/tmp'), ('--hold-clock', clock))
            tgt = p.core_busy_target[:len(b)]
            e = (b - tgt)[1:]
            ok = np.isfinite(e)
            res.setdefault(clock, []).append(e)
            print(clock, mix, r, 'bias', np.round(np.nanmean(e, axis=0), 4), 'abs', np.round(np.nanmean(np.abs(e), axis=0), 4), flush=True)
for clock, parts in res.items():
    e = np.concatenate(parts)
    print('ALL', clock, 'windows', len(e), 'bias', np.round(np.nanmean(e, axis=0), 4), 'abs', np.round(np.nanmean(np.abs(e), axis=0), 4), 'rms', np.round(np.sqrt(np.nanmean(e**2, axis=0)), 4))
