"""A real agent process on 127.0.0.1 for the hardening benchmarks (fuzz, soak): `mimesys-agent
serve` from this checkout, with the simulated host backend (labelled simulated in every answer:
these benchmarks measure the agent's API, loop and run life cycle, not the host), and its
process figures (RSS, open fds) read from /proc."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import secrets
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import numpy as np

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Agent:
    proc: subprocess.Popen
    url: str
    token: str
    state_dir: Path

    def rss_mib(self) -> float:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return float("nan")

    def fds(self) -> int:
        return len(os.listdir(f"/proc/{self.proc.pid}/fd"))


@contextlib.contextmanager
def real_agent(work: Path, *, speedup: float = 1.0, cpus: int = 2, extra_toml: str = "", root: Path = ROOT):
    """`root`: the checkout whose agent runs (another revision's, for a before/after table)."""
    work.mkdir(parents=True, exist_ok=True)
    token = secrets.token_hex(16)
    tok = work / "token"
    tok.write_text(token + "\n")
    tok.chmod(0o600)
    cfg = work / "agent.toml"
    cfg.write_text(f'[agent]\nbackend = "sim"\nstate_dir = "{work}/state"\nscratch_dir = "{work}/state/scratch"\n'
                   f'model_dir = "{work}/model"\nrun_lock = "{work}/run.lock"\n'
                   f'[api]\nbind = "127.0.0.1"\nport = 0\ntoken_file = "{tok}"\n{extra_toml}')
    # this checkout first, then whatever the caller runs with (Debian's test stage: the vendored wheels)
    path = os.pathsep.join(p for p in (str(root), os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "PYTHONPATH": path, "MIMESYS_SIM_SPEEDUP": str(speedup), "MIMESYS_SIM_CPUS": str(cpus)}
    log = (work / "agent.log").open("w")
    proc = subprocess.Popen([sys.executable, "-m", "agentd.cli", "serve", "--config", str(cfg)],
                            stdout=subprocess.PIPE, stderr=log, text=True, cwd=root, env=env)
    try:
        url = None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            m = re.search(r"listening on (https?://127\.0\.0\.1:\d+)", line)
            if m:
                url = m.group(1)
                break
        if not url:
            raise RuntimeError(f"agent did not start: {(work / 'agent.log').read_text()[-2000:]}")
        yield Agent(proc, url, token, work / "state")
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        log.close()


CONTROL_SERVER = """
import sys
from aiohttp import web
async def healthz(request):
    return web.json_response({"ok": True})
app = web.Application()
app.router.add_get("/healthz", healthz)
async def announce(app):
    print("listening", flush=True)
app.on_startup.append(announce)
web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), print=None, handle_signals=True)
"""


@contextlib.contextmanager
def control_server():
    """A bare aiohttp server with a /healthz and nothing else, in its own process: the control
    for /healthz latency. A stall that both it and the agent show belongs to the host (the
    hypervisor, the other tenants), one that only the agent shows belongs to the agent."""
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-c", CONTROL_SERVER, str(port)], stdout=subprocess.PIPE, text=True)
    try:
        if "listening" not in (proc.stdout.readline() or ""):
            raise RuntimeError("control server did not start")
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(10)


def healthz_prober(agent_url: str, control_url: str, headers: dict, out: str, period_s: float = 0.25) -> None:
    """In its own process (the soak's 50 clients share the driver's loop and would delay a
    probe made there): every period_s, GET the agent's /healthz and the control server's,
    and append (t, agent_ms, control_ms) lines to `out` until killed."""
    async def probe(s, url):
        t0 = time.perf_counter()
        async with s.get(url + "/healthz", timeout=aiohttp.ClientTimeout(total=30)) as r:
            await r.read()
        return (time.perf_counter() - t0) * 1e3

    async def main():
        async with aiohttp.ClientSession(headers=headers) as s, aiohttp.ClientSession() as c:
            with open(out, "a", buffering=1) as f:
                t_start = time.monotonic()
                while True:
                    a = await probe(s, agent_url)
                    b = await probe(c, control_url)
                    f.write(f"{time.monotonic() - t_start:.3f} {a:.3f} {b:.3f}\n")
                    await asyncio.sleep(period_s)
    asyncio.run(main())


@contextlib.contextmanager
def in_own_process(target, *args):
    """target(*args) in a spawned process of its own for the duration of the block (a prober or
    a load generator must not share the event loop or the GIL of what it measures)."""
    import multiprocessing
    proc = multiprocessing.get_context("spawn").Process(target=target, args=args, daemon=True)
    proc.start()
    try:
        yield
    finally:
        proc.terminate()
        proc.join(10)


def healthz_probing(agent_url: str, control_url: str, headers: dict, out: Path, period_s: float = 0.25):
    """healthz_prober in a process of its own for the duration of the block."""
    return in_own_process(healthz_prober, agent_url, control_url, headers, str(out), period_s)


def healthz_summary(path: Path, t_from: float = 0.0, t_to: float = float("inf")) -> dict:
    """The agent's and the control's /healthz latency (probes from t_from to t_to s), and how
    many of the agent's probes over 100 ms came with the control over 100 ms within a second
    (a host stall, not the agent's)."""
    # The prober is terminated at the block's end: a last line it was writing may be cut short.
    lines = path.read_text().splitlines() if path.exists() else []
    rows = np.array([[float(x) for x in ln.split()] for ln in lines if len(ln.split()) == 3],
                    dtype=float).reshape(-1, 3)
    rows = rows[(rows[:, 0] >= t_from) & (rows[:, 0] < t_to)]
    t, a, b = rows[:, 0], rows[:, 1], rows[:, 2]
    slow = np.flatnonzero(a > 100)
    shared = sum(1 for i in slow if np.any(b[np.abs(t - t[i]) <= 1.0] > 100))

    def q(x, p):
        return round(float(np.percentile(x, p)), 2) if len(x) else None
    return {"healthz_probes": int(len(a)), "healthz_ms_p50": q(a, 50), "healthz_ms_p99": q(a, 99),
            "healthz_ms_max": q(a, 100), "healthz_over_100ms": int(len(slow)),
            "healthz_over_100ms_with_control_over_100ms": int(shared),
            "control_ms_p50": q(b, 50), "control_ms_p99": q(b, 99), "control_ms_max": q(b, 100),
            "control_over_100ms": int((b > 100).sum())}


async def loop_lag(url: str, headers: dict) -> dict:
    """The agent's own event-loop lag from /metrics (agentd/api/looplag.py)."""
    from prometheus_client.parser import text_string_to_metric_families
    async with aiohttp.ClientSession(headers=headers) as s:
        async with s.get(url + "/metrics") as r:
            text = await r.text()
    out = {}
    for fam in text_string_to_metric_families(text):
        for smp in fam.samples:
            if smp.name == "mimesys_event_loop_lag_max_seconds":
                out["agent_loop_lag_max_ms"] = round(smp.value * 1e3, 2)
            elif smp.name == "mimesys_event_loop_lag_seconds_count":
                out["agent_loop_lag_samples"] = int(smp.value)
            elif smp.name == "mimesys_event_loop_lag_seconds_bucket" and smp.labels.get("le") == "0.1":
                out["agent_loop_lag_within_100ms"] = int(smp.value)
    return out
