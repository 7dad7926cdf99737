"""Replay plans through the real HostBackend (the agent's runner and samplers, boundary-aligned as
`evaluate` replays them, without the HTTP service); per window: boundary lag, per-core CPU, the
plan's core_busy_target.  usage: backend_replay.py OUT.json RUNNER|- PLAN.h5...
MIMESYS_AGENT_CONFIG: an agent config whose state_dir holds this host's calibration."""
import os
import asyncio, sys, json, numpy as np, h5py
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../../.."))
from agentd.config import load_config
from agentd.host_backend import HostBackend
from mimesys.plan import Plan
from mimesys.backend import RunOptions

async def run(paths, runner):
    cfg = load_config(os.environ["MIMESYS_AGENT_CONFIG"])
    be = HostBackend.from_config(cfg)
    if runner:
        from pathlib import Path; be.runner_binary = Path(runner)
    names = [m.name for m in be.metric_schema()]
    ci = [names.index(f"cpu.util.core{c}") for c in be.cpus]
    out = {}
    for p in paths:
        plan = Plan.read(p)
        rows = []
        async for w in be.execute(plan, RunOptions(record=False, warmup_windows=1)):
            rows.append([float(w.values[i]) for i in ci])
        lags = np.array(be.boundary_lag_ns[:len(rows)+1]) / 1e6
        out[p] = {"cpu": rows, "lag_ms": lags.tolist(),
                  "target": None if plan.core_busy_target is None else plan.core_busy_target.tolist()}
        print(p, "lag ms median %.2f p90 %.2f max %.2f" % (np.median(lags), np.percentile(lags, 90), lags.max()), flush=True)
    await be.close()
    return out

if __name__ == "__main__":
    outp = sys.argv[1]; runner = sys.argv[2] if sys.argv[2] != "-" else None
    res = asyncio.run(run(sys.argv[3:], runner))
    json.dump(res, open(outp, "w"))
