"""Soak a real agent process on 127.0.0.1 (issue 16): back-to-back runs with random cancels
(double DELETEs included), 50 monitor clients of which some stop reading, /v1/generate
requests during runs. Reports wedged runs (still "running" well after it should have ended),
incomplete traces of completed runs, RSS and open fds over time, /healthz latency (probed from
a process of its own, beside a bare control server's: a stall both show is the host's) and the
agent's own event-loop lag (its /metrics).

The agent uses the simulated host backend at real pace (labelled simulated): what is soaked
is the agent's API, event loop and run life cycle, not the host's stressors.

    python bench/hardening_soak.py --minutes 30 [--out bench/results/hardening/soak.jsonl]
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

from agentd import wire  # noqa: E402
from agentd.catalog import load_catalog  # noqa: E402
from agentd.plan import Plan  # noqa: E402
from agentd.trace import Trace  # noqa: E402
from bench.hardening_agent import control_server, healthz_probing, healthz_summary, loop_lag, real_agent  # noqa: E402


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


async def drive(s, agent, catalog, rng, pyrng, minutes: float, t_start: float, stats: dict, samples: list) -> None:
    """Back-to-back runs until `minutes` have passed: random cancels (double DELETEs among
    them), a generate request during each run, every completed run's trace read back."""
    next_sample = 0.0
    while time.monotonic() - t_start < minutes * 60:
        el = time.monotonic() - t_start
        if el >= next_sample:
            samples.append((round(el, 1), round(agent.rss_mib(), 1), agent.fds()))
            next_sample += 15.0
        T = int(rng.integers(5, 40))
        plan = make_plan(catalog, rng, T)
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
            if r.status == 409:
                stats["generate_409"] += 1
            else:
                stats["generate_other"][str(r.status)] = stats["generate_other"].get(str(r.status), 0) + 1
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
            stats["wedged"] += 1
            break
        stats[st["state"]] = stats.get(st["state"], 0) + 1
        if st["state"] == "done":
            async with s.get(f"{agent.url}/v1/runs/{run_id}/trace.h5") as r:
                raw = await r.read()
            tr = Trace.read(raw, where="trace.h5") if r.status == 200 else None
            if tr is None or tr.T != T or not np.isfinite(tr.values).any():
                stats["incomplete_traces"] += 1


async def soak(agent, minutes: float, seed: int, control_url: str, probe_log: Path) -> dict:
    rng = np.random.default_rng(seed)
    pyrng = random.Random(seed)
    catalog = load_catalog()
    headers = {"Authorization": f"Bearer {agent.token}"}
    stop = asyncio.Event()
    counts = {"connected": 0, "frames": 0, "reconnects": 0}
    tasks = [asyncio.create_task(monitor_client(agent.url, headers, i >= 10, stop, counts)) for i in range(50)]
    samples = []          # (t_s, rss_mib, fds)
    stats = {"runs": 0, "done": 0, "cancelled": 0, "failed": 0, "double_delete": 0, "wedged": 0,
             "incomplete_traces": 0, "generate_409": 0, "generate_other": {}, "post_errors": {}}
    t_start = time.monotonic()
    with healthz_probing(agent.url, control_url, headers, probe_log):
        async with aiohttp.ClientSession(headers=headers) as s:
            await drive(s, agent, catalog, rng, pyrng, minutes, t_start, stats, samples)
        samples.append((round(time.monotonic() - t_start, 1), round(agent.rss_mib(), 1), agent.fds()))
    lag = await loop_lag(agent.url, headers)
    stop.set()
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    rss = [x[1] for x in samples]
    fds = [x[2] for x in samples]
    return {"bench": "hardening_soak", "minutes": round((time.monotonic() - t_start) / 60, 2),
            "backend": "sim (simulated host, real pace; a real agent process on 127.0.0.1)",
            **stats, "monitor_clients": 50, "monitor_clients_not_reading": 10,
            "monitor_frames_received": counts["frames"], "monitor_reconnects": counts["reconnects"],
            "rss_mib_first": rss[0], "rss_mib_last": rss[-1], "rss_mib_max": max(rss),
            "rss_mib_after_5min": next((x[1] for x in samples if x[0] >= 300), rss[-1]),
            "fds_first": fds[0], "fds_last": fds[-1], "fds_max": max(fds),
            **healthz_summary(probe_log), **lag, "samples_t_rss_fds": samples}


def _tiny_trace() -> dict:
    from agentd.metrics import MetricSpec
    return Trace(np.zeros((3, 1), np.float32), [MetricSpec("cpu.util", "fraction")]).to_wire()


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=30.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=Path("bench/results/hardening/soak.jsonl"))
    ap.add_argument("--note", default="", help="e.g. what else loaded the host")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="mimesys-soak-") as d:
        with real_agent(Path(d), speedup=1.0) as agent, control_server() as control:
            result = asyncio.run(soak(agent, args.minutes, args.seed, control, Path(d) / "healthz.txt"))
            result["agent_alive_at_end"] = agent.proc.poll() is None
    result["note"] = args.note
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("a") as f:
        f.write(json.dumps(result) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "samples_t_rss_fds"}))


if __name__ == "__main__":
    main()
