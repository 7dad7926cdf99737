"""HostBackend's window alignment, deterministically: window t's values must come from the
sample taken at window t's start boundary and the one at window t+1's (the last window: at
its WindowDone). The runner's event stream is scripted here (the real runner is exercised
in test_daemon.py); the SamplerSet is a counter, so each value names the read it came from."""

import asyncio
import time
from pathlib import Path

import numpy as np
import pytest

import agentd.runner as runner_mod
from mimesys.backend import RunOptions
from mimesys.errors import RunnerError
from agentd.host_backend import HostBackend, clear_scratch
from mimesys.metrics import MetricSpec
from mimesys.plan import Plan
from agentd.runner import RunnerExit, WindowDone, WindowStarted
from agentd.samplers import RawSample


class CountingSamplers:
    """read() #i returns reading i; derive(prev, cur) = [prev i, cur i]."""

    def __init__(self):
        self.reads = 0

    def schema(self):
        return [MetricSpec("from_read", "1", source="count"), MetricSpec("to_read", "1", source="count")]

    def read(self):
        r = RawSample(time.monotonic_ns(), {"count": {"i": self.reads}})
        self.reads += 1
        return r

    def derive(self, prev, cur):
        return np.array([prev.readings["count"]["i"], cur.readings["count"]["i"]], np.float32)

    def states(self):
        return {}

    def close(self):
        pass


class ScriptedRunner:
    def __init__(self, events):
        self._events = events
        self.exit = None
        self.stopped = False
        self.info = {}

    async def events(self):
        for ev in self._events:
            await asyncio.sleep(0.001)
            if isinstance(ev, RunnerExit):
                self.exit = ev
            yield ev

    async def stop(self):
        self.stopped = True
        return self.exit


def done(rep, win, M=1, K=1):
    z = np.zeros((M, K), np.int64)
    now = time.monotonic_ns()
    return WindowDone(rep, win, 0, now, z + 5, z + 7, z, z, now - 1_000_000_000, np.zeros(K, np.int64),
                      np.zeros(K, np.int64), np.zeros(K, np.int64), 0)


def started(rep, win):
    return WindowStarted(rep, win, time.monotonic_ns(), 0, 0)


@pytest.fixture
def backend(tmp_path, catalog):
    return HostBackend(cpus=(0,), scratch_dir=tmp_path / "scratch", scratch_budget_bytes=1 << 20,
                       catalog=catalog, samplers=CountingSamplers(), state_dir=tmp_path, run_lock=tmp_path / "run.lock")


def plan_of(catalog, T):
    return Plan.from_catalog(np.zeros((T, len(catalog), 1), np.float32), catalog)


def execute(backend, plan, options, events, monkeypatch):
    handle = ScriptedRunner(events)

    async def fake_start_runner(*a, **kw):
        return handle

    monkeypatch.setattr(runner_mod, "start_runner", fake_start_runner)

    async def main():
        out = [w async for w in backend.execute(plan, options)]
        await backend.close()
        return out
    return asyncio.run(main()), handle


def test_window_t_is_measured_between_its_own_boundaries(backend, catalog, monkeypatch):
    # The real runner's order: start(i), done(i), start(i+1), ...
    events = []
    for rep in range(2):
        for win in range(3):
            events += [started(rep, win), done(rep, win)]
    events.append(RunnerExit(0, "done"))
    windows, handle = execute(backend, plan_of(catalog, 3), RunOptions(repetitions=2), events, monkeypatch)
    assert [(w.repetition, w.window) for w in windows] == [(r, t) for r in range(2) for t in range(3)]
    # Reads 0..5 at the six starts, read 6 when the last window is done.
    assert [tuple(w.values) for w in windows] == [(j, j + 1) for j in range(6)]
    assert all(int(w.ran_ns[0, 0]) == 5 and int(w.ops[0, 0]) == 7 for w in windows)
    assert handle.stopped is False  # it exited by itself: nothing to stop
    assert len(backend.boundary_lag_ns) == 7 and max(backend.boundary_lag_ns) < 1e9


def test_done_arriving_after_the_next_start_changes_nothing(backend, catalog, monkeypatch):
    events = [started(0, 0), started(0, 1), done(0, 0), started(0, 2), done(0, 1), done(0, 2),
              RunnerExit(0, "done")]
    windows, _ = execute(backend, plan_of(catalog, 3), RunOptions(), events, monkeypatch)
    assert [tuple(w.values) for w in windows] == [(0, 1), (1, 2), (2, 3)]


def test_warmup_windows_are_sampled_but_not_reported(backend, catalog, monkeypatch):
    events = [started(-1, 0), done(-1, 0), started(0, 0), done(0, 0), started(0, 1), done(0, 1),
              RunnerExit(0, "done")]
    windows, _ = execute(backend, plan_of(catalog, 2), RunOptions(warmup_windows=1), events, monkeypatch)
    assert [(w.repetition, w.window) for w in windows] == [(0, 0), (0, 1)]
    assert [tuple(w.values) for w in windows] == [(1, 2), (2, 3)]


def test_a_failed_runner_fails_the_run_with_its_reason(backend, catalog, monkeypatch):
    events = [started(0, 0), RunnerExit(5, "error", "thread 0: cannot pin to CPU 0", "stderr tail")]
    with pytest.raises(RunnerError, match="cannot pin to CPU 0"):
        execute(backend, plan_of(catalog, 3), RunOptions(), events, monkeypatch)


def test_a_consumer_that_stops_early_stops_the_runner(backend, catalog, monkeypatch):
    import contextlib
    handle = ScriptedRunner([started(0, t // 2) if t % 2 == 0 else done(0, t // 2) for t in range(20)])

    async def fake_start_runner(*a, **kw):
        return handle
    monkeypatch.setattr(runner_mod, "start_runner", fake_start_runner)

    async def main():
        async with contextlib.aclosing(backend.execute(plan_of(catalog, 10), RunOptions())) as windows:
            async for w in windows:
                break
    asyncio.run(main())
    assert handle.stopped


def test_clear_scratch_removes_files_and_directories_but_keeps_the_directory(tmp_path):
    s = tmp_path / "scratch"
    (s / "d" / "e").mkdir(parents=True)
    (s / "f").write_bytes(b"x")
    (s / "link").symlink_to(tmp_path)
    assert clear_scratch(s) == 3
    assert s.is_dir() and list(s.iterdir()) == [] and tmp_path.exists()
    assert clear_scratch(Path(tmp_path / "new")) == 0 and (tmp_path / "new").is_dir()
