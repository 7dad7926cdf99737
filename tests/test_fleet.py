"""The fleet client against real agents on 127.0.0.1: the agent app (agentd.api.create_app)
over the simulated host backend, in this process or in subprocesses that get killed."""

import asyncio
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

pytest.importorskip("agentd.api.app", reason="the agent HTTP API (agentd/api) is not in this checkout yet")

from mimesys.backend import RunOptions  # noqa: E402
from mimesys.plan import Plan  # noqa: E402
from bench.sim_agents import start_agents  # noqa: E402
from controller.campaign.proposals import random_compositions  # noqa: E402
from controller.fleet import AgentClient, AgentError, Fleet, FleetConfig, FleetError, Job  # noqa: E402

TOKEN = "test-token-0123456789abcdef"


def plan(catalog, T=8, seed=0):
    return Plan.from_catalog(random_compositions(np.random.default_rng(seed), T, len(catalog), 4), catalog,
                             seed=seed)


async def with_agents(tmp_path, n, body, **kw):
    urls, runners = await start_agents(n, TOKEN.encode(), tmp_path / "agents", **kw)
    try:
        return await body(urls)
    finally:
        for r in runners:
            await r.cleanup()


def test_fleet_file_errors_name_the_place(tmp_path):
    p = tmp_path / "fleet.toml"
    p.write_text('[[agent]]\nurl = "ftp://x"\n')
    with pytest.raises(Exception, match=r"fleet.toml: agent #1: url must be an http"):
        FleetConfig.load(p)
    p.write_text('[[agent]]\nurl = "http://a:1"\ntokn = "t"\n')
    with pytest.raises(Exception, match=r"agent #1: unknown key\(s\) \['tokn'\]"):
        FleetConfig.load(p)
    p.write_text('[[agent]]\nurl = "http://a:1"\ntoken_file = "missing"\n')
    with pytest.raises(Exception, match=r"token_file \(fleet file\) .*missing.*cannot read"):
        Fleet.from_file(p)
    # a token other users may read is already disclosed: refused, as the agent refuses its own
    (tmp_path / "shared-token").write_text("t" * 32)
    (tmp_path / "shared-token").chmod(0o644)
    p.write_text('[[agent]]\nurl = "http://a:1"\ntoken_file = "shared-token"\n')
    with pytest.raises(Exception, match=r"shared-token.*accessible to other users \(mode 0644.*chmod 0600"):
        Fleet.from_file(p)
    (tmp_path / "shared-token").chmod(0o640)    # the packaged agent's group-readable token is fine
    assert Fleet.from_file(p, allow_plain_http=True).clients[0]._token == "t" * 32
    p.write_text("agent = [\n")
    with pytest.raises(Exception, match="not valid TOML"):
        FleetConfig.load(p)


def test_run_streams_every_window_and_labels_simulated(tmp_path, catalog):
    async def body(urls):
        c = AgentClient(urls[0], TOKEN)
        try:
            info = await c.info()
            res = await c.run(plan(catalog), RunOptions(repetitions=3, warmup_windows=1))
        finally:
            await c.close()
        return info, res
    info, res = asyncio.run(with_agents(tmp_path, 1, body))
    assert info["simulated"] is True and info["backend"] == "sim"
    assert res.trace.simulated and res.trace.values.shape == (24, len(info["schema"]))
    assert [(w.repetition, w.window) for w in res.windows] == [(r, t) for r in range(3) for t in range(8)]
    assert res.values_by_repetition(8).shape == (3, 8, len(info["schema"]))
    assert np.isfinite(res.trace.values).all()


def test_wrong_token_is_a_clear_error(tmp_path):
    async def body(urls):
        c = AgentClient(urls[0], "wrong-token-xxxxxxxxxxxx")
        try:
            await c.info()
        finally:
            await c.close()
    with pytest.raises(AgentError, match="HTTP 401") as e:
        asyncio.run(with_agents(tmp_path, 1, body))
    assert e.value.status == 401


