"""A/B, alternated: the catalog's mem_stream_copy_256M on both threads (runner, 4 windows of
0.5 s) vs the probe's memory shapes (runner --probe mem, verbose), 6 rounds."""
import asyncio, json, os, subprocess, sys
import numpy as np
sys.path.insert(0, '/work/main'); sys.path.insert(0, '/work/main/tests')
from mimesys.catalog import load_catalog
from agentd.runner import RunnerConfig, WindowDone, start_runner, find_runner
from runner_helpers import make_plan
cat = load_catalog(); names = [s.name for s in cat.stressors]
class C(list):
    def index(self, n): return names.index(n)
catalog = cat
m = names.index("mem_stream_copy_256M")
out = {"kernel": [], "probe": []}
async def kern():
    plan = make_plan(catalog, {"mem_stream_copy_256M": 1.0}, T=4, K=2, window_s=0.5)
    h = await start_runner(plan, RunnerConfig(cpus=(0, 1)))
    got = []
    async for ev in h.events():
        if isinstance(ev, WindowDone):
            got.append(float(ev.bytes[m].sum()) / 0.5 / 1e9)
    await h.wait()
    return got
for r in range(6):
    k = asyncio.run(kern())
    p = subprocess.run([str(find_runner()), "--probe", "mem", "--probe-seconds", "0.5"], capture_output=True, text=True,
                       env={**os.environ, "MIMESYS_PROBE_VERBOSE": "1"})
    shapes = [ln for ln in p.stderr.splitlines() if "streaming" in ln]
    pv = [float(ln.split()[2]) / 1e9 for ln in shapes]
    out["kernel"].append(k); out["probe"].append(pv)
    print(r, "kernel windows GB/s", np.round(k, 1), "probe streaming GB/s", np.round(pv, 1), flush=True)
json.dump(out, open('/work/s26/memab.json', 'w'))
