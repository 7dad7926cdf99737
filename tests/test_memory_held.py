"""Memory held as a planned resource: the plan carries it (wire, HDF5, JSON), the schedule and
the real runner hold it (resident pages the kernel counts), the agent's budget bounds it, and
every planner's plan follows its target's used memory over the host's idle level, holding
nothing where the target held nothing."""

from __future__ import annotations

import asyncio
import json
import os
import time
from types import SimpleNamespace

import numpy as np
import pytest

from mimesys.errors import PlanError, RunnerError
from mimesys.metrics import MetricSpec
from mimesys.plan import Plan
from mimesys.trace import Trace

from runner_helpers import make_plan, runner_or_skip

MiB = 2**20


def _plan(catalog, held, T=None, window_s=0.5):
    held = np.asarray(held, np.float64)
    plan = make_plan(catalog, {}, T=len(held) if T is None else T, K=1, window_s=window_s)
    plan.mem_held_B = held
    return plan


def test_memory_held_crosses_every_form_and_is_validated(catalog):
    from agentd.planjson import dumps, from_json, to_json
    plan = _plan(catalog, [0, 300 * MiB, 300 * MiB, 1 * MiB]).validate(catalog)
    for back in (Plan.from_wire(plan.to_wire()), Plan.from_bytes(plan.to_bytes()),
                 from_json(json.loads(dumps(to_json(plan, catalog))), catalog)):
        assert back.mem_held_B.tolist() == plan.mem_held_B.tolist()
    assert plan.held_max_B == 300 * MiB
    for bad, message in ((np.array([0.0, -1, 0, 0]), "memory held outside"),
                         (np.array([0.0, np.nan, 0, 0]), "memory held outside"),
                         (np.zeros(3), r"mem_held_B must be float64 \[T\] = \[4\]")):
        plan.mem_held_B = bad
        with pytest.raises(PlanError, match=message):
            plan.validate(catalog)
    doc = to_json(_plan(catalog, [0, 0]), catalog)
    doc["memory_held"] = [{"windows": 3, "MiB": 1}]
    with pytest.raises(PlanError, match=r"memory_held: covers more than the threads' 2 windows"):
        from_json(doc, catalog)


def test_the_schedule_stores_each_window_s_memory(catalog):
    from agentd.schedule import compile_plan, decode_schedule
    plan = _plan(catalog, [0, 64 * MiB, 16 * MiB])
    header, _, windows = decode_schedule(compile_plan(plan, catalog, warmup_windows=1).data)
    assert header["held_max"] == 64 * MiB
    assert [w.held_B for w in windows] == [0, 0, 64 * MiB, 16 * MiB]     # the warm-up holds window 0's
    header, _, windows = decode_schedule(compile_plan(make_plan(catalog, {}, T=2, K=1, window_s=0.5), catalog).data)
    assert header["held_max"] == 0 and [w.held_B for w in windows] == [0, 0]


def _rss_B(pid: int) -> int:
    """The process's resident bytes from its page tables (smaps_rollup): VmRSS in /proc/PID/status
    is the kernel's per-CPU-batched counter, which proc(5) calls inaccurate (once in CI it read
    149.6 MiB while the runner held 160)."""
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            if line.startswith("Rss:"):
                return int(line.split()[1]) * 1024
    return 0


def _watched(plan, config):
    """Run `plan` on the real runner, its resident memory sampled every 20 ms: ([(monotonic ns,
    bytes)], [WindowDone, with the monotonic ns its result was read])."""
    from agentd.runner import WindowDone, start_runner

    async def go():
        handle = await start_runner(plan, config)
        rss, done = [], []

        async def watch():
            while handle.exit is None:
                try:
                    rss.append((time.monotonic_ns(), _rss_B(handle.pid)))
                except OSError:
                    break
                await asyncio.sleep(0.02)

        watcher = asyncio.create_task(watch())
        async for ev in handle.events():
            if isinstance(ev, WindowDone):
                done.append((time.monotonic_ns(), ev))
        await watcher
        return rss, done

    return asyncio.run(go())


