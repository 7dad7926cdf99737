"""The agent's own cost and its monitor fan-out, measured on a real agent process.

Starts `mimesys-agent serve` (real host backend) on 127.0.0.1 and measures, from the
agent process's CPU time (user + system, /proc/<pid>/stat via psutil):

1. idle_cpu_percent: no client, nothing sampled, over --seconds;
2. sampler_cpu_percent: one /v1/monitor client, so the agent samples every sampler at
   1 Hz, derives and sends one frame per second, over --seconds (target < 1 % of one core);
3. 200 concurrent /v1/monitor WebSocket clients for --seconds: frames each received,
   missed_frames (the agent's own counter of frames dropped for slow clients, from
   /metrics) and client_seq_gaps (gaps the clients saw in the frames' sequence numbers),
   target 0, and the agent's CPU percent while serving them.

Also sampler_read_ms: median cost of one SamplerSet.read() + derive() in-process.
Prints ONE JSON line. The host's load average is included: other work on the machine
competes with the agent for CPU and can delay it.

    .venv/bin/python bench/agent_overhead.py [--seconds 30] [--clients 200]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
import msgpack
import psutil

ROOT = Path(__file__).resolve().parent.parent
TOKEN = "bench-token-0123456789abcdef"
AUTH = {"Authorization": "Bearer " + TOKEN}


def start_agent(tmp: Path) -> tuple[subprocess.Popen, str]:
    tok = tmp / "token"
    tok.write_text(TOKEN)
    tok.chmod(0o600)
    cfg = tmp / "agent.toml"
    cfg.write_text(f'[agent]\nstate_dir = "{tmp}/state"\nscratch_dir = "{tmp}/state/scratch"\n'
                   f'[api]\ntoken_file = "{tok}"\nport = 0\n[monitor]\nmax_clients = 1024\n')
    proc = subprocess.Popen([sys.executable, "-m", "agentd.cli", "serve", "--config", str(cfg), "--log-level", "warning"],
                            stdout=subprocess.PIPE, stderr=(tmp / "agent.log").open("w"), text=True, cwd=ROOT)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        m = re.search(r"listening on (http://\S+)", line or "")
        if m:
            return proc, m.group(1)
        if not line:
            break
    proc.kill()
    raise SystemExit(f"agent did not start: {(tmp / 'agent.log').read_text()}")


def cpu_seconds(p: psutil.Process) -> float:
    t = p.cpu_times()
    return t.user + t.system


async def metric(session: aiohttp.ClientSession, url: str, name: str) -> float:
    async with session.get(url + "/metrics") as r:
        text = await r.text()
    m = re.search(rf"^{name} (\S+)$", text, re.M)
    return float(m.group(1)) if m else float("nan")


async def measure(url: str, agent: psutil.Process, seconds: float, clients: int) -> dict:
    out: dict = {}
    # limit=0: every WebSocket holds its connection (the default pool stops at 100).
    async with aiohttp.ClientSession(headers=AUTH, connector=aiohttp.TCPConnector(limit=0)) as s:
        # 1. idle
        await asyncio.sleep(2)
        c0, t0 = cpu_seconds(agent), time.monotonic()
        await asyncio.sleep(seconds)
        out["idle_cpu_percent"] = round(100 * (cpu_seconds(agent) - c0) / (time.monotonic() - t0), 3)

        # 2. one client: the 1 Hz sampler loop
        async with s.ws_connect(url + "/v1/monitor") as ws:
            await ws.receive(timeout=10)   # header
            await ws.receive(timeout=10)   # first sample: the loop is running
            c0, t0 = cpu_seconds(agent), time.monotonic()
            n = 0
            while time.monotonic() - t0 < seconds:
                msg = await ws.receive(timeout=10)
                n += msgpack.unpackb(msg.data)["type"] == "sample"
            out["sampler_cpu_percent"] = round(100 * (cpu_seconds(agent) - c0) / (time.monotonic() - t0), 3)
            out["sampler_frames"] = n

        # 3. many clients
        missed_before = await metric(s, url, "mimesys_monitor_missed_frames_total")
        stop = asyncio.Event()
        received = [0] * clients
        gaps = [0] * clients
        connected = asyncio.Semaphore(0)

        async def client(i: int):
            async with s.ws_connect(url + "/v1/monitor", timeout=aiohttp.ClientWSTimeout(ws_close=5)) as ws:
                await ws.receive(timeout=30)   # header
                connected.release()
                last = None
                while not stop.is_set():
                    try:
                        msg = await ws.receive(timeout=2)
                    except asyncio.TimeoutError:
                        continue
                    if msg.type != aiohttp.WSMsgType.BINARY:
                        break
                    f = msgpack.unpackb(msg.data)
                    if f["type"] != "sample":
                        continue
                    if stop.is_set():
                        break
                    if last is not None and f["seq"] != last + 1:
                        gaps[i] += f["seq"] - last - 1
                    last = f["seq"]
                    received[i] += 1

        tasks = [asyncio.create_task(client(i)) for i in range(clients)]
        for _ in range(clients):
            await asyncio.wait_for(connected.acquire(), 60)
        for _ in range(100):  # the one-client phase's socket may still be closing server-side
            out["monitor_clients"] = int(await metric(s, url, "mimesys_monitor_clients"))
            if out["monitor_clients"] == clients:
                break
            await asyncio.sleep(0.1)
        received[:] = [0] * clients
        c0, t0 = cpu_seconds(agent), time.monotonic()
        await asyncio.sleep(seconds)
        stop.set()
        elapsed = time.monotonic() - t0
        out["cpu_percent_with_clients"] = round(100 * (cpu_seconds(agent) - c0) / elapsed, 3)
        await asyncio.gather(*tasks, return_exceptions=True)
        out["missed_frames"] = int(await metric(s, url, "mimesys_monitor_missed_frames_total") - missed_before)
        out["client_seq_gaps"] = sum(gaps)
        out["frames_per_client_min"] = min(received)
        out["frames_per_client_max"] = max(received)
        out["clients_window_s"] = round(elapsed, 2)
        await asyncio.sleep(2)
        # Every client that left was unsubscribed (no leaked queues); the sampling loop stopped.
        out["monitor_clients_after_close"] = int(await metric(s, url, "mimesys_monitor_clients"))
    return out


def sampler_read_ms(n: int = 50) -> float:
    import concurrent.futures

    from agentd.samplers import SamplerSet
    pool = concurrent.futures.ThreadPoolExecutor(1)  # as in the agent: pyroute2 wants no running loop
    ss = pool.submit(SamplerSet.from_config, None).result()
    prev = pool.submit(ss.read).result()
    times = []
    for _ in range(n):
        t = time.perf_counter()
        cur = pool.submit(ss.read).result()
        ss.derive(prev, cur)
        times.append((time.perf_counter() - t) * 1e3)
        prev = cur
        time.sleep(0.01)
    pool.submit(ss.close).result()
    pool.shutdown()
    return round(statistics.median(times), 3)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--clients", type=int, default=200)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="mimesys-bench-") as tmp:
        proc, url = start_agent(Path(tmp))
        try:
            agent = psutil.Process(proc.pid)
            result = asyncio.run(measure(url, agent, args.seconds, args.clients))
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
    result = {"bench": "agent_overhead", "interval_s": 1.0, "measure_s": args.seconds, **result,
              "sampler_read_ms": sampler_read_ms(), "host_cpus": os.cpu_count(),
              "host_loadavg_1m": round(os.getloadavg()[0], 2)}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
