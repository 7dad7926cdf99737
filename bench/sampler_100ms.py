"""The samplers at 100 ms: what recording every 0.1 s costs and whether the rate holds.

Two measurements on the real host backend, both through the product's own code:

1. record: `mimesys-agent record --interval 0.1`'s recording loop (agentd.commands.record._record,
   the backend monitor path, the trace file appended and flushed every 60 s as `record` does)
   in this process for --seconds (default 600 = 10 minutes).
   cpu_percent_of_core = this process's CPU time (user + system, all threads) over the wall
   time, as a percentage of one core (it includes the backend's start-up, probing the samplers
   once: about 0.3 s of CPU, 0.05 % over 10 minutes). missed_samples: from the windows' start times, every gap
   longer than 1.5 intervals counts round(gap / interval) − 1 missed samples (the monitor skips a
   slot it cannot keep, it never bursts to catch up); expected = seconds / interval. Jitter: the
   spread of the gaps around the interval.
2. api_run: a plan with window_s = 0.1 (a CPU duty cycle on one thread) run through a real
   `mimesys-agent serve` on 127.0.0.1 (POST /v1/runs, WebSocket trace stream) for
   --run-seconds: windows planned vs recorded, the agent's boundary-sample lag (/v1/info
   "alignment") and the agent process's CPU percent while it ran (the runner is a separate
   process, not counted).

What else ran: the load average at start and end, and the processes that used the most CPU
over the run (psutil, sampled every 20 s), so a reader can judge how quiet the host was.
Prints ONE JSON line and writes it to --out.

    .venv/bin/python bench/sampler_100ms.py [--seconds 600] [--run-seconds 60] [--out FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))


def cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


class OtherLoad:
    """Mean CPU percent per process name (not this process) over the measurement."""

    def __init__(self):
        self.acc: dict[str, list[float]] = defaultdict(list)
        self.samples = 0
        self._prev: dict[int, tuple[str, float]] = {}

    def sample(self):
        now = {}
        for p in psutil.process_iter(["name", "cmdline", "cpu_times"]):
            if p.pid == os.getpid() or p.info["cpu_times"] is None:
                continue
            t = p.info["cpu_times"]
            cmd = " ".join((p.info["cmdline"] or [])[:3])[:80] or p.info["name"]
            now[p.pid] = (cmd, t.user + t.system)
        return now

    async def run(self, stop: asyncio.Event, every: float = 20.0):
        prev, t0 = await asyncio.to_thread(self.sample), time.monotonic()
        while not stop.is_set():
            try:
                await asyncio.wait_for(stop.wait(), every)
            except asyncio.TimeoutError:
                pass
            cur, t1 = await asyncio.to_thread(self.sample), time.monotonic()
            per: dict[str, float] = defaultdict(float)
            for pid, (cmd, c) in cur.items():
                if pid in prev:
                    per[cmd] += 100 * (c - prev[pid][1]) / (t1 - t0)
            for cmd, v in per.items():
                self.acc[cmd].append(v)
            self.samples += 1
            prev, t0 = cur, t1

    def top(self, n: int = 8) -> list[dict]:
        means = {cmd: sum(v) / max(self.samples, 1) for cmd, v in self.acc.items()}
        return [{"cmd": c, "cpu_percent": round(v, 1)} for c, v in sorted(means.items(), key=lambda kv: -kv[1])[:n]
                if v >= 0.5]


def gap_stats(starts_ns: np.ndarray, interval: float) -> dict:
    gaps = np.diff(starts_ns.astype(np.float64)) / 1e9
    long = gaps > 1.5 * interval
    missed = int(np.sum(np.round(gaps[long] / interval) - 1))
    dev = np.abs(gaps[~long] - interval) * 1e3
    return {"gaps_over_1.5x": int(long.sum()), "missed_samples": missed,
            "interval_ms_median": round(float(np.median(gaps)) * 1e3, 3),
            "jitter_ms_p50": round(float(np.percentile(dev, 50)), 3) if dev.size else None,
            "jitter_ms_p99": round(float(np.percentile(dev, 99)), 3) if dev.size else None,
            "jitter_ms_max": round(float(dev.max()), 3) if dev.size else None}


async def measure_record(seconds: float, interval: float, tmp: Path) -> dict:
    from agentd.commands.record import _record
    from agentd.config import config_from_dict

    cfg = config_from_dict({"agent": {"state_dir": str(tmp / "rec-state"), "scratch_dir": str(tmp / "rec-scratch")}})
    windows = int(round(seconds / interval))
    from mimesys.trace import Trace
    c0, t0 = cpu_s(), time.monotonic()
    # the product's loop as `record` runs it: the trace file is appended and flushed as it goes
    await _record(cfg, tmp / "record.h5", windows, interval, False, 60.0)
    wall, cpu = time.monotonic() - t0, cpu_s() - c0
    trace = Trace.read(tmp / "record.h5")
    starts = np.asarray(trace.window_start_ns, np.int64)
    return {"interval_s": interval, "seconds": seconds, "expected_samples": windows, "recorded_samples": trace.T,
            "wall_s": round(wall, 2), "cpu_s": round(cpu, 3), "cpu_percent_of_core": round(100 * cpu / wall, 3),
            "metrics": len(trace.metrics), "available_metrics": sum(m.available for m in trace.metrics),
            **gap_stats(starts, interval),
            "nan_share_of_available": round(float(np.isnan(trace.values[:, [m.available for m in trace.metrics]]).mean()), 5)}


async def measure_api_run(run_seconds: float, interval: float, tmp: Path) -> dict:
    from agent_overhead import TOKEN, start_agent

    from mimesys.backend import RunOptions
    from mimesys.catalog import load_catalog
    from mimesys.plan import Plan
    from controller.fleet import AgentClient

    proc, url = start_agent(tmp)
    agent = psutil.Process(proc.pid)
    client = AgentClient(url, TOKEN)
    try:
        info = await client.info()
        threads = len((info.get("fingerprint") or {}).get("agent_cpus") or [0])
        cat = load_catalog()
        T = int(round(run_seconds / interval))
        a = np.zeros((T, len(cat), threads), np.float32)
        m = cat.index("cpu_int_crc32")
        a[:, m, 0] = np.where((np.arange(T) // 5) % 2 == 0, 0.8, 0.0)   # 0.5 s on, 0.5 s off
        plan = Plan.from_catalog(a, cat, window_s=interval, seed=0, provenance={"by": "bench/sampler_100ms.py"})
        c0, t0 = agent.cpu_times(), time.monotonic()
        res = await client.run_when_host_free(plan, RunOptions(repetitions=1, warmup_windows=1, record=False, seed=0))
        c1, wall = agent.cpu_times(), time.monotonic() - t0
        align = (await client.info()).get("alignment") or {}
        tr = res.trace
        starts = np.asarray(tr.window_start_ns, np.int64) if tr.window_start_ns is not None else np.zeros(0)
        return {"window_s": interval, "planned_windows": T, "recorded_windows": tr.T, "missing_windows": T - tr.T,
                "nan_share_of_available": round(float(np.isnan(tr.values[:, [s.available for s in tr.metrics]]).mean()), 5),
                "wall_s": round(wall, 2),
                "agent_cpu_percent_of_core": round(100 * ((c1.user + c1.system) - (c0.user + c0.system)) / wall, 3),
                "boundary_lag": align, **({"window_gaps": gap_stats(starts, interval)} if starts.size > 1 else {})}
    finally:
        await client.close()
        proc.terminate()
        proc.wait(10)


async def main(args) -> dict:
    stop = asyncio.Event()
    other = OtherLoad()
    watcher = asyncio.create_task(other.run(stop))
    load0 = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="mimesys-bench-100ms-") as d:
        tmp = Path(d)
        rec = await measure_record(args.seconds, args.interval, tmp) if args.seconds > 0 else None
        if args.out and rec:   # the 10-minute part is kept even if the API part fails
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.with_suffix(".record.json").write_text(json.dumps(rec) + "\n")
        api = await measure_api_run(args.run_seconds, args.interval, tmp) if args.run_seconds > 0 else None
    stop.set()
    await watcher
    return {"bench": "sampler_100ms", "host": os.uname().nodename, "cpus": os.cpu_count(),
            "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "loadavg_start": [round(x, 2) for x in load0], "loadavg_end": [round(x, 2) for x in os.getloadavg()],
            "other_processes_top_cpu": other.top(), "record": rec, "api_run": api, "simulated": False}


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=600.0, help="Recording part (0: skip it).")
    ap.add_argument("--interval", type=float, default=0.1)
    ap.add_argument("--run-seconds", type=float, default=60.0)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    doc = asyncio.run(main(args))
    line = json.dumps(doc)
    print(line)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(line + "\n")
