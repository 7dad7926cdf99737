"""Replay a plan with the runner directly; sample /proc/stat per CPU every 50 ms; per window:
thread CPU (runner) vs core busy (/proc/stat) on the thread's core."""
import asyncio, sys, threading, time, json
import numpy as np
from mimesys.plan import Plan
from mimesys.catalog import load_catalog
from agentd.runner import run_to_completion, RunnerConfig

plan = Plan.read(sys.argv[1])
cat = load_catalog()
samples = []
stop = False
def sampler():
    while not stop:
        t = time.monotonic_ns()
        rows = {}
        with open('/proc/stat') as f:
            for line in f:
                if line.startswith('cpu') and line[3].isdigit():
                    p = line.split(); v = list(map(int, p[1:9]))
                    idle = v[3] + v[4]
                    rows[int(p[0][3:])] = (sum(v) - idle, sum(v))
        samples.append((t, rows))
        time.sleep(0.05)
th = threading.Thread(target=sampler); th.start()
from agentd.calibration import pace_rates
from mimesys.calibration import read as read_cal
import os
doc = json.load(open(os.environ.get('CAL', '/work/fid2/pre/bench/results/reach/calibration_after.json')))
rates = pace_rates(cat, doc)
rec = asyncio.run(run_to_completion(plan, RunnerConfig(cpus=(0, 1), pace_Bps=rates), seed=0))
stop = True; th.join()
ts = np.array([s[0] for s in samples])
def busy_between(cpu, a, b):
    i, j = np.searchsorted(ts, a), np.searchsorted(ts, b)
    i = min(i, len(ts)-1); j = min(j, len(ts)-1)
    (b0, t0), (b1, t1) = samples[i][1][cpu], samples[j][1][cpu]
    return (b1 - b0) / max(t1 - t0, 1)
out = []
names = cat.names
for w in rec.windows:
    a = w.planned_start_ns; b = a + int(plan.window_s * 1e9)
    row = {"i": w.window, "thread_cpu": (w.thread_cpu_ns / 1e9 / plan.window_s).round(3).tolist(),
           "core": [round(busy_between(k, a, b), 3) for k in range(2)],
           "planned": {names[m]: (w.planned_ns[m] / 1e9).round(3).tolist() for m in range(len(names)) if w.planned_ns[m].any()}}
    out.append(row)
json.dump(out, open(sys.argv[2], 'w'))
tc = np.array([r["thread_cpu"] for r in out]); co = np.array([r["core"] for r in out])
print("mean thread cpu", tc.mean(0), "core", co.mean(0), "core-thread std", (co - tc).std(0))
