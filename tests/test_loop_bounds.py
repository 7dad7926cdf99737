"""A loop that only waits (issue 16): a plan is validated once and off the event loop, compiled
off the loop, runs are capped in duration and windows x threads, and /v1/generate is bounded
(window cap, one at a time, 409 during a run, stopped when its client goes away)."""

import asyncio
import threading
import time

import aiohttp
import numpy as np
import pytest

from agentd import runner as runner_mod
from mimesys import wire
from agentd.api.state import GENERATOR
from mimesys.metrics import MetricSpec
from mimesys.plan import Plan
from agentd.runner import RunnerConfig, start_runner
from mimesys.trace import Trace
from test_api import AUTH, body, cpu_plan, make_config, run, sim_paced  # noqa: F401
from agentd.api import create_app
from agentd.backend_registry import create_backend
from aiohttp.test_utils import TestClient, TestServer
from test_api import TOKEN


class _App:
    def __init__(self, tmp_path, **sections):
        self.cfg = make_config(tmp_path, **sections)
        self.app = create_app(self.cfg, create_backend(self.cfg), token=TOKEN)

    async def __aenter__(self):
        self.server = TestServer(self.app, host="127.0.0.1")
        await self.server.start_server()
        self.client = TestClient(self.server, headers=AUTH)
        await self.client.start_server()
        return self

    async def __aexit__(self, *exc):
        await self.client.close()
        await self.server.close()


async def _healthz_ms(c) -> float:
    t0 = time.perf_counter()
    async with c.get("/healthz") as r:
        assert r.status == 200
    return (time.perf_counter() - t0) * 1e3


def test_plan_validation_is_off_the_loop_and_done_once(tmp_path, catalog, monkeypatch):
    calls = []
    real = Plan._validate

    def slow_validate(self, *a, **kw):
        calls.append(threading.current_thread() is threading.main_thread())
        time.sleep(0.8)          # what a week-long 8-thread plan costs
        return real(self, *a, **kw)
    monkeypatch.setattr(Plan, "_validate", slow_validate)
    plan = cpu_plan(catalog, [[0.2, 0.2]] * 3)

    async def main():
        async with _App(tmp_path) as a:
            c = a.client
            post = asyncio.create_task(c.post("/v1/runs", data=wire.pack({"plan": plan.to_wire()})))
            await asyncio.sleep(0.2)
            worst = max([await _healthz_ms(c) for _ in range(5)])
            r = await post
            assert r.status == 201, await body(r)
            run_id = (await body(r))["run_id"]
            for _ in range(100):
                async with c.get(f"/v1/runs/{run_id}") as s:
                    if (await body(s))["state"] != "running":
                        break
                await asyncio.sleep(0.05)
            return worst
    worst = run(main())
    assert worst < 100, f"/healthz took {worst:.0f} ms while a plan was validated"
    assert calls == [False], calls     # once (not by the backend or compiler again), never on the loop


def test_the_schedule_is_compiled_off_the_loop(tmp_path, catalog, monkeypatch):
    seen = []

    def compile_probe(*a, **kw):
        seen.append(threading.current_thread() is threading.main_thread())
        raise RuntimeError("stop here")
    monkeypatch.setattr(runner_mod, "compile_plan", compile_probe)
    with pytest.raises(RuntimeError, match="stop here"):
        asyncio.run(start_runner(cpu_plan(catalog, [[0.5]]), RunnerConfig(), catalog=catalog))
    assert seen == [False]


@pytest.mark.parametrize("runs,options,match", [
    ({"max_duration_s": 100.0}, {"repetitions": 11}, "max_duration_s"),
    ({"max_window_threads": 20}, {"repetitions": 1, "warmup_windows": 2}, "max_window_threads"),
])
def test_runs_are_capped(tmp_path, catalog, runs, options, match):
    plan = cpu_plan(catalog, [[0.1, 0.1]] * 10)

    async def main():
        async with _App(tmp_path, runs=runs) as a:
            async with a.client.post("/v1/runs", data=wire.pack({"plan": plan.to_wire(), "options": options})) as r:
                assert r.status == 400
                assert match in (await body(r))["error"]
    run(main())


class _SlowGenerator:
    name = "slow-test-generator"

    def __init__(self, catalog, per_window_s=0.05):
        self.catalog, self.per_window_s = catalog, per_window_s
        self.windows_done = 0

    def generate(self, trace, *, seed=0, progress=None):
        for t in range(trace.T):
            time.sleep(self.per_window_s)
            self.windows_done += 1
            if progress is not None:
                progress(t + 1, trace.T)
        return cpu_plan(self.catalog, [[0.1, 0.1]] * trace.T)


def _trace(T):
    return Trace(np.zeros((T, 1), np.float32), [MetricSpec("cpu.util", "1")]).to_wire()


