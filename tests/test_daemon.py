"""A real agent process on 127.0.0.1 (`mimesys-agent serve`, real host backend, real
mimesys-runner and stressors), the systemd integration, and the record/replay commands.

The host is shared with other busy processes: per-core /proc/stat then includes their work.
The ±0.05 per-core check is asserted strictly when the cores were quiet just before the
run; on a busy host the test still asserts everything contention cannot explain away
(one row per window, stream == stored trace, the runner did at least the planned work,
measured ≥ planned − 0.05) and reports the strict comparison as an expected failure with
the measured background.
"""

import asyncio
import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import aiohttp
import h5py
import msgpack
import numpy as np
import psutil
import pytest

from mimesys import tracestream, wire
from agentd.notify import _notify_socket, under_systemd, watchdog_interval_s
from mimesys.plan import Plan
from mimesys.trace import Trace

ROOT = Path(__file__).resolve().parent.parent
TOKEN = "daemon-test-token-0123456789"
AUTH = {"Authorization": "Bearer " + TOKEN}

pytestmark = pytest.mark.skipif(not (ROOT / "stressors" / "build" / "mimesys-runner").exists()
                                and not shutil.which("mimesys-runner"),
                                reason="mimesys-runner not built (make -C stressors)")


def write_config(tmp_path: Path, **api) -> Path:
    tok = tmp_path / "token"
    tok.write_text(TOKEN + "\n")
    tok.chmod(0o600)
    extra = "".join(f"{k} = {v}\n" for k, v in api.items())
    cfg = tmp_path / "agent.toml"
    cfg.write_text(f'[agent]\nstate_dir = "{tmp_path}/state"\nscratch_dir = "{tmp_path}/state/scratch"\n'
                   f'scratch_budget_mib = 64\nrun_lock = "{tmp_path}/run.lock"\n'
                   f'[api]\ntoken_file = "{tok}"\nbind = "127.0.0.1"\nport = 0\n{extra}')
    return cfg


class Agent:
    def __init__(self, proc: subprocess.Popen, url: str, log: Path):
        self.proc, self.url, self.log = proc, url, log

    @property
    def pid(self):
        return self.proc.pid


@contextlib.contextmanager
def start_agent(tmp_path: Path, cfg: Path, env=None, name="agent"):
    log = tmp_path / f"{name}.log"
    fh = log.open("w")
    proc = subprocess.Popen([sys.executable, "-m", "agentd.cli", "serve", "--config", str(cfg)],
                            stdout=subprocess.PIPE, stderr=fh, text=True, cwd=ROOT,
                            env={**os.environ, **(env or {})})
    try:
        deadline = time.monotonic() + 60
        url = None
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            m = re.search(r"listening on (https?://127\.0\.0\.1:\d+)", line)
            if m:
                url = m.group(1)
                break
        assert url, f"agent did not start: {log.read_text()}"
        yield Agent(proc, url, log)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        fh.close()


def cpu_plan(catalog, fractions, window_s=1.0) -> Plan:
    fr = np.asarray(fractions, np.float32)
    a = np.zeros((fr.shape[0], len(catalog), fr.shape[1]), np.float32)
    a[:, catalog.index("cpu_int_crc32"), :] = fr
    return Plan.from_catalog(a, catalog, window_s=window_s, provenance={"test": "daemon"})


def per_core_busy(seconds=1.0) -> list[float]:
    """Background busy fraction of each core over `seconds`, by the cpu sampler's own derive."""
    from agentd.samplers.cpu import CpuSampler, parse_proc_stat
    t0, a = time.monotonic(), parse_proc_stat(Path("/proc/stat").read_text())
    time.sleep(seconds)
    t1, b = time.monotonic(), parse_proc_stat(Path("/proc/stat").read_text())
    d = CpuSampler.derive(a, b, t1 - t0)
    return [d[f"cpu.util.core{k[3:]}"] for k in sorted(b, key=lambda k: int(k[3:])) if f"cpu.util.core{k[3:]}" in d]