def test_the_runner_holds_grows_and_gives_back_the_planned_memory(catalog):
    """Resident memory of the real runner, sampled every 20 ms, follows the plan: up to 160 MiB
    in the held window, back under 40 MiB once the plan holds nothing."""
    from agentd.runner import RunnerConfig
    runner_or_skip()
    plan = _plan(catalog, [0, 160 * MiB, 160 * MiB, 0, 0], window_s=0.4)
    rss, done = _watched(plan, RunnerConfig(cpus=(0,)))
    assert [(ev.window, ev.held_B) for _, ev in done] == [(0, 0), (1, 160 * MiB), (2, 160 * MiB), (3, 0), (4, 0)]
    peak = max(b for _, b in rss)
    assert 155 * MiB <= peak < 200 * MiB, peak / MiB
    window4 = done[4][1].planned_start_ns                 # on: the plan holds nothing (the runner's clock)
    after = [b for t, b in rss if t > window4 + 50e6]
    assert after and max(after) < 40 * MiB, max(after) / MiB


def test_a_stressor_s_buffers_are_what_the_runner_holds_for_it(catalog, tmp_path):
    """The buffers the catalog accounts for each stressor (what every planner subtracts from the
    memory a plan holds) are what the real runner keeps resident: IO buffers for each IO in
    flight and per submitter, a churned region, nothing for a compute kernel."""
    from agentd.runner import RunnerConfig
    from mimesys.catalog import buffer_of
    runner_or_skip()

    def peak_rss(names):
        plan = make_plan(catalog, {n: 0.9 / len(names) for n in names}, T=3, K=1, window_s=0.4)
        rss, _ = _watched(plan, RunnerConfig(cpus=(0,), scratch_dir=str(tmp_path)))
        return max(b for _, b in rss)

    base = peak_rss(["cpu_int_crc32"])
    assert buffer_of(catalog.stressors[catalog.index("cpu_int_crc32")].params)[0] == 0
    for names in (["disk_seq_read_1m_qd32"], ["disk_seq_write_direct_1m_sync2", "mem_page_fault_churn"]):
        accounted = sum(buffer_of(catalog.stressors[catalog.index(n)].params)[0] for n in names)
        held = peak_rss(names) - base
        assert accounted >= 4 * MiB and 0.9 * accounted <= held <= 1.2 * accounted + 4 * MiB, (names, held / MiB, accounted / MiB)


def test_the_memory_budget_refuses_a_plan_that_holds_more(catalog):
    from agentd.runner import RunnerConfig, start_runner
    runner_or_skip()
    plan = _plan(catalog, [0, 512 * MiB])
    with pytest.raises(RunnerError, match=r"cannot reserve 512 MiB of memory to hold: over --memory-budget 256 MiB"):
        asyncio.run(start_runner(plan, RunnerConfig(cpus=(0,), memory_budget_bytes=256 * MiB)))


def test_the_agent_refuses_a_plan_over_its_memory_budget(catalog):
    from agentd.host_backend import HostBackend
    be = HostBackend.__new__(HostBackend)           # check_plan needs only these
    be.catalog, be.memory_budget_bytes, be.pace_rates = catalog, 256 * MiB, lambda: {}
    with pytest.raises(PlanError, match=r"plan holds 300 MiB of memory in window 1, over this agent's memory "
                                        r"budget of 256 MiB \(agent.memory_budget_mib\)"):
        be.check_plan(_plan(catalog, [0, 300 * MiB]))
    be.check_plan(_plan(catalog, [0, 200 * MiB]))


def _trace(used_B):
    used = np.asarray(used_B, np.float32)[:, None]
    return Trace(used, [MetricSpec("mem.used_B", "B")], window_s=1.0)


class _Idle:
    """A planner that runs nothing: what the guard's finish adds is all the plan holds."""
    name = "idle"

    def __init__(self, catalog):
        self.catalog = catalog

    def generate(self, trace, *, seed=0, progress=None):
        return make_plan(self.catalog, {}, T=trace.T, K=1, window_s=1.0)