def test_generate_is_bounded(tmp_path, catalog, sim_paced):
    gen = _SlowGenerator(catalog)

    async def main():
        async with _App(tmp_path, runs={"generate_max_windows": 100}) as a:
            a.app[GENERATOR]["generator"] = gen
            c = a.client
            async with c.post("/v1/generate", data=wire.pack({"trace": _trace(101)})) as r:
                assert r.status == 400 and "generate_max_windows" in (await body(r))["error"]
            # One at a time: a second request while one runs is 409.
            first = asyncio.create_task(c.post("/v1/generate", data=wire.pack({"trace": _trace(20)})))
            await asyncio.sleep(0.3)
            async with c.post("/v1/generate", data=wire.pack({"trace": _trace(2)})) as r:
                assert r.status == 409 and "one at a time" in (await body(r))["error"]
            r = await first
            assert r.status == 200 and (await body(r))["windows"] == 20
            # 409 while a run measures the host.
            plan = cpu_plan(catalog, [[0.1, 0.1]] * 20, window_s=0.1)
            async with c.post("/v1/runs", data=wire.pack({"plan": plan.to_wire()})) as r:
                run_id = (await body(r))["run_id"]
            async with c.post("/v1/generate", data=wire.pack({"trace": _trace(2)})) as r:
                assert r.status == 409 and run_id in (await body(r))["error"]
            async with c.delete(f"/v1/runs/{run_id}") as r:
                assert r.status == 200
    run(main())


def test_generate_stops_when_its_client_goes_away(tmp_path, catalog):
    gen = _SlowGenerator(catalog, per_window_s=0.02)

    async def main():
        async with _App(tmp_path) as a:
            a.app[GENERATOR]["generator"] = gen
            url = str(a.client.make_url("/v1/generate"))
            async with aiohttp.ClientSession(headers=AUTH) as s:
                with pytest.raises(asyncio.TimeoutError):
                    async with s.post(url, data=wire.pack({"trace": _trace(5000)}),
                                      timeout=aiohttp.ClientTimeout(total=0.5)):
                        pass
            await asyncio.sleep(1.0)
            after = gen.windows_done
            await asyncio.sleep(0.5)
            assert gen.windows_done == after, "generation went on after its client left"
            assert after < 200
            # And the agent takes the next request at once.
            async with a.client.post("/v1/generate", data=wire.pack({"trace": _trace(2)})) as r:
                assert r.status == 200
    run(main())


def test_repetitions_cost_the_schedule_nothing(catalog):
    """The runner repeats the plan windows: 1000 repetitions compile to the same stored windows
    as one (the header says how many to run), and the window x thread cap counts stored windows,
    so a long repetition of a plan is bounded by its duration alone."""
    from mimesys.backend import RunOptions
    from mimesys.errors import PlanError
    from agentd.runs import RunLimits
    from agentd.schedule import compile_plan
    plan = cpu_plan(catalog, [[0.1, 0.1]] * 10)
    one, many = compile_plan(plan, catalog), compile_plan(plan, catalog, repetitions=1000)
    assert len(many.data) == len(one.data) and many.S == one.S == 10 and many.E == 10_000
    assert many.executed(9_999) == (999, 9) and many.executed(0) == (0, 0)
    limits = RunLimits(max_threads=2, max_window_threads=20, max_duration_s=1e9)
    limits.check_size(plan, RunOptions(repetitions=1000))
    with pytest.raises(PlanError, match="max_window_threads"):
        limits.check_size(plan, RunOptions(repetitions=1, warmup_windows=1))


def test_bodies_are_decoded_off_the_loop_and_generate_has_its_own_thread(tmp_path, catalog, monkeypatch):
    """msgpack bodies are decoded on a worker thread (a large body must not stall /healthz), and
    /v1/generate runs on a thread of its own pool, never the default executor that finishes runs
    (a long generation must not delay a run's trace)."""
    from mimesys.api import bodies
    decoded_on_main, gen_threads = [], []
    real = bodies.body_map

    def probe(*a, **kw):
        decoded_on_main.append(threading.current_thread() is threading.main_thread())
        return real(*a, **kw)
    monkeypatch.setattr(bodies, "body_map", probe)

    class Recording(_SlowGenerator):
        def generate(self, trace, **kw):
            gen_threads.append(threading.current_thread().name)
            return super().generate(trace, **kw)

    async def main():
        async with _App(tmp_path) as a:
            a.app[GENERATOR]["generator"] = Recording(catalog, per_window_s=0.001)
            async with a.client.post("/v1/generate", data=wire.pack({"trace": _trace(3)})) as r:
                assert r.status == 200
            plan = cpu_plan(catalog, [[0.1, 0.1]] * 2, window_s=0.1)
            async with a.client.post("/v1/runs", data=wire.pack({"plan": plan.to_wire()})) as r:
                assert r.status == 201
    run(main())
    assert decoded_on_main and not any(decoded_on_main)        # both bodies, off the loop's thread
    assert len(gen_threads) == 1 and gen_threads[0].startswith("generate")
