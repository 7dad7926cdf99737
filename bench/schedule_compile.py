"""What repetitions cost the agent before a run starts: compile a 1-hour plan (3600 windows of
1 s) on 8 threads, random sparse compositions over the whole catalog, with 1 and with 100
repetitions, and report the compile time and the schedule's size (what the agent writes to the
runner's stdin). Issue 16 measured ≈ 35 s for 100 repetitions with schedule version 1, in which
every repetition was compiled; version 2 stores the plan once and the runner repeats it.

Prints ONE JSON line.

    python bench/schedule_compile.py [--windows 3600] [--threads 8] [--repetitions 100]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mimesys.catalog import load_catalog  # noqa: E402
from mimesys.plan import Plan  # noqa: E402
from agentd.schedule import VERSION, compile_plan  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--windows", type=int, default=3600)
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--repetitions", type=int, default=100)
    args = ap.parse_args()
    catalog = load_catalog()
    plain = [m for m, s in enumerate(catalog.stressors) if s.pace is None]
    rng = np.random.default_rng(0)
    a = np.zeros((args.windows, len(catalog), args.threads), np.float32)
    for t in range(args.windows):
        for k in range(args.threads):
            ms = rng.choice(plain, size=4, replace=False)
            a[t, ms, k] = rng.dirichlet(np.ones(5))[:4]
    plan = Plan.from_catalog(a, catalog, window_s=1.0)
    out = {"bench": "schedule_compile", "schedule_version": VERSION, "windows": args.windows,
           "threads": args.threads, "stressors": len(catalog)}
    for reps in (1, args.repetitions):
        t0 = time.perf_counter()
        sched = compile_plan(plan, catalog, repetitions=reps)
        out[f"reps{reps}"] = {"compile_s": round(time.perf_counter() - t0, 3), "bytes": len(sched.data),
                              "executed_windows": sched.E}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