def test_every_guarded_planner_holds_what_its_target_held_over_idle(catalog):
    from mimesys.planners.registry import guarded
    idle = 2000 * MiB
    first = SimpleNamespace(metric_names=["mem.used_B"], units=["B"], idle=np.array([idle]),
                            noise=np.array([8 * MiB]), footprint=np.zeros(len(catalog)),
                            catalog_names=list(catalog.names), response=np.zeros((len(catalog), 1)))
    gen = guarded(_Idle(catalog))
    gen.first = first
    target = [idle + 5 * MiB, idle + 400 * MiB, idle + 800 * MiB, idle, idle + 100 * MiB]
    plan = gen.generate(_trace(target))
    held = plan.mem_held_B / MiB
    # 5 MiB over idle is the host's noise (floor 32 MiB): nothing held there
    assert np.allclose(held, [0, 400, 800, 0, 100], atol=0.01), held
    assert plan.provenance["memory_held"]["idle_from"] == "the forward model's idle profile"
    # a host idling 300 MiB lower than when it was profiled: the target's least is its idle level
    lower = [x - 300 * MiB for x in target[:3]] + [idle - 300 * MiB] * 20
    held = gen.generate(_trace(lower)).mem_held_B / MiB
    assert np.allclose(held[:3], [0, 400, 800], atol=0.5) and not held[3:].any(), held
    # a stressor's buffers (256 MiB per thread that runs it) count against what the plan holds
    inner = _Idle(catalog)
    inner.generate = lambda trace, seed=0, progress=None: make_plan(
        catalog, {"mem_stream_triad_256M": 0.2}, T=trace.T, K=1, window_s=1.0)
    gen = guarded(inner)
    gen.first = first
    big = [idle + 300 * MiB, idle + 400 * MiB, idle + 800 * MiB, idle + 10 * MiB, idle + 300 * MiB]
    plan = gen.generate(_trace(big))
    assert np.allclose(plan.mem_held_B / MiB, [44, 144, 544, 0, 44], atol=0.01)
    assert plan.compositions[:, catalog.index("mem_stream_triad_256M"), 0].max() > 0


def test_a_planner_without_a_forward_model_takes_the_target_s_least_as_idle(catalog):
    from mimesys.planners.registry import guarded
    plan = guarded(_Idle(catalog)).generate(_trace([3000 * MiB] * 10 + [3500 * MiB] * 10))
    assert plan.provenance["memory_held"]["idle_from"] == "the target's least"
    assert plan.mem_held_B[:10].max() == 0 and np.allclose(plan.mem_held_B[10:], 500 * MiB)


def test_the_simulated_host_and_the_forward_model_count_memory_held(catalog):
    from mimesys.backend import RunOptions
    from mimesys.sim.backend import SimBackend
    be = SimBackend()
    plan = _plan(be.catalog, [0, 0, 700 * MiB, 700 * MiB], window_s=1.0)
    plan.compositions = np.zeros((4, len(be.catalog), 1), np.float32)

    async def run():
        return [w async for w in be.execute(plan, RunOptions())]

    windows = asyncio.run(run())
    n = [m.name for m in be.metric_schema()].index("mem.used_B")
    used = np.array([w.values[n] for w in windows])
    assert abs((used[2:].mean() - used[:2].mean()) / MiB - 700) < 60, used / MiB   # the simulated host's noise
    from mimesys.forward.firstorder import FirstOrder
    M = len(be.catalog)
    first = FirstOrder(["mem.used_B", "cpu.util"], ["B", "fraction"], list(be.catalog.names), [0],
                       np.array([1000.0 * MiB, 0.01]), np.zeros((M, 2)), np.zeros(M), np.zeros(M),
                       np.array([1200.0 * MiB, 1.0]))
    from mimesys.forward.prediction import with_held
    x = with_held(first, first.predict(np.asarray(plan.compositions)), plan.mem_held_B)
    assert np.allclose(x[:, 0] / MiB, [1000, 1000, 1700, 1700]) and np.allclose(x[:, 1], 0.01)


