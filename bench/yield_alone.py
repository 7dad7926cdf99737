"""How often `--placement yield` leaves a CPU alone on the host, and that it still leaves one a
neighbour keeps busy (issue 42). Real runner, real stressors; run it on a quiet host.

Alone: a two-thread cpu_fp_poly plan at 0.8, 8 windows of 0.25 s, with and without the memory
held growing by 160 MiB a window (the runner's main thread touches every new page): yielded
thread-windows per run, over --runs runs. Beside: one thread on CPU 0, a Python process pinned
there that works W µs and sleeps S µs in a loop (--duties), 6 windows: yielded windows and the
compute each window got, as a share of what it planned. `--runner` compares another build side
by side (the JSON line carries both).

    python bench/yield_alone.py [--runs 12] [--runner stressors/build/mimesys-runner --runner OTHER]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agentd.runner import RunnerConfig, WindowDone, start_runner  # noqa: E402
from mimesys.catalog import load_catalog  # noqa: E402
from mimesys.plan import Plan  # noqa: E402

CPUS = (0, 1)
NEIGHBOUR = """import os, time
os.sched_setaffinity(0, {0})
while True:
    t = time.perf_counter() + %(work)fe-6
    while time.perf_counter() < t: pass
    time.sleep(%(sleep)fe-6)
"""


def plan_of(catalog, T: int, K: int, held_step_B: float) -> Plan:
    a = np.zeros((T, len(catalog), K), np.float32)
    a[:, catalog.index("cpu_fp_poly"), :] = 0.8
    plan = Plan.from_catalog(a, catalog, window_s=0.25, seed=0)
    if held_step_B:
        plan.mem_held_B = np.arange(1, T + 1, dtype=np.float64) * held_step_B
    return plan


def replay(plan: Plan, runner: str) -> tuple[int, list[float]]:
    """(yielded thread-windows, each window's thread-0 CPU / planned compute)."""
    async def go():
        handle = await start_runner(plan, RunnerConfig(cpus=CPUS, placement="yield", binary=runner))
        dones = [ev for ev in [ev async for ev in handle.events()] if isinstance(ev, WindowDone)]
        return dones, dict(handle.info)
    dones, info = asyncio.run(go())
    share = [float(d.thread_cpu_ns[0]) / (0.8 * plan.window_s * 1e9) for d in dones]
    return int(info["yielded"].split()[0]), share


def measure(runner: str, catalog, runs: int, duties: list[tuple[int, int]]) -> dict:
    alone = {}
    for label, step in (("cpu", 0.0), ("memory_growth", float(160 << 20))):
        counts = [replay(plan_of(catalog, 8, 2, step), runner)[0] for _ in range(runs)]
        print(f"{Path(runner).name} alone {label}: {counts}", file=sys.stderr, flush=True)
        alone[label] = {"yielded_of_16": counts, "max": max(counts), "mean": float(np.mean(counts))}
    beside = {}
    for work, sleep in duties:
        proc = subprocess.Popen([sys.executable, "-c", NEIGHBOUR % {"work": work, "sleep": sleep}])
        try:
            time.sleep(0.3)
            got = [replay(plan_of(catalog, 6, 1, 0.0), runner) for _ in range(3)]
        finally:
            proc.kill()
            proc.wait()
        key = f"{work}us_on_{sleep}us_off"
        beside[key] = {"yielded_of_6": [y for y, _ in got],
                       "compute_share_median": [round(float(np.median(s)), 3) for _, s in got]}
        print(f"{Path(runner).name} beside {key}: {beside[key]}", file=sys.stderr, flush=True)
    return {"alone": alone, "beside": beside}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=12, help="runs of each alone plan")
    ap.add_argument("--runner", action="append", help="runner binaries to measure (default: the built one)")
    ap.add_argument("--duties", default="200:200,100:300,1000:1000,50:50",
                    help="neighbours as WORK_US:SLEEP_US, comma-separated")
    args = ap.parse_args()
    if len(os.sched_getaffinity(0)) < 2:
        sys.exit("yield_alone: needs two CPUs")
    catalog = load_catalog(ROOT / "stressors" / "catalog.toml")
    runners = args.runner or [str(ROOT / "stressors" / "build" / "mimesys-runner")]
    duties = [tuple(int(v) for v in d.split(":")) for d in args.duties.split(",")]
    out = {"bench": "yield_alone", "runs": args.runs, "by_runner": {}}
    for r in runners:
        out["by_runner"][r] = measure(r, catalog, args.runs, duties)
    out["loadavg"] = os.getloadavg()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
