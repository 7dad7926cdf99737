"""Runs that survive (issue 16): cancellation is idempotent and its cleanup shielded, windows are
on disk as they come, a crashed run's windows are recovered, finished runs drop their plan
and frames, and a run whose trace would not fit is refused before it starts."""

import asyncio
import json
import os
import threading
import time

import numpy as np
import pytest

from agentd import runloop, runstore
from mimesys.backend import RunOptions
from agentd.backend_registry import create_backend
from mimesys.errors import InsufficientStorage, NotFound
from agentd.journal import JOURNAL, read_journal
from agentd.runs import RunManager
from agentd.runstore import RunState
from mimesys.trace import Trace
from test_api import cpu_plan, make_config, sim_paced  # noqa: F401  (fixture)


def _manager(tmp_path, catalog):
    cfg = make_config(tmp_path)
    backend = create_backend(cfg)
    return RunManager(backend, catalog, state_dir=cfg.agent.state_dir, max_threads=2), backend


def _slow_trace_write(monkeypatch, seconds=0.5):
    """Trace writing that takes a while, so a second cancel lands in the middle of it."""
    real = runloop.write_trace
    entered = threading.Event()

    def slow(*a, **kw):
        entered.set()
        time.sleep(seconds)
        return real(*a, **kw)
    monkeypatch.setattr(runloop, "write_trace", slow)
    return entered


async def _until(pred, timeout=10.0):
    t0 = time.monotonic()
    while not pred():
        assert time.monotonic() - t0 < timeout
        await asyncio.sleep(0.02)


@pytest.mark.parametrize("second", ["delete", "shutdown"])
def test_second_cancel_during_cleanup_does_not_wedge_the_run(tmp_path, catalog, sim_paced, monkeypatch, second):
    entered = _slow_trace_write(monkeypatch)

    async def main():
        mgr, backend = _manager(tmp_path, catalog)
        run = await mgr.start(cpu_plan(catalog, [[0.5, 0.5]] * 30, window_s=0.05), RunOptions())
        await _until(lambda: run.windows_done >= 2)
        first = asyncio.create_task(mgr.cancel(run.run_id))
        await _until(entered.is_set)
        again = mgr.cancel(run.run_id) if second == "delete" else mgr.close()
        await asyncio.wait_for(again, 10)
        assert run.state is RunState.CANCELLED and run.recorded
        assert (await first) is RunState.CANCELLED
        assert mgr.book.status(run.run_id)["state"] == "cancelled"
        # The next run is accepted: nothing reads "running" forever.
        nxt = await mgr.start(cpu_plan(catalog, [[0.1, 0.1]], window_s=0.05), RunOptions())
        await asyncio.wait_for(asyncio.shield(nxt.task), 10)
        await backend.close()
    asyncio.run(main())


def test_a_cancelled_waiter_does_not_interrupt_cleanup(tmp_path, catalog, sim_paced, monkeypatch):
    entered = _slow_trace_write(monkeypatch)

    async def main():
        mgr, backend = _manager(tmp_path, catalog)
        run = await mgr.start(cpu_plan(catalog, [[0.5, 0.5]] * 30, window_s=0.05), RunOptions())
        await _until(lambda: run.windows_done >= 1)
        waiter = asyncio.create_task(mgr.cancel(run.run_id))
        await _until(entered.is_set)
        waiter.cancel()          # a DELETE whose client went away
        await asyncio.wait_for(asyncio.wait({run.task}), 10)
        assert run.state is RunState.CANCELLED and run.recorded
        await backend.close()
    asyncio.run(main())


def test_windows_are_on_disk_while_the_run_runs(tmp_path, catalog, sim_paced):
    async def main():
        mgr, backend = _manager(tmp_path, catalog)
        run = await mgr.start(cpu_plan(catalog, [[0.5, 0.5]] * 40, window_s=0.05), RunOptions())
        await _until(lambda: run.windows_done >= 3)
        starts, values = read_journal(run.dir / JOURNAL, len(backend.metric_schema()))
        assert len(starts) >= 3 and values.shape[1] == len(backend.metric_schema())
        await mgr.cancel(run.run_id)
        await backend.close()
    asyncio.run(main())


def test_a_crashed_runs_windows_are_recovered_and_it_says_so(tmp_path, catalog, sim_paced, monkeypatch):
    async def crash():
        mgr, backend = _manager(tmp_path, catalog)
        run = await mgr.start(cpu_plan(catalog, [[0.5, 0.5]] * 40, window_s=0.05), RunOptions())
        await _until(lambda: run.windows_done >= 4)
        # A crash: the run stops without its cleanup (run.json still says running).

        async def no_cleanup(*a, **kw):
            pass
        monkeypatch.setattr(runloop, "_finish", no_cleanup)
        await mgr.cancel(run.run_id)
        await backend.close()
        return run.run_id, run.dir

    run_id, run_dir = asyncio.run(crash())
    assert json.loads((run_dir / "run.json").read_text())["state"] == "running"
    mgr, backend = _manager(tmp_path, catalog)       # the agent starts again
    assert mgr.book.status(run_id)["state"] == "failed"   # at once, before its trace is written
    assert mgr.book.recovered.wait(30)
    status = mgr.book.status(run_id)
    assert status["state"] == "failed" and status["recorded"] and "recovering" not in status
    assert "measured windows kept" in status["error"] and status["windows_done"] >= 4
    tr = Trace.read(run_dir / "trace.h5")
    assert tr.T == status["windows_done"] and tr.provenance["interrupted"] is True
    asyncio.run(backend.close())