def test_a_stressor_s_buffers_are_held_only_in_the_windows_that_run_it(catalog, tmp_path):
    """The runner releases a thread's IO buffers at the start of each window that does not run
    their stressor and touches them back where one does: resident memory of the real runner
    follows the windows of a deep-queue reader (32 MiB of buffers), not the whole run."""
    from agentd.runner import RunnerConfig
    from mimesys.catalog import buffer_of
    runner_or_skip()
    reader, compute = "disk_seq_read_1m_qd32", "cpu_int_crc32"
    buffers = buffer_of(catalog.stressors[catalog.index(reader)].params)[0]
    assert buffers >= 32 * MiB
    a = np.zeros((5, len(catalog), 1), np.float32)
    a[[0, 3], catalog.index(reader), 0] = 0.5
    a[[1, 2, 4], catalog.index(compute), 0] = 0.3
    plan = Plan.from_catalog(a, catalog, window_s=0.4)
    rss, done = _watched(plan, RunnerConfig(cpus=(0,), scratch_dir=str(tmp_path)))
    starts = {ev.window: ev.planned_start_ns for _, ev in done}
    assert sorted(starts) == [0, 1, 2, 3, 4]

    def during(w):   # samples well inside window w, on the runner's own clock
        return [b for t, b in rss if starts[w] + 50e6 < t < starts[w] + 350e6]

    held = {w: max(during(w)) for w in range(5)}
    rest = min(held[1], held[2], held[4])
    for w in (0, 3):
        assert held[w] - rest >= 0.9 * buffers, ({k: v / MiB for k, v in held.items()}, buffers / MiB)
    for w in (1, 2, 4):
        assert held[w] - rest < 0.2 * buffers, ({k: v / MiB for k, v in held.items()}, buffers / MiB)


def test_per_thread_buffers_count_only_in_the_windows_that_run_them(catalog):
    """The memory planner subtracts a deep-queue reader's IO buffers (32 MiB a thread) from
    the windows that run it, not from all; the inverse planner leaves it out only of the
    windows where its buffers exceed what the target held there."""
    from mimesys.forward.firstorder import FirstOrder
    from mimesys.forward.model import ForwardModel
    from mimesys.planners.inverse import InversePlanner
    from mimesys.planners.memory import held_for, window_buffers, window_scoped
    from mimesys.solo_profile import memory_footprint
    reader = "disk_seq_read_1m_qd32"
    r = catalog.index(reader)
    assert window_scoped(catalog.hash, catalog.names)[r]
    assert not window_scoped(catalog.hash, catalog.names)[catalog.index("mem_stream_triad_256M")]
    a = np.zeros((4, len(catalog), 2), np.float32)
    a[1, r, :] = 0.3                                  # both threads in window 1
    a[2, r, 0] = 0.3                                  # one in window 2
    a[:, catalog.index("mem_stream_triad_256M"), 0] = [0, 0, 0, 0.1]   # a working set: every window
    plan = Plan.from_catalog(a, catalog, window_s=1.0)
    assert np.allclose(window_buffers(plan) / MiB, [256, 256 + 64, 256 + 32, 256])
    assert np.allclose(held_for(np.array([0, 400, 400, 400]) * MiB, 0.0, 32 * MiB, window_buffers(plan), np.inf) / MiB,
                       [0, 80, 112, 144])

    names, units = ["cpu.util.core0", "disk.read_Bps", "mem.used_B"], ["fraction", "B/s", "B"]
    M, idle = len(catalog), 2000 * MiB
    R = np.zeros((M, 3))
    R[r, 1] = 2e8
    fo = FirstOrder(names, units, list(catalog.names), [0, 0], np.array([0.0, 0.0, idle]), R, np.ones(M), np.zeros(M),
                    np.array([1.0, 1e9, 24e9]), classes=[s.resource_class for s in catalog.stressors],
                    footprint=np.array(memory_footprint([s.canonical() for s in catalog.stressors], 2)),
                    noise=np.array([0.01, 1e5, 8 * MiB]))
    planner = InversePlanner(ForwardModel(fo, np.array([1.0, 1e9, 24e9]), catalog.hash))
    target = np.array([[0.3, 5e7, idle], [0.3, 5e7, idle + 200 * MiB], [0.3, 5e7, idle + 10 * MiB],
                       [0.3, 5e7, idle + 200 * MiB]])
    assert planner.rules.allowed(target)[:, r].tolist() == [False, True, False, True]