class DroppingProxy:
    """TCP proxy to one agent that cuts its first `cuts` connections after `after_s`."""

    def __init__(self, target_port, cuts=1, after_s=0.15):
        self.target_port, self.cuts, self.after_s, self.connections = target_port, cuts, after_s, 0

    async def start(self):
        self.server = await asyncio.start_server(self.handle, "127.0.0.1", 0)
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def handle(self, reader, writer):
        self.connections += 1
        cut = self.connections <= self.cuts
        ur, uw = await asyncio.open_connection("127.0.0.1", self.target_port)

        async def pipe(r, w):
            try:
                while data := await r.read(65536):
                    w.write(data)
                    await w.drain()
            except (ConnectionError, asyncio.CancelledError):
                pass
            finally:
                w.close()
        tasks = [asyncio.create_task(pipe(reader, uw)), asyncio.create_task(pipe(ur, writer))]
        if cut:
            await asyncio.sleep(self.after_s)
            for t in tasks:
                t.cancel()
            writer.transport.abort()
            uw.transport.abort()
        else:
            await asyncio.gather(*tasks, return_exceptions=True)


def test_stream_reconnects_and_resumes_without_duplicates(tmp_path, catalog):
    """Connections cut mid-run: the client reconnects and gets each window exactly once."""
    async def body(urls):
        port = int(urls[0].rsplit(":", 1)[1])
        proxy = DroppingProxy(port, cuts=2, after_s=0.12)
        url = await proxy.start()
        seen = []
        # POST goes over connection 1 (cut later, harmless); the stream's first connection is cut too.
        c = AgentClient(url, TOKEN, backoff_s=0.05)
        try:
            res = await c.run(plan(catalog, T=20), RunOptions(repetitions=2), on_window=seen.append)
        finally:
            await c.close()
            proxy.server.close()
        return res, seen, proxy.connections
    # 20 windows x 2 repetitions at 50 windows/s: about 0.8 s, cut at 0.12 s
    res, seen, conns = asyncio.run(with_agents(tmp_path, 1, body, speedup=50.0))
    keys = [(w.repetition, w.window) for w in seen]
    assert len(keys) == len(set(keys)) == 40
    assert [(w.repetition, w.window) for w in res.windows] == sorted(keys)
    assert conns >= 3   # the cut connections plus the reconnect


def test_cancelling_run_cancels_on_the_agent(tmp_path, catalog):
    async def body(urls):
        c = AgentClient(urls[0], TOKEN)
        try:
            task = asyncio.create_task(c.run(plan(catalog, T=500), RunOptions()))
            await asyncio.sleep(0.3)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            info = await c.info()
            return info
        finally:
            await c.close()
    info = asyncio.run(with_agents(tmp_path, 1, body, speedup=50.0))
    assert info["current_run"] is None


def test_mixed_hosts_refused_unless_allowed(tmp_path):
    async def body(urls):
        async with Fleet.from_urls(urls, TOKEN) as fl:
            probes = await fl.probe()
            with pytest.raises(FleetError, match="different hardware"):
                fl.check_hosts(probes)
            fl.allow_mixed_hosts = True
            fl.check_hosts(probes)
        async with Fleet.from_urls(urls[:1] + urls[2:], TOKEN) as fl:
            fl.check_hosts(await fl.probe())   # same simulated hardware, different seeds: one host
    asyncio.run(with_agents(tmp_path, 3, body, n_cpus=[4, 2, 4]))


def _spawn_agent(tmp_path, name, speedup):
    tok = tmp_path / "token"
    if not tok.exists():
        tok.write_text(TOKEN)
        tok.chmod(0o600)
    proc = subprocess.Popen([sys.executable, str(ROOT / "bench" / "sim_agents.py"), "--n", "1", "--token-file",
                             str(tok), "--state-dir", str(tmp_path / name), "--speedup", str(speedup)],
                            stdout=subprocess.PIPE, text=True, cwd=ROOT)
    line = proc.stdout.readline()
    return proc, json.loads(line)["urls"][0]


def test_agent_killed_mid_run_has_its_work_reassigned(tmp_path, catalog):
    procs = [_spawn_agent(tmp_path, f"a{i}", speedup=40.0) for i in range(2)]
    victim = procs[0][0]
    try:
        jobs = [Job(f"j{i}", plan(catalog, T=12, seed=i), RunOptions()) for i in range(6)]
        results = []

        async def main():
            async with Fleet([AgentClient(u, TOKEN, reconnects=2, backoff_s=0.05) for _, u in procs],
                             backoff_s=0.05, retire_after=2) as fl:
                async def kill_soon():
                    await asyncio.sleep(0.15)      # mid-way through the first jobs (12 windows = 0.3 s)
                    victim.send_signal(signal.SIGKILL)
                killer = asyncio.create_task(kill_soon())
                rep = await fl.run_jobs(jobs, lambda j, r: results.append((j.id, r.agent)))
                await killer
                return rep
        t0 = time.monotonic()
        rep = asyncio.run(main())
        assert time.monotonic() - t0 < 30
    finally:
        for p, _ in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
            p.wait(timeout=10)
    ids = [i for i, _ in results]
    assert sorted(ids) == sorted(j.id for j in jobs)          # every job once, none twice
    assert rep.reassigned >= 1 and rep.done == 6
    assert procs[0][1] in rep.retired
    assert {a for _, a in results[-3:]} == {procs[1][1]}      # the survivor finished the work


