"""A/B: runner A vs runner B on the real mixes' plans, runner alone, alternating; per window
core busy/total from /proc/stat against the plan's core busy target."""
import sys, os, json, numpy as np
sys.path.insert(0, '/work/main'); sys.path.insert(0, '/work/main/bench')
from pathlib import Path
from hold import run
from mimesys.catalog import load_catalog
from mimesys.plan import Plan
cat = load_catalog('/work/main/stressors/catalog.toml')
runners = {'A': '/work/s31/runnerA', 'B': '/work/s31/runnerB'}
specs = sys.argv[1].split(',')     # dir:mix:method
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 1
T = int(os.environ.get('T', '40')); T0 = int(os.environ.get('T0', '0'))
out = open(os.environ.get('OUTF', '/work/s31/ab.jsonl'), 'a')
for r in range(rounds):
    for spec in specs:
        D, mix, meth = spec.split(':')
        p = Plan.read(f'{D}/plans/{mix}__{meth}.h5')
        a = np.array(p.compositions); a[:, list(cat.paced()), :] = 0
        p = Plan.from_catalog(a[T0:T0+T].astype(np.float32), cat, window_s=p.window_s, seed=0,
                              core_busy_target=p.core_busy_target[T0:T0+T])
        for name in (('A', 'B') if r % 2 == 0 else ('B', 'A')):
            b = run(Path(runners[name]), p, cat, [0, 1], Path('/var/tmp'))
            tgt = p.core_busy_target[:len(b)]
            e = (b - tgt)[1:]
            out.write(json.dumps({'r': r, 'spec': spec, 'runner': name, 'e': np.round(e, 5).tolist(), 'tgt': np.round(tgt[1:], 5).tolist()}) + '\n'); out.flush()
            print(name, mix, meth, r, 'bias', np.round(np.nanmean(e, axis=0), 4), 'abs', np.round(np.nanmean(np.abs(e), axis=0), 4), flush=True)
