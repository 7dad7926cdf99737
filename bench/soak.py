"""Soak a real agent process on 127.0.0.1 (issues 16 and 23): back-to-back runs with random
cancels (double DELETEs included), 50 monitor clients of which some stop reading, /v1/generate
requests during runs, and a flood of public /metrics scrapes from a process of its own. Prints
ONE JSON line: runs completed, late runs (not ended 20 s after they should have: a stall) and
wedged ones (still "running" two minutes later; goal 0), incomplete traces of completed runs
(goal 0), RSS and open fds at start and end, the agent's own event-loop lag p99 over the soak
(goal < 50 ms; from its /metrics histogram),
/healthz latency (probed from a process of its own, beside a bare control server's: a stall
both show is the host's) and what the flood got back.

The agent uses the simulated host backend at real pace (labelled simulated): what is soaked
is the agent's API, event loop and run life cycle, not the host's stressors.

    python bench/soak.py --minutes 30 [--out bench/results/hardening/soak_<date>.json]
    python bench/soak.py --seconds 15      # the short version tests/test_soak_short.py runs
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mimesys import tracestream, wire  # noqa: E402
from mimesys.catalog import load_catalog  # noqa: E402
from mimesys.fsutil import atomic_write_text  # noqa: E402
from mimesys.plan import Plan  # noqa: E402
from mimesys.trace import Trace  # noqa: E402
from bench.hardening_agent import (control_server, healthz_probing, healthz_summary, in_own_process,  # noqa: E402
                                   loop_lag, real_agent)

FLOOD_CLIENTS = 16      # concurrent scrapers: more than the agent's api.metrics_max_requests
METRICS_MAX_REQUESTS = 8


def make_plan(catalog, rng, T, K=2, window_s=0.2) -> Plan:
    a = np.zeros((T, len(catalog), K), np.float32)
    a[:, rng.integers(len(catalog)), :] = rng.uniform(0, 1, (T, K)).astype(np.float32)
    return Plan.from_catalog(a, catalog, window_s=window_s, seed=int(rng.integers(1 << 31)))


async def monitor_client(url, headers, reads: bool, stop: asyncio.Event, counts: dict):
    while not stop.is_set():
        try:
            async with aiohttp.ClientSession(headers=headers) as s:
                async with s.ws_connect(url + "/v1/monitor", heartbeat=None) as ws:
                    counts["connected"] += 1
                    while not stop.is_set():
                        if reads:
                            msg = await ws.receive(timeout=30)
                            if msg.type != aiohttp.WSMsgType.BINARY:
                                break
                            counts["frames"] += 1
                        else:
                            await asyncio.sleep(1.0)     # connected, never reads
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError):
            counts["reconnects"] += 1
            await asyncio.sleep(1.0)


async def wait_end(s, url, run_id, timeout_s):
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s:
        async with s.get(f"{url}/v1/runs/{run_id}") as r:
            st = wire.unpack(await r.read())
        if st["state"] != "running":
            return st
        await asyncio.sleep(0.1)
    return None


async def drive(s, agent, catalog, rng, pyrng, seconds: float, t_start: float, stats: dict, samples: list) -> None:
    """Back-to-back runs until `seconds` have passed: random cancels (double DELETEs among
    them), a generate request during each run, every completed run's trace read back. A run
    is no longer than what is left (at least 5 windows), so a short soak ends on time."""
    next_sample = 0.0
    window_s = 0.2
    while (left := seconds - (time.monotonic() - t_start)) > 0:
        el = time.monotonic() - t_start
        if el >= next_sample:
            samples.append((round(el, 1), round(agent.rss_mib(), 1), agent.fds()))
            next_sample += 15.0
        T = int(rng.integers(5, max(6, min(40, int(left / window_s)))))
        plan = make_plan(catalog, rng, T, window_s=window_s)
        async with s.post(agent.url + "/v1/runs", data=wire.pack({"plan": plan.to_wire()})) as r:
            body = wire.unpack(await r.read())
            if r.status != 201:
                key = str(r.status)
                stats["post_errors"][key] = stats["post_errors"].get(key, 0) + 1
                await asyncio.sleep(0.2)
                continue
        run_id = body["run_id"]
        stats["runs"] += 1
        # a generate request during the run: must be refused (409), never compete for the CPUs
        async with s.post(agent.url + "/v1/generate",
                          data=wire.pack({"trace": _tiny_trace()})) as r:
            status = r.status
        if status == 409:
            stats["generate_409"] += 1
        else:
            # Late only if the run had already ended (a short run on a loaded host): not a failure.
            async with s.get(f"{agent.url}/v1/runs/{run_id}") as r:
                ended = wire.unpack(await r.read())["state"] != "running"
            if ended:
                stats["generate_after_run_ended"] += 1
            else:
                stats["generate_other"][str(status)] = stats["generate_other"].get(str(status), 0) + 1
        action = pyrng.random()
        if action < 0.25:
            await asyncio.sleep(pyrng.uniform(0, T * plan.window_s))
            await s.delete(f"{agent.url}/v1/runs/{run_id}")
        elif action < 0.45:
            await asyncio.sleep(pyrng.uniform(0, T * plan.window_s))
            stats["double_delete"] += 1
            await asyncio.gather(s.delete(f"{agent.url}/v1/runs/{run_id}"),
                                 s.delete(f"{agent.url}/v1/runs/{run_id}"))
        st = await wait_end(s, agent.url, run_id, timeout_s=T * plan.window_s + 20)
        if st is None:
            # Late (a stall: the agent's loop lag says whose) or wedged (never ends): give it
            # two more minutes before calling it wedged and stopping the soak.
            stats["late"] += 1
            st = await wait_end(s, agent.url, run_id, timeout_s=120)
            if st is None:
                stats["wedged"] += 1
                break
        stats[st["state"]] = stats.get(st["state"], 0) + 1
        if st["state"] == "done":
            async with s.get(f"{agent.url}/v1/runs/{run_id}/trace.msgpack") as r:
                raw = await r.read()
            tr = tracestream.read_messages(raw, "recorded trace", max_bytes=1 << 30) if r.status == 200 else None
            if tr is None or tr.T != T or not np.isfinite(tr.values).any():
                stats["incomplete_traces"] += 1


def metrics_flooder(url: str, clients: int, rps: float, out: str) -> None:
    """In its own process (the driver's loop is busy with 50 monitor clients): `clients`
    unauthenticated scrapers of /metrics, together at most `rps` requests per second, until
    killed; every 0.25 s the status counts so far are written to `out` as one JSON object."""
    async def scraper(s, counts, gap_s):
        while True:
            t0 = time.monotonic()
            try:
                async with s.get(url + "/metrics", timeout=aiohttp.ClientTimeout(total=30)) as r:
                    await r.read()
                    key = str(r.status)
            except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as e:
                key = type(e).__name__
            counts[key] = counts.get(key, 0) + 1
            await asyncio.sleep(max(0.0, gap_s - (time.monotonic() - t0)))

    async def main():
        counts: dict = {}
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=clients)) as s:
            tasks = [asyncio.create_task(scraper(s, counts, clients / rps)) for _ in range(clients)]
            while True:
                await asyncio.sleep(0.25)
                # Whole or not at all: the block's end terminates this process, maybe mid-write,
                # and a truncated file read there failed the soak (CI, stop 31).
                atomic_write_text(out, json.dumps(counts))
                if any(t.done() for t in tasks):
                    raise RuntimeError(f"a /metrics scraper stopped: {[t.exception() for t in tasks if t.done()]}")
    asyncio.run(main())


def loop_lag_quantile(before: dict, after: dict, q: float) -> tuple[float | None, float | None]:
    """(interpolated q-quantile, upper bound of the bucket it falls in) of the agent's event-loop
    lag between two snapshots of its cumulative histogram {le: count}, in ms: what PromQL's
    histogram_quantile over the soak gives. The bucket bound is a guarantee (the quantile is at
    most that), the interpolation an estimate."""
    les = sorted((float(k), after[k] - before.get(k, 0)) for k in after)
    total = les[-1][1] if les else 0
    if total <= 0:
        return None, None
    rank, lo, prev = q * total, 0.0, 0
    for le, cum in les:
        if cum >= rank:
            if le == float("inf"):
                return lo * 1e3, None
            return round((lo + (le - lo) * (rank - prev) / max(cum - prev, 1)) * 1e3, 2), le * 1e3
        lo, prev = le, cum
    return None, None


async def loop_lag_buckets(url: str, headers: dict) -> dict:
    """The agent's cumulative event-loop lag histogram {le (str): count} from its /metrics."""
    from prometheus_client.parser import text_string_to_metric_families
    async with aiohttp.ClientSession(headers=headers) as s:
        for _ in range(50):
            async with s.get(url + "/metrics") as r:
                if r.status == 503:   # the flood holds every scrape slot (api.metrics_max_requests)
                    await asyncio.sleep(0.1)
                    continue
                if r.status != 200:
                    raise RuntimeError(f"GET /metrics: HTTP {r.status}")
                text = await r.text()
                break
        else:
            raise RuntimeError("GET /metrics: 503 (every scrape slot busy) 50 times in a row")
    return {smp.labels["le"]: smp.value for fam in text_string_to_metric_families(text) for smp in fam.samples
            if smp.name == "mimesys_event_loop_lag_seconds_bucket"}


def flooding(url: str, clients: int, rps: float, out: Path):
    """metrics_flooder in a process of its own for the duration of the block."""
    return in_own_process(metrics_flooder, url, clients, rps, str(out))


async def soak(agent, seconds: float, seed: int, control_url: str, work: Path, flood_rps: float) -> dict:
    rng = np.random.default_rng(seed)
    pyrng = random.Random(seed)
    catalog = load_catalog()
    headers = {"Authorization": f"Bearer {agent.token}"}
    stop = asyncio.Event()
    counts = {"connected": 0, "frames": 0, "reconnects": 0}
    tasks = [asyncio.create_task(monitor_client(agent.url, headers, i >= 10, stop, counts)) for i in range(50)]
    samples = []          # (t_s, rss_mib, fds)
    stats = {"runs": 0, "done": 0, "cancelled": 0, "failed": 0, "double_delete": 0, "late": 0, "wedged": 0,
             "incomplete_traces": 0, "generate_409": 0, "generate_after_run_ended": 0, "generate_other": {},
             "post_errors": {}}
    probe_log, flood_log = work / "healthz.txt", work / "flood.json"
    with healthz_probing(agent.url, control_url, headers, probe_log), \
            flooding(agent.url, FLOOD_CLIENTS, flood_rps, flood_log):
        # The start figures are taken once every client is there (the flood has counted once,
        # the monitor clients are connected): start and end then compare the same load.
        deadline = time.monotonic() + 30
        while (not flood_log.exists() or counts["connected"] < 50) and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        lag_before = await loop_lag_buckets(agent.url, headers)     # the agent's start-up is not the soak's
        t_start = time.monotonic()
        async with aiohttp.ClientSession(headers=headers) as s:
            await drive(s, agent, catalog, rng, pyrng, seconds, t_start, stats, samples)
        samples.append((round(time.monotonic() - t_start, 1), round(agent.rss_mib(), 1), agent.fds()))
        await asyncio.sleep(0.3)                                  # the flooder's last count
    flood = json.loads(flood_log.read_text()) if flood_log.exists() else {}
    lag = await loop_lag(agent.url, headers)
    p99, p99_bound = loop_lag_quantile(lag_before, await loop_lag_buckets(agent.url, headers), 0.99)
    stop.set()
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    rss = [x[1] for x in samples]
    fds = [x[2] for x in samples]
    goals = {"wedged_0": stats["wedged"] == 0, "incomplete_traces_0": stats["incomplete_traces"] == 0,
             "rss_flat_within_10pct": rss[-1] <= 1.1 * rss[0], "fds_flat_within_10pct": fds[-1] <= 1.1 * fds[0],
             "loop_lag_p99_under_50ms": p99_bound is not None and p99_bound <= 50.0}
    return {"bench": "soak", "minutes": round((time.monotonic() - t_start) / 60, 2),
            "backend": "sim (simulated host, real pace; a real agent process on 127.0.0.1)",
            **stats, "monitor_clients": 50, "monitor_clients_not_reading": 10,
            "monitor_frames_received": counts["frames"], "monitor_reconnects": counts["reconnects"],
            "rss_mib_first": rss[0], "rss_mib_last": rss[-1], "rss_mib_max": max(rss),
            "rss_mib_after_5min": next((x[1] for x in samples if x[0] >= 300), rss[-1]),
            "fds_first": fds[0], "fds_last": fds[-1], "fds_max": max(fds),
            "loop_lag_ms_p99": p99, "loop_lag_ms_p99_at_most": p99_bound,
            "metrics_flood": {"clients": FLOOD_CLIENTS, "rps_asked": flood_rps,
                              "agent_metrics_max_requests": METRICS_MAX_REQUESTS, "statuses": flood,
                              "rps_served": round(flood.get("200", 0) / max(time.monotonic() - t_start, 1e-9), 1)},
            "goals_met": goals, **healthz_summary(probe_log), **lag, "samples_t_rss_fds": samples}


def _tiny_trace() -> dict:
    from mimesys.metrics import MetricSpec
    return Trace(np.zeros((3, 1), np.float32), [MetricSpec("cpu.util", "fraction")]).to_wire()


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    length = ap.add_mutually_exclusive_group()
    length.add_argument("--minutes", type=float, default=30.0)
    length.add_argument("--seconds", type=float, help="instead of --minutes (the in-suite short soak)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--flood-rps", type=float, default=200.0,
                    help="public /metrics scrapes per second asked by the flood (all of its clients)")
    ap.add_argument("--out", type=Path, help="also append the full result (RSS/fd samples included) here")
    ap.add_argument("--note", default="", help="e.g. what else loaded the host")
    ap.add_argument("--keep", type=Path, help="copy the agent's log and the /healthz probe log here "
                    "(the soak's own directory is removed): what a stall's cause is read from")
    args = ap.parse_args(argv)
    seconds = args.seconds if args.seconds is not None else args.minutes * 60
    with tempfile.TemporaryDirectory(prefix="mimesys-soak-") as d:
        extra = f"public_metrics = true\nmetrics_max_requests = {METRICS_MAX_REQUESTS}\n"
        with real_agent(Path(d), speedup=1.0, extra_toml=extra) as agent, control_server() as control:
            result = asyncio.run(soak(agent, seconds, args.seed, control, Path(d), args.flood_rps))
            result["agent_alive_at_end"] = agent.proc.poll() is None
        if args.keep is not None:
            import shutil
            args.keep.mkdir(parents=True, exist_ok=True)
            for name in ("agent.log", "healthz.txt", "flood.json"):
                if (Path(d) / name).exists():
                    shutil.copy(Path(d) / name, args.keep / name)
    result["note"] = args.note
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        with args.out.open("a") as f:
            f.write(json.dumps(result) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "samples_t_rss_fds"}), flush=True)


if __name__ == "__main__":
    main()