def test_finished_runs_drop_plan_and_frames(tmp_path, catalog):
    async def main():
        mgr, backend = _manager(tmp_path, catalog)
        a = await mgr.start(cpu_plan(catalog, [[0.5, 0.5]] * 3), RunOptions())
        await asyncio.wait({a.task})
        assert a.plan is None and a.frames is not None      # the newest run keeps frames for late readers
        b = await mgr.start(cpu_plan(catalog, [[0.5, 0.5]] * 3), RunOptions())
        await asyncio.wait({b.task})
        assert a.frames is None
        with pytest.raises(NotFound, match="trace.msgpack"):
            mgr.book.frames(a.run_id)
        await backend.close()
    asyncio.run(main())


def test_a_run_that_would_not_fit_on_disk_is_refused(tmp_path, catalog, monkeypatch):
    real = os.statvfs

    class Full:
        def __init__(self, st):
            self.f_frsize, self.f_bavail = st.f_frsize, 10

    monkeypatch.setattr(runstore.os, "statvfs", lambda p: Full(real(p)))

    async def main():
        mgr, backend = _manager(tmp_path, catalog)
        with pytest.raises(InsufficientStorage, match="MiB free"):
            await mgr.start(cpu_plan(catalog, [[0.5, 0.5]] * 3), RunOptions())
        assert mgr.book.current is None
        # record=false writes nothing, so it is not refused.
        run = await mgr.start(cpu_plan(catalog, [[0.5, 0.5]] * 3), RunOptions(record=False))
        await asyncio.wait({run.task})
        assert run.state is RunState.DONE
        await backend.close()
    asyncio.run(main())


def test_run_files_are_fsynced_and_pruned_off_the_loop(tmp_path, catalog, sim_paced, monkeypatch):
    """run.json is written with two fsyncs at a run's start and end, and ending a run removes
    the oldest runs' directories: on a busy disk an fsync waits for what the whole filesystem
    has to write (a 31 s loop stall in the 30-minute soak of 2026-11-26, issue 23), so none of
    it may run on the event loop's thread."""
    import shutil

    from mimesys import fsutil
    on_loop = {"fsync": 0, "rmtree": 0}
    off_loop = {"fsync": 0, "rmtree": 0}
    real_fsync, real_rmtree = os.fsync, shutil.rmtree

    def where(kind):
        (on_loop if threading.current_thread() is threading.main_thread() else off_loop)[kind] += 1

    def fsync(fd):
        where("fsync")
        return real_fsync(fd)

    def rmtree(path, *a, **kw):
        where("rmtree")
        return real_rmtree(path, *a, **kw)
    monkeypatch.setattr(fsutil.os, "fsync", fsync)
    monkeypatch.setattr(runstore.shutil, "rmtree", rmtree)

    async def main():
        cfg = make_config(tmp_path)
        backend = create_backend(cfg)
        mgr = RunManager(backend, catalog, state_dir=cfg.agent.state_dir, max_threads=2, keep=1)
        for _ in range(2):                       # the second run's end prunes the first
            run = await mgr.start(cpu_plan(catalog, [[0.5, 0.5]] * 3, window_s=0.05), RunOptions())
            await asyncio.wait({run.task})
            assert run.state is RunState.DONE
        await backend.close()
        return sorted(p.name for p in mgr.store.runs_dir.iterdir())
    left = asyncio.run(main())
    assert len(left) == 1
    assert off_loop["fsync"] >= 8 and off_loop["rmtree"] >= 1, off_loop
    assert on_loop == {"fsync": 0, "rmtree": 0}, on_loop


def test_a_long_or_planted_journal_neither_delays_the_start_nor_is_read_whole(tmp_path, catalog):
    """64 MiB of journal (a planted one, or a long run at a short interval): the manager is up at
    once, and the trace is written from it a chunk at a time, off the start path."""
    import tracemalloc
    from agentd.journal import JOURNAL_CHUNK
    mgr, backend = _manager(tmp_path, catalog)
    n = len(backend.metric_schema())
    run_dir = mgr.store.runs_dir / "20260101T000000Z-abcdef"
    run_dir.mkdir()
    rec = 8 + 4 * n
    windows = (64 << 20) // rec
    (run_dir / "run.json").write_text(json.dumps({"state": "running", "window_s": 1.0, "windows_total": windows}))
    with open(run_dir / JOURNAL, "wb") as f:
        f.truncate(windows * rec + 3)                    # sparse; a torn last record
    # A journal longer than its run could have measured keeps what the run could have measured.
    short = mgr.store.runs_dir / "20260101T000001Z-abcdef"
    short.mkdir()
    (short / "run.json").write_text(json.dumps({"state": "running", "window_s": 1.0, "windows_total": 10}))
    with open(short / JOURNAL, "wb") as f:
        f.truncate(1000 * rec)
    asyncio.run(backend.close())
    tracemalloc.start()
    t0 = time.monotonic()
    mgr, backend = _manager(tmp_path, catalog)
    up = time.monotonic() - t0
    assert mgr.book.recovered.wait(120)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    status = mgr.book.status(run_dir.name)
    assert status["windows_done"] == windows and status["recorded"], status
    assert up < 2.0, up
    assert peak < 6 * JOURNAL_CHUNK * rec + (8 << 20), peak       # a few chunks, not the 64 MiB journal
    assert Trace.read(run_dir / "trace.h5").T == windows
    assert mgr.book.status(short.name)["windows_done"] == 10 and Trace.read(short / "trace.h5").T == 10
    asyncio.run(backend.close())