def steal_seconds() -> np.ndarray:
    """Per-core steal time so far (/proc/stat field 8, USER_HZ ticks), in seconds."""
    hz = os.sysconf("SC_CLK_TCK")
    return np.array([int(line.split()[8]) / hz for line in Path("/proc/stat").read_text().splitlines()
                     if line.startswith("cpu") and line[3] != " "])


async def post(session, url, body: dict):
    async with session.post(url, data=wire.pack(body)) as r:
        return r.status, msgpack.unpackb(await r.read())


# -- a real agent ------------------------------------------------------------------------
def test_real_agent_rejects_missing_or_wrong_token_and_oversized_bodies(tmp_path, catalog):
    cfg = write_config(tmp_path, max_body_mib=0.05)
    with start_agent(tmp_path, cfg) as agent:
        async def main():
            async with aiohttp.ClientSession() as s:
                for headers in ({}, {"Authorization": "Bearer nope"}, {"Authorization": TOKEN}):
                    async with s.get(agent.url + "/v1/info", headers=headers) as r:
                        assert r.status == 401
                    async with s.post(agent.url + "/v1/runs", headers=headers, data=b"x") as r:
                        assert r.status == 401
                    with pytest.raises(aiohttp.WSServerHandshakeError) as e:
                        await s.ws_connect(agent.url + "/v1/monitor", headers=headers)
                    assert e.value.status == 401
                async with s.post(agent.url + "/v1/runs", headers=AUTH,
                                  data=wire.pack({"plan": b"\0" * 100_000})) as r:
                    assert r.status == 413
                    assert "exceeds the limit" in msgpack.unpackb(await r.read())["error"]
                async with s.get(agent.url + "/v1/info", headers=AUTH) as r:
                    info = msgpack.unpackb(await r.read())
                assert r.status == 200 and info["backend"] == "host" and info["simulated"] is False
        asyncio.run(main())


@pytest.mark.serial   # per-core CPU against the plan: another test's CPU would land on it
def test_plan_streams_one_row_per_window_and_per_core_cpu_matches_the_plan(tmp_path, catalog):
    """cpu_int_crc32 at 0.2 / 0.7 alternating on each CPU, W = 1 s, 6 windows. Measured again
    once if it fails: on the shared VM another process's bursts landed on the 0.2 core in two
    windows of one run (0.35 and 0.33 for 0.2, in CI's Debian stage, the runner exact and the
    host idle before it), one more than the check allows; a fault of the sampler or the runner
    fails both runs."""
    try:
        _stream_a_plan_and_check_per_core_cpu(tmp_path / "first", catalog)
    except AssertionError as first:
        print(f"measured again after:\n{first}")
        _stream_a_plan_and_check_per_core_cpu(tmp_path / "again", catalog)