def test_fleet_cli_list_and_probe(tmp_path):
    proc, url = _spawn_agent(tmp_path, "cli", speedup=0.0)
    try:
        fleet = tmp_path / "fleet.toml"
        fleet.write_text(f'[[agent]]\nurl = "{url}"\ntoken_file = "token"\nname = "sim1"\n'
                         f'[[agent]]\nurl = "http://127.0.0.1:9"\ntoken_file = "token"\nname = "down"\n')
        cli = [sys.executable, "-m", "controller.cli", "fleet"]
        out = subprocess.run(cli + ["list", "--fleet", str(fleet)], capture_output=True, text=True, cwd=ROOT)
        assert out.returncode == 0 and "sim1" in out.stdout and "2 agent(s)" in out.stdout
        out = subprocess.run(cli + ["probe", "--fleet", str(fleet)], capture_output=True, text=True, cwd=ROOT,
                             timeout=60)
        assert "sim1: SIMULATED backend sim" in out.stdout
        assert "fingerprint: mimesys simulated host, 4 cores; memory 16.0 GiB" in out.stdout
        assert "metrics: 27 of 27 available" in out.stdout and "calibration: mem.bw_Bps=" in out.stdout
        assert "down: UNREACHABLE" in out.stdout
        assert "1 of 2 agent(s) reachable" in out.stdout
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=10)


def test_busy_agent_orphan_cancelled_foreign_run_awaited(tmp_path, catalog):
    """409 is not a failure: a run this controller started before a restart is cancelled, a
    foreign one is waited for; neither retires the agent."""
    async def body(urls):
        async with Fleet.from_urls(urls, TOKEN, retire_after=1, backoff_s=0.05) as fl:
            c = fl.clients[0]
            orphan = await c.start(plan(catalog, T=5000), RunOptions())        # 100 s at 50 windows/s
            fl.owned_runs.add(orphan)
            t0 = time.monotonic()
            rep1 = await fl.run_jobs([Job("a", plan(catalog, T=5), RunOptions())], lambda j, r: None)
            t_orphan = time.monotonic() - t0
            assert (await c.status(orphan))["state"] == "cancelled"
            foreign = await c.start(plan(catalog, T=25), RunOptions())          # 0.5 s
            started = []
            rep2 = await fl.run_jobs([Job("b", plan(catalog, T=5), RunOptions())], lambda j, r: None,
                                     on_start=lambda j, cl, run_id: started.append(run_id))
            assert (await c.status(foreign))["state"] == "done"
            return rep1, rep2, t_orphan, started, foreign
    rep1, rep2, t_orphan, started, foreign = asyncio.run(with_agents(tmp_path, 1, body, speedup=50.0))
    assert rep1.done == rep2.done == 1 and not rep1.retired and not rep2.retired
    assert t_orphan < 10
    assert len(started) == 1 and started[0] != foreign


def test_a_host_busy_with_another_process_is_waited_for_not_retired(catalog):
    """A run that fails because another process holds the host's run lock (reason host_busy) is
    retried after a pause without counting against the agent; other failures still count."""
    from mimesys.backend import RunOptions
    from mimesys.plan import Plan
    from controller.fleet import Fleet, Job, RunFailed

    class BusyThenFree:
        name, url = "busy-host", "http://127.0.0.1:1"

        def __init__(self, busy: int):
            self.busy, self.calls = busy, 0

        async def run(self, plan, options, on_start=None):
            self.calls += 1
            if self.calls <= self.busy:
                raise RunFailed(self.name, "run x ended failed: this host is already executing a mimesys run",
                                details={"reason": "host_busy"})
            return "ok"

        async def close(self):
            pass

    plan = Plan.from_catalog(np.zeros((2, len(catalog), 1), np.float32), catalog)
    client = BusyThenFree(busy=5)                      # more than retire_after = 3 plain failures
    fleet = Fleet([client], backoff_s=0.01)
    got = []
    report = asyncio.run(fleet.run_jobs([Job("j1", plan, RunOptions())], lambda job, res: got.append(res),
                                        agents=[client]))
    assert got == ["ok"] and report.done == 1 and not report.retired and client.calls == 6
