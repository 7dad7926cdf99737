"""Runner timing on this host: how exactly mimesys-runner executes a plan.

Prints ONE JSON line:
  p99_segment_error_ms  99th percentile of |achieved − planned| over every segment of a
                        plan of random compositions (every catalog stressor, Dirichlet with an
                        idle share, ~30 % of entries zeroed) on all cores; W = 1 s,
                        300 windows by default (5 minutes)
  drift_ms              the last window's start (latest worker wake-up) minus its planned
                        start t0 + (T−1)·W
  idle_cpu_percent      CPU time of the whole runner process (all threads, from
                        /proc/<pid>/task/*/schedstat) during an all-idle plan, as a percent of
                        one core
plus p50/max segment error, the share of segments within 0.1 ms, p99 per resource class and per
stressor (with counts of segments that overran or stopped short by > 1 ms), the worst
window-start lateness, and the load average
before and after (the machine may be shared: read the figures with it).

    python bench/runner_timing.py [--windows 300] [--idle-windows 30] [--window-s 1.0] [--nice N]
                                  [--png bench/out/runner_timing.png]

The PNG shows the distribution of segment errors per resource class and each window's
start lateness over the run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mimesys.catalog import load_catalog  # noqa: E402
from mimesys.hostpaths import online_cpus  # noqa: E402
from mimesys.plan import Plan  # noqa: E402
from agentd.runner import RunnerConfig, WindowDone, WindowStarted, start_runner  # noqa: E402


def random_plan(catalog, T: int, K: int, window_s: float, seed: int) -> Plan:
    rng = np.random.default_rng(seed)
    M = len(catalog)
    a = rng.dirichlet(np.full(M + 1, 0.5), size=(T, K))[..., :M]      # last share = idle
    a[rng.random(a.shape) < 0.3] = 0
    return Plan.from_catalog(np.transpose(a, (0, 2, 1)).astype(np.float32), catalog, window_s=window_s, seed=seed,
                             provenance={"by": "bench/runner_timing.py"})


def process_cpu_ns(pid: int) -> int:
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (OSError, ValueError):
            pass
    return total


async def pace_rates_now(catalog, cpus, scratch: str) -> dict:
    """The paced variants' rates from a quick one-thread calibration of their bases, as an
    agent resolves them from its calibration file."""
    from agentd.calibrator import measure, pace_rates
    bases = sorted({catalog.stressors[m].pace["base"] for m in catalog.paced()})
    doc = await measure(RunnerConfig(cpus=cpus[:1], scratch_dir=scratch), window_s=0.3, all_threads=False,
                        only=bases, catalog=catalog)
    return pace_rates(catalog, doc)


async def timing_run(plan: Plan, cpus, scratch: str, progress: bool, nice: int, paces: dict):
    handle = await start_runner(plan, RunnerConfig(cpus=cpus, scratch_dir=scratch, nice=nice, pace_Bps=paces))
    errors, lateness, classes, names = [], [], [], []
    cls = np.array([s.resource_class for s in handle.catalog.stressors])
    stressor = np.array([s.name for s in handle.catalog.stressors])
    async for ev in handle.events():
        if isinstance(ev, WindowDone):
            mask = ev.planned_ns > 0
            errors.append(ev.ran_ns[mask] - ev.planned_ns[mask])
            classes.append(np.broadcast_to(cls[:, None], mask.shape)[mask])
            names.append(np.broadcast_to(stressor[:, None], mask.shape)[mask])
            lateness.append(int((ev.thread_start_ns - ev.planned_start_ns).max()))
            if progress:
                print(f"\rwindow {ev.window + 1}/{plan.T}", end="", file=sys.stderr, flush=True)
    if progress:
        print(file=sys.stderr)
    ex = await handle.wait()
    if not ex.ok:
        raise SystemExit(f"runner failed: {ex.status} {ex.detail} {ex.stderr_tail}")
    return (np.concatenate(errors), np.concatenate(classes), np.concatenate(names), np.array(lateness),
            handle.notes)


async def idle_run(catalog, T: int, K: int, window_s: float, cpus):
    plan = Plan.from_catalog(np.zeros((T, len(catalog), K), np.float32), catalog, window_s=window_s)
    handle = await start_runner(plan, RunnerConfig(cpus=cpus))
    marks = {}
    async for ev in handle.events():
        # from the start of window 0 to the start of the last window (threads still alive)
        if isinstance(ev, WindowStarted) and ev.window in (0, T - 1):
            marks[ev.window] = (time.monotonic_ns(), process_cpu_ns(handle.pid))
    await handle.wait()
    (t0, c0), (t1, c1) = marks[0], marks[T - 1]
    return 100.0 * (c1 - c0) / (t1 - t0)


def plot(err, cls, late, args, png: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(12, 4.5))
    bins = np.logspace(-3, np.log10(max(err.max() / 1e6, 1.0)) + 0.1, 60)
    for c in sorted(set(cls)):
        a.hist(np.maximum(err[cls == c] / 1e6, 1e-3), bins=bins, histtype="step", label=c)
    a.axvline(2.0, color="k", ls="--", lw=0.8, label="2 ms target (p99)")
    a.set_xscale("log")
    a.set_xlabel("|achieved - planned| per segment (ms)")
    a.set_ylabel("segments")
    a.legend()
    b.plot(np.arange(len(late)), late / 1e6, lw=0.8)
    b.set_xlabel("window")
    b.set_ylabel("latest thread wake-up after t0 + i*W (ms)")
    fig.suptitle(f"mimesys-runner, {len(late)} windows x {args.window_s:g} s, {os.cpu_count()} CPUs, "
                 f"nice {args.nice}, load avg {os.getloadavg()[0]:.1f}")
    fig.tight_layout()
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png, dpi=110)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--windows", type=int, default=300)
    ap.add_argument("--idle-windows", type=int, default=30)
    ap.add_argument("--window-s", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--scratch-dir", default="/var/tmp")
    ap.add_argument("--progress", action="store_true")
    ap.add_argument("--png", type=Path, default=ROOT / "bench" / "out" / "runner_timing.png")
    ap.add_argument("--nice", type=int, default=0,
                    help="worker threads' nice value (default 0, as the agent runs it); reported in the output")
    args = ap.parse_args()

    catalog = load_catalog()
    cpus = tuple(online_cpus())
    K = len(cpus)
    load_before = os.getloadavg()
    plan = random_plan(catalog, args.windows, K, args.window_s, args.seed)
    paces = asyncio.run(pace_rates_now(catalog, cpus, args.scratch_dir))
    signed, cls, names, late, notes = asyncio.run(timing_run(plan, cpus, args.scratch_dir, args.progress, args.nice,
                                                             paces))
    load_after = os.getloadavg()
    err = np.abs(signed)
    reach_kernels = {"disk_qd_read", "disk_qd_write", "pagecache_rw", "page_fault_churn", "cpu_contend", "futex_pingpong"}
    reach_names = {s.name for s in catalog.stressors if s.kernel in reach_kernels or s.pace is not None}
    reach = np.isin(names, sorted(reach_names))
    idle = asyncio.run(idle_run(catalog, args.idle_windows, K, args.window_s, cpus))
    plot(err, cls, late, args, args.png)
    print(json.dumps({
        "bench": "runner_timing",
        "windows": args.windows, "nice": args.nice, "window_s": args.window_s, "threads": K, "segments": int(err.size),
        "p99_segment_error_ms": round(float(np.percentile(err, 99)) / 1e6, 4),
        "p50_segment_error_ms": round(float(np.percentile(err, 50)) / 1e6, 4),
        "max_segment_error_ms": round(float(err.max()) / 1e6, 4),
        "segments_within_0_1ms": round(float((err <= 100_000).mean()), 4),
        "p99_segment_error_ms_by_class": {c: round(float(np.percentile(err[cls == c], 99)) / 1e6, 4)
                                          for c in sorted(set(cls))},
        # per stressor: p99 of |error|, and how many of its segments overran / stopped short by > 1 ms
        "by_stressor": {n: {"p99_ms": round(float(np.percentile(err[names == n], 99)) / 1e6, 3),
                            "over_1ms": int((signed[names == n] > 1_000_000).sum()),
                            "short_1ms": int((signed[names == n] < -1_000_000).sum()),
                            "segments": int((names == n).sum())}
                        for n in sorted(set(names))},
        # the kernels and paced variants added for catalog reach (issue 13), per class
        "p99_segment_error_ms_by_class_reach_variants": {
            c: round(float(np.percentile(err[(cls == c) & reach], 99)) / 1e6, 4)
            for c in sorted(set(cls[reach]))},
        "drift_ms": round(float(late[-1]) / 1e6, 4),
        "max_window_start_lateness_ms": round(float(late.max()) / 1e6, 4),
        "idle_cpu_percent": round(idle, 4), "idle_windows": args.idle_windows,
        "loadavg_before": [round(x, 2) for x in load_before], "loadavg_after": [round(x, 2) for x in load_after],
        "cpus": os.cpu_count(), "notes": notes, "png": str(args.png), "catalog_hash": catalog.hash,
        "stressors": len(catalog), "pace_Bps": {k: round(v) for k, v in paces.items()},
    }))


if __name__ == "__main__":
    main()