def _stream_a_plan_and_check_per_core_cpu(tmp_path: Path, catalog) -> None:
    tmp_path.mkdir()
    ncpu = len(psutil.Process().cpu_affinity())
    pattern = np.array([[0.2, 0.7], [0.7, 0.2], [0.2, 0.7], [0.7, 0.2], [0.2, 0.7], [0.7, 0.2]], np.float32)
    fractions = np.tile(pattern, (1, (ncpu + 1) // 2))[:, :ncpu]
    plan = cpu_plan(catalog, fractions)
    cfg = write_config(tmp_path)
    with start_agent(tmp_path, cfg) as agent:
        background = per_core_busy(1.0)
        steal_before = steal_seconds()
        agent_proc = psutil.Process(agent.proc.pid)

        def own_cpu_s() -> float:
            """CPU seconds so far of the agent (its sampling and streaming, not its runner child)
            and of this test (the client): the host's work during the run that the plan is not."""
            a, t = agent_proc.cpu_times(), os.times()
            return a.user + a.system + t.user + t.system
        own_cpu = []

        async def main():
            async with aiohttp.ClientSession(headers=AUTH) as s:
                status, created = await post(s, agent.url + "/v1/runs", {"plan": plan.to_wire()})
                assert status == 201, created
                frames = []
                async with s.ws_connect(agent.url + f"/v1/runs/{created['run_id']}/trace") as ws:
                    async for msg in ws:
                        frames.append(msgpack.unpackb(msg.data))
                        own_cpu.append(own_cpu_s())
                async with s.get(agent.url + f"/v1/runs/{created['run_id']}/trace.msgpack") as r:
                    assert r.status == 200
                    recorded = tracestream.read_messages(await r.read(), "recorded trace", max_bytes=1 << 24)
                    recorded.write(tmp_path / "run.h5")
                async with s.get(agent.url + "/v1/info") as r:
                    alignment = msgpack.unpackb(await r.read())["alignment"]
                return frames, alignment
        frames, alignment = asyncio.run(main())
        steal = (steal_seconds() - steal_before)[:ncpu]
        assert alignment["boundary_samples"] == 7  # 6 starts + the end of the last window

    header, windows, end = frames[0], [f for f in frames if f["type"] == "window"], frames[-1]
    # the agent's and the test's CPU in each window: between the frames that close it (a window's
    # frame arrives just after its end)
    at = [c for f, c in zip(frames, own_cpu) if f["type"] in ("header", "window")]
    own = np.diff(np.array(at))[:len(windows)]
    assert header["type"] == "header" and header["simulated"] is False
    assert end["type"] == "end" and end["state"] == "done", end
    assert [w["window"] for w in windows] == list(range(6))  # one row per window, in order
    names = [m["name"] for m in header["metrics"]]
    cols = [names.index(f"cpu.util.core{k}") for k in range(ncpu)]
    measured = np.array([wire.vec_from_bytes(w["values"], len(names))[cols] for w in windows])
    M, K = header["run"]["shape"]
    ran = np.array([np.frombuffer(w["ran_ns"], "<i8").reshape(M, K)[catalog.index("cpu_int_crc32")] for w in windows])
    # The stream and the stored trace agree.
    tr = Trace.read(tmp_path / "run.h5")
    assert tr.T == 6 and not tr.simulated
    np.testing.assert_array_equal(tr.values[:, cols], measured)
    report = (f"planned per core:\n{fractions}\nmeasured (trace):\n{np.round(measured, 3)}\n"
              f"runner executed:\n{np.round(ran / 1e9, 3)}\nbackground busy before the run: {np.round(background, 3)}\n"
              f"boundary sample lag: {alignment}\nsteal during the run (s per core): {np.round(steal, 3)}\n"
              f"the agent's and this test's CPU per window (s): {np.round(own, 3)}")
    print(report)
    # What contention cannot explain away: the runner did the planned work (preemption can
    # only stretch a segment past its deadline), and every core was at least as busy as planned,
    # less what the hypervisor stole from it: steal is not busy time (a VM's vCPU can be
    # descheduled while the runner's segment clock runs; once in CI a window read 61 ms short).
    assert (ran / 1e9 >= fractions - 0.02).all(), report
    assert (measured >= fractions - 0.05 - steal[None, :]).all(), report
    if max(background) > 0.05:
        pytest.xfail(f"host busy (background {np.round(background, 2)} of each core): the strict ±0.05 "
                     f"check is not meaningful now; max |error| = {np.abs(measured - fractions).max():.3f}\n{report}")
    if steal.max() > 0.05:
        pytest.xfail(f"the hypervisor stole {np.round(steal, 2)} s of the cores during the run: the strict "
                     f"±0.05 check is not meaningful now; max |error| = {np.abs(measured - fractions).max():.3f}"
                     f"\n{report}")
    # a segment's clock runs while the hypervisor has its vCPU descheduled, so it may overrun by
    # what was stolen from its core (once in CI 0.2203 for 0.2 with 0.05 s stolen per core)
    assert (ran / 1e9 <= fractions + 0.02 + steal[None, :]).all(), report
    # Above the plan is the host's other work (the agent sampling and streaming, this test, the
    # VM's daemons), and the scheduler puts it where a core has room: on each window's less busy
    # core (seen in CI: 0.24-0.27 for 0.2 where the 0.7 cells read 0.70 and the runner ran
    # exactly the plan; the host's background before the run 0.036 of a core in all). So every
    # cell, and each window's cores together, may exceed the plan by the whole host's background
    # and 0.05, and by what the agent and this test used in that window (measured: their
    # sampling, streaming and recording; once in CI 0.08 of a core landed on the 0.2 core in
    # two windows); one 1-s burst of some other process may land in one window (seen: 0.76 for
    # 0.70), up to 0.15; and each window's busiest core, where nothing else goes, reads its plan
    # within ±0.02 typically.
    err = measured - fractions
    room = float(np.sum(background)) + 0.05 + own[:, None]
    assert (err > room).sum() <= 1 and err.max() <= 0.15, report
    assert (err.sum(axis=1) > room[:, 0]).sum() <= 1 and err.sum(axis=1).max() <= 0.15, report
    busiest = fractions == fractions.max(axis=1, keepdims=True)
    assert np.median(np.abs(err[busiest])) <= 0.02, report


@pytest.mark.slow
def test_sigkill_mid_run_leaves_no_runner_and_next_start_clears_scratch(tmp_path, catalog):
    # A long plan with a disk stressor, so the runner holds scratch files when killed.
    a = np.zeros((60, len(catalog), 1), np.float32)
    disk = [i for i, s in enumerate(catalog.stressors) if s.resource_class == "disk"][0]
    a[:, disk, 0] = 0.5
    a[:, catalog.index("cpu_int_crc32"), 0] = 0.3
    plan = Plan.from_catalog(a, catalog)
    cfg = write_config(tmp_path)
    scratch = tmp_path / "state" / "scratch"
    with start_agent(tmp_path, cfg) as agent:
        async def main():
            async with aiohttp.ClientSession(headers=AUTH) as s:
                status, created = await post(s, agent.url + "/v1/runs", {"plan": plan.to_wire()})
                assert status == 201, created
                async with s.ws_connect(agent.url + f"/v1/runs/{created['run_id']}/trace") as ws:
                    while msgpack.unpackb((await ws.receive(timeout=60)).data)["type"] != "window":
                        pass  # wait until the runner is executing
                return created["run_id"]
        run_id = asyncio.run(main())
        runners = [p for p in psutil.Process(agent.pid).children(recursive=True) if p.name() == "mimesys-runner"]
        assert runners, "no mimesys-runner child while the run executes"
        agent.proc.send_signal(signal.SIGKILL)
        killed_at = time.monotonic()
        agent.proc.wait(5)

        def stopped(p):  # exited; a zombie waiting for init to reap it runs nothing
            try:
                return p.status() == psutil.STATUS_ZOMBIE
            except psutil.NoSuchProcess:
                return True
        while time.monotonic() - killed_at < 1.0 and not all(stopped(p) for p in runners):
            time.sleep(0.005)
        elapsed = time.monotonic() - killed_at
        alive = [p.pid for p in runners if not stopped(p)]
        assert not alive, f"runner(s) {alive} still running {elapsed:.2f} s after SIGKILL of the agent"
        leftover_after_kill = sorted(p.name for p in scratch.iterdir()) if scratch.exists() else []
    # Whatever a killed agent leaves in scratch, the next start removes it.
    scratch.mkdir(parents=True, exist_ok=True)
    (scratch / "leftover.bin").write_bytes(b"\0" * 4096)
    (scratch / "leftover-dir").mkdir()
    with start_agent(tmp_path, cfg, name="agent2") as agent:
        assert list(scratch.iterdir()) == []
        assert "leftover entries" in agent.log.read_text()

        async def status():
            async with aiohttp.ClientSession(headers=AUTH) as s:
                async with s.get(agent.url + f"/v1/runs/{run_id}") as r:
                    return msgpack.unpackb(await r.read())
        st = asyncio.run(status())
        assert st["state"] == "failed" and "agent stopped" in st["error"]
    print(f"runner gone {elapsed:.3f} s after SIGKILL; scratch right after the kill: {leftover_after_kill}")


# -- systemd ---------------------------------------------------------------------------------
def test_serve_notifies_ready_and_pings_the_watchdog_from_the_loop(tmp_path):
    sock_path = tmp_path / "notify.sock"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(sock_path))
    sock.settimeout(30)
    cfg = write_config(tmp_path)
    messages = []
    with start_agent(tmp_path, cfg, env={"NOTIFY_SOCKET": str(sock_path), "WATCHDOG_USEC": "400000"}) as agent:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and sum("WATCHDOG=1" in m for m in messages) < 3:
            messages.append(sock.recv(4096).decode())
        agent.proc.send_signal(signal.SIGTERM)
        agent.proc.wait(15)
        with contextlib.suppress(socket.timeout):
            sock.settimeout(2)
            while True:
                messages.append(sock.recv(4096).decode())
    sock.close()
    joined = "\n".join(messages)
    assert "READY=1" in joined and "STATUS=serving" in joined
    assert sum("WATCHDOG=1" in m for m in messages) >= 3
    assert "STOPPING=1" in joined


def test_a_stalled_loop_stops_the_watchdog_pings(tmp_path, monkeypatch):
    """Issue 23: the watchdog is pinged only while the event loop turns. A stall of the loop
    (here 0.6 s of blocking work on it, pings due every 0.05 s) is a gap in the pings; a pinger
    on a thread of its own would have kept pinging through it and hidden a wedged agent from
    systemd."""
    import threading

    from agentd import notify
    sock_path = tmp_path / "notify.sock"
    received = []
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(str(sock_path))
        sock.settimeout(0.2)
        done = threading.Event()

        def receive():
            while not done.is_set():
                with contextlib.suppress(socket.timeout):
                    if b"WATCHDOG=1" in sock.recv(4096):
                        received.append(time.monotonic())
        rx = threading.Thread(target=receive, daemon=True)
        rx.start()
        monkeypatch.setenv("NOTIFY_SOCKET", str(sock_path))
        monkeypatch.setattr(notify, "_sd_daemon", None)          # the datagram path, whatever is installed

        async def main():
            task = asyncio.create_task(notify.watchdog_loop(0.05))
            await asyncio.sleep(0.3)
            t0 = time.monotonic()
            time.sleep(0.6)                                       # the loop is held
            t1 = time.monotonic()
            await asyncio.sleep(0.3)
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            return t0, t1
        t0, t1 = asyncio.run(main())
        time.sleep(0.1)
        done.set()
        rx.join(5)
    during = [t for t in received if t0 + 0.02 < t < t1 - 0.02]
    assert sum(t < t0 for t in received) >= 2 and sum(t > t1 for t in received) >= 2, received
    assert during == [], f"{len(during)} pings while the loop was held"


def test_notify_fallback_socket_and_environment_detection(tmp_path):
    sock_path = tmp_path / "n.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
        s.bind(str(sock_path))
        assert _notify_socket(str(sock_path), "READY=1\nSTATUS=x")
        assert s.recv(100) == b"READY=1\nSTATUS=x"
    assert not _notify_socket(str(tmp_path / "absent.sock"), "READY=1")
    assert watchdog_interval_s({"WATCHDOG_USEC": "30000000"}) == 15.0
    assert watchdog_interval_s({"WATCHDOG_USEC": "30000000", "WATCHDOG_PID": "1"}) is None  # not for us
    assert watchdog_interval_s({}) is None
    assert under_systemd({"INVOCATION_ID": "abc"}) and under_systemd({"JOURNAL_STREAM": "8:1"})
    assert not under_systemd({})


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze not installed")
def test_unit_file_is_hardened_and_passes_systemd_analyze_verify(tmp_path):
    unit = (ROOT / "systemd" / "mimesys-agent.service").read_text()
    for directive in ("Type=notify", "WatchdogSec=", "KillMode=control-group", "NoNewPrivileges=yes",
                      "ProtectSystem=strict", "ProtectHome=yes", "PrivateTmp=yes", "StateDirectory=mimesys",
                      "ConfigurationDirectory=mimesys", "CapabilityBoundingSet=CAP_PERFMON",
                      "AmbientCapabilities=CAP_PERFMON",
                      "RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6 AF_NETLINK"):
        assert re.search(rf"^{re.escape(directive)}", unit, re.M), directive
    assert "CAP_SYS_ADMIN" not in re.findall(r"^CapabilityBoundingSet=.*$", unit, re.M)[0]
    # The syscall filter leaves perf_event_open (the perf samplers) allowed.
    filters = re.findall(r"^SystemCallFilter=(.*)$", unit, re.M)
    assert "perf_event_open" in filters[0].split() and not filters[0].startswith("~")
    for line in filters[1:]:
        if line.startswith("~"):
            for group in line[1:].split():
                listed = subprocess.run(["systemd-analyze", "syscall-filter", group], capture_output=True,
                                        text=True, timeout=30).stdout.split()
                assert "perf_event_open" not in listed, f"{group} would deny perf_event_open"
    # verify checks that ExecStart binaries exist: point them at this checkout's entry point
    # (the package installs the same program at /usr/bin/mimesys-agent).
    exe = shutil.which("mimesys-agent", path=str(Path(sys.executable).parent)) or shutil.which("mimesys-agent")
    assert exe, "mimesys-agent entry point not installed"
    local = tmp_path / "mimesys-agent.service"
    local.write_text(unit.replace("/usr/bin/mimesys-agent", exe))
    out = subprocess.run(["systemd-analyze", "verify", str(local)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stderr.strip() == "", out.stderr
    # and verify does complain about a broken unit (the check above can fail)
    broken = tmp_path / "broken.service"
    broken.write_text(local.read_text().replace("NoNewPrivileges=yes", "NoNewPrivileges=yes\nProtectSytem=strict"))
    out = subprocess.run(["systemd-analyze", "verify", str(broken)], capture_output=True, text=True, timeout=60)
    assert "Unknown key" in out.stderr


# -- record / replay ------------------------------------------------------------------------------
def test_record_writes_a_trace_at_the_interval_with_csv(tmp_path):
    cfg = write_config(tmp_path)
    out = subprocess.run([sys.executable, "-m", "agentd.cli", "record", "--config", str(cfg), "-o",
                          str(tmp_path / "rec.h5"), "--seconds", "2", "--interval", "0.5", "--csv",
                          str(tmp_path / "rec.csv"), "--no-progress"],
                         capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    tr = Trace.read(tmp_path / "rec.h5")
    assert tr.T == 4 and tr.window_s == 0.5 and not tr.simulated
    core0 = tr.column("cpu.util.core0")
    assert np.isfinite(core0).all() and ((0 <= core0) & (core0 <= 1)).all()
    rows = (tmp_path / "rec.csv").read_text().splitlines()
    assert len(rows) == 5 and rows[0].startswith("window,start_s,cpu.util.core0")


def test_replay_runs_a_plan_around_a_command_and_reports_its_status(tmp_path, catalog):
    plan = cpu_plan(catalog, [[0.3]] * 4, window_s=0.25)
    plan.write(tmp_path / "plan.h5")
    cfg = write_config(tmp_path)
    started = time.monotonic()
    out = subprocess.run([sys.executable, "-m", "agentd.cli", "replay", "--config", str(cfg), str(tmp_path / "plan.h5"),
                          "-o", str(tmp_path / "replay.h5"), "--no-progress", "--", "sh", "-c", "sleep 1.2; exit 3"],
                         capture_output=True, text=True, timeout=60, cwd=ROOT)
    wall = time.monotonic() - started
    assert out.returncode == 3, out.stdout + out.stderr
    assert "exit status 3" in out.stdout and re.search(r"wall time 1\.[2-9]\d* s", out.stdout), out.stdout
    assert f"trace: {tmp_path / 'replay.h5'}" in out.stdout
    tr = Trace.read(tmp_path / "replay.h5")
    assert tr.T >= 4 and tr.provenance["command"] == ["sh", "-c", "sleep 1.2; exit 3"]  # repeated while it ran
    assert wall < 30
    # No command: the plan runs --repetitions times; a malformed plan is a clear error.
    out = subprocess.run([sys.executable, "-m", "agentd.cli", "replay", "--config", str(cfg), str(tmp_path / "plan.h5"),
                          "-o", str(tmp_path / "r2.h5"), "--repetitions", "2", "--no-progress"],
                         capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert Trace.read(tmp_path / "r2.h5").T == 8
    with h5py.File(tmp_path / "bad.h5", "w") as f:
        f.attrs["format"] = "mimesys.plan"
    out = subprocess.run([sys.executable, "-m", "agentd.cli", "replay", "--config", str(cfg), str(tmp_path / "bad.h5")],
                         capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert out.returncode != 0 and "Error:" in out.stderr and "Traceback" not in out.stderr


def test_sigterm_with_streams_open_ends_them_and_exits_promptly(tmp_path, catalog):
    plan = cpu_plan(catalog, [[0.1]] * 60)
    cfg = write_config(tmp_path)
    with start_agent(tmp_path, cfg) as agent:
        async def main():
            async with aiohttp.ClientSession(headers=AUTH) as s:
                status, created = await post(s, agent.url + "/v1/runs", {"plan": plan.to_wire()})
                assert status == 201
                async with s.ws_connect(agent.url + "/v1/monitor") as mon, \
                        s.ws_connect(agent.url + f"/v1/runs/{created['run_id']}/trace") as tr:
                    await mon.receive(timeout=10)
                    await tr.receive(timeout=10)
                    agent.proc.send_signal(signal.SIGTERM)
                    t0 = time.monotonic()

                    async def last(ws):
                        return [msgpack.unpackb(m.data) async for m in ws][-1]
                    last_mon, last_tr = await asyncio.gather(last(mon), last(tr))
                    return last_mon, last_tr, t0
        last_mon, last_tr, t0 = asyncio.run(main())
        agent.proc.wait(15)
        elapsed = time.monotonic() - t0
    assert last_mon["type"] == "end" and last_tr["type"] == "end" and last_tr["state"] == "cancelled"
    assert "shutting down" in last_tr["error"]
    assert agent.proc.returncode == 0 and elapsed < 5, (agent.proc.returncode, elapsed)


@pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl not installed")
def test_optional_tls_from_config(tmp_path):
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
                    "-days", "1", "-subj", "/CN=127.0.0.1"], check=True, capture_output=True, timeout=60)
    cfg = write_config(tmp_path, tls_cert=f'"{cert}"', tls_key=f'"{key}"')
    with start_agent(tmp_path, cfg) as agent:
        assert agent.url.startswith("https://")
        url = agent.url

        async def main():
            async with aiohttp.ClientSession(headers=AUTH) as s:
                async with s.get(url + "/healthz", ssl=False) as r:
                    return r.status
        assert asyncio.run(main()) == 200
    # A key that does not load is a start-up error naming both files, never a traceback.
    key.write_text("not a key")
    out = subprocess.run([sys.executable, "-m", "agentd.cli", "check-config", "--config", str(cfg)],
                         capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert out.returncode != 0 and "tls_cert/tls_key" in out.stderr and "Traceback" not in out.stderr


def test_serve_backend_sim_is_labelled_simulated(tmp_path):
    cfg = write_config(tmp_path)
    proc = subprocess.Popen([sys.executable, "-m", "agentd.cli", "serve", "--config", str(cfg), "--backend", "sim"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                            env={**os.environ, "MIMESYS_SIM_CPUS": "3"})
    try:
        url = re.search(r"(http://\S+)", proc.stdout.readline()).group(1)

        async def main():
            async with aiohttp.ClientSession(headers=AUTH) as s:
                async with s.get(url + "/v1/info") as r:
                    return msgpack.unpackb(await r.read())
        info = asyncio.run(main())
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(15)
    assert info["backend"] == "sim" and info["simulated"] is True and info["max_threads"] == 3
    assert proc.returncode == 0


@pytest.mark.serial   # the host's loopback traffic: another test's agent would put its own there
def test_an_idle_plan_replayed_through_the_agent_shows_no_loopback_of_the_agents_own_streams(tmp_path, catalog):
    """The trace WebSocket and a monitor stream open beside it carry a few kB/s over loopback;
    the agent takes its own connections out of the network figures (agentd/samplers/ownsockets.py),
    so the run's trace shows the idle plan's loopback: none."""
    ncpu = len(psutil.Process().cpu_affinity())
    plan = cpu_plan(catalog, np.zeros((6, ncpu), np.float32))
    with start_agent(tmp_path, write_config(tmp_path)) as agent:
        async def main():
            async with aiohttp.ClientSession(headers=AUTH) as s:
                async with s.ws_connect(agent.url + "/v1/monitor") as monitor:
                    status, created = await post(s, agent.url + "/v1/runs", {"plan": plan.to_wire()})
                    assert status == 201, created
                    async with s.ws_connect(agent.url + f"/v1/runs/{created['run_id']}/trace") as ws:
                        async for _ in ws:
                            pass
                    await monitor.receive(timeout=5)
                async with s.get(agent.url + f"/v1/runs/{created['run_id']}/trace.msgpack") as r:
                    assert r.status == 200
                    recorded = tracestream.read_messages(await r.read(), "recorded trace", max_bytes=1 << 24)
                    recorded.write(tmp_path / "run.h5")
        asyncio.run(main())
    tr = Trace.read(tmp_path / "run.h5")
    if "net.lo.tx_Bps" not in tr.names:
        pytest.skip("no loopback figures on this host (netlink refused)")
    lo = np.nan_to_num(tr.column("net.lo.tx_Bps"))
    # streamed frames are ~1-3 kB/s with headers; what is left is the host's own (none on a quiet host)
    assert np.median(lo) < 300 and (lo < 1000).sum() >= len(lo) - 1, lo


def test_replay_placement_free_lets_the_runners_threads_run_on_every_cpu(tmp_path, catalog):
    """`replay --placement free` overrides agent.placement: the command, run while the plan does,
    sees no runner thread pinned to one CPU; with --via-agent the running agent decides, so it is
    refused."""
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs two CPUs")
    cpu_plan(catalog, [[0.1, 0.1]] * 16, window_s=0.25).write(tmp_path / "plan.h5")
    cfg = write_config(tmp_path)
    # the replay's own runner: a child of the replay process, as this command is (found without
    # pgrep, which a minimal Debian root lacks). Its threads are looked at every 0.2 s for 3 s of
    # the 4-s plan, not once: on a busy host the workers may not be started (and pinned) by any
    # one moment. The command exits 0 however its last look went (on a busy host the runner may
    # have ended before it, and grep's "nothing found" would be the replay's exit status).
    show = ('r=; for i in $(seq 50); do for p in /proc/[0-9]*; do '
            'if [ "$(cat $p/comm 2>/dev/null)" = mimesys-runner ] && '
            'grep -q "^PPid:[[:space:]]*$PPID$" $p/status 2>/dev/null; then r=$p; fi; done; '
            '[ -n "$r" ] && break; sleep 0.1; done; '
            'for i in $(seq 15); do sleep 0.2; cat $r/task/*/status 2>/dev/null | grep Cpus_allowed_list; done; true')
    lists = {}
    for placement in ("pinned", "free"):
        out = subprocess.run([sys.executable, "-m", "agentd.cli", "replay", "--config", str(cfg), str(tmp_path / "plan.h5"),
                              "--no-record", "--no-progress", "--placement", placement, "--", "sh", "-c", show],
                             capture_output=True, text=True, timeout=60, cwd=ROOT)
        assert out.returncode == 0, out.stdout + out.stderr
        lists[placement] = {ln.split()[-1] for ln in out.stdout.splitlines() if ln.startswith("Cpus_allowed_list")}
    assert {"0", "1"} <= lists["pinned"], lists           # a worker on each CPU (and the unpinned printer)
    assert len(lists["free"]) == 1 and not lists["free"] & {"0", "1"}, lists   # every thread on "0-1"
    out = subprocess.run([sys.executable, "-m", "agentd.cli", "replay", "--config", str(cfg), str(tmp_path / "plan.h5"),
                          "--placement", "free", "--via-agent"], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert out.returncode == 2 and "--placement with --via-agent" in out.stderr
