"""Runner alone: the inverse plans held (as compiled) vs run open-loop (no core target), per
window busy vs the plan's core target; windows split by what the held thread-window's
non-compute stressors are (disk or not)."""
import sys, os, json, numpy as np
sys.path.insert(0, '/work/main'); sys.path.insert(0, '/work/main/bench')
from pathlib import Path
from hold import run
from mimesys.catalog import load_catalog
from mimesys.plan import Plan
cat = load_catalog('/work/main/stressors/catalog.toml')
cls = np.array([s.resource_class for s in cat.stressors])
runner = Path('/work/main/stressors/build/mimesys-runner')
T = int(os.environ.get('T', '40'))
for spec in sys.argv[1].split(','):
    D, mix = spec.split(':')
    p = Plan.read(f'{D}/plans/{mix}__inverse.h5')
    a = np.array(p.compositions); a[:, list(cat.paced()), :] = 0; a = a[:T].astype(np.float32)
    tgt = p.core_busy_target[:T]
    res = {}
    for mode in ('held', 'open'):
        q = Plan.from_catalog(a, cat, window_s=p.window_s, seed=0, core_busy_target=tgt if mode == 'held' else None)
        res[mode] = (run(runner, q, cat, [0, 1], Path('/var/tmp')) - tgt[:T])[1:]
    comp = a[1:]
    disk = np.array([c == 'disk' for c in cls]); cpu = np.array([c == 'cpu' for c in cls])
    for k in range(2):
        nc = comp[:, ~cpu, k].sum(1) > 0; hascpu = comp[:, cpu, k].sum(1) > 0
        held = nc & hascpu
        d = comp[:, disk, k].sum(1) > 0
        for name, m in (('held-disk', held & d), ('held-nodisk', held & ~d)):
            if m.any():
                print(mix, k, name, m.sum(), ' '.join(f"{mode} |e| {np.nanmean(np.abs(res[mode][m, k])):.4f} b {np.nanmean(res[mode][m, k]):+.4f}" for mode in res), flush=True)
