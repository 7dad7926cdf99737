"""python attribute_io.py EVAL_DIR io.jsonl

For each idle window with added disk activity in an evaluation dir, who did the IO (iosampler log)."""
import sys, json, glob, os
sys.path.insert(0, str(__import__('pathlib').Path(__file__).resolve().parents[4]))
import numpy as np
from mimesys.trace import Trace
d, log = sys.argv[1], sys.argv[2]
recs = [json.loads(l) for l in open(log) if l.strip()]
ts = np.array([r['t'] for r in recs])
res = json.load(open(f'{d}/results.json'))
for run in res['runs']:
    if 'error' in run: continue
    ex = Trace.read(f"{d}/executed/{run['trace']}__{run['method']}.h5")
    import time as _t; starts = ex.window_start_ns / 1e9 + (_t.time() - _t.monotonic())
    for r, e in run['idle_windows_added'].items():
        for w in e.get('windows', []):
            t0 = float(starts[w]); t1 = t0 + ex.window_s
            sel = [recs[i] for i in np.flatnonzero((ts > t0) & (ts <= t1 + 0.5))]
            who = {}
            for s in sel:
                for pid, comm, dr, dw in s['procs']:
                    k = f'{comm}'
                    a = who.setdefault(k, [0, 0]); a[0] += dr; a[1] += dw
            col = 'disk.read_Bps' if r == 'disk.read' else 'disk.write_Bps'
            print(run['method'], run['trace'], r, 'w', w, 'measured %.2f MB/s' % (ex.column(col)[w] / 1e6),
                  'sampler disk r/w %.2f/%.2f MB' % (sum(s['disk_r'] for s in sel) / 1e6, sum(s['disk_w'] for s in sel) / 1e6),
                  {k: (round(v[0] / 1e6, 2), round(v[1] / 1e6, 2)) for k, v in who.items()})
