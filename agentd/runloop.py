"""One run's execution: each window from the backend into the journal, the frame log and the
agent's counters; then its end, published only once its trace is on disk.

Ending a run is shielded: a second DELETE, or agent shutdown during a DELETE, waits for the
first one's cleanup instead of interrupting it (a run interrupted there would read "running"
forever and refuse every later POST).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from mimesys import wire
from mimesys.backend import Backend
from mimesys.errors import MimesysError

from .journal import JOURNAL, journal_record, open_journal, write_trace
from .prometheus.telemetry import LatestSample, SegmentErrors
from .runstore import Run, RunState

log = logging.getLogger("agentd.runs")


@dataclass
class RunCounters:
    """What /metrics reports of the runs this process executed."""
    runs_by_state: collections.Counter[str] = field(default_factory=collections.Counter)
    windows_executed: int = 0
    segment_errors: SegmentErrors = field(default_factory=SegmentErrors)  # per (stressor, thread, window)
    latest: LatestSample = field(default_factory=LatestSample)   # the newest measured window, for host gauges


async def execute(run: Run, backend: Backend, counters: RunCounters, ended: Callable[[Run], None]) -> None:
    """Run `run` to its end; `ended(run)` is then called on a worker thread (run.json, pruning)."""
    state, error = RunState.DONE, None
    n_metrics = len(backend.metric_schema())
    journal = None
    try:
        if run.options.record:
            journal = open_journal(run.dir / JOURNAL)
        # aclosing: the backend's generator (and the runner it owns) is closed here, at
        # once, however this loop ends, not whenever the generator is collected.
        async with contextlib.aclosing(backend.execute(run.plan, run.options)) as windows:
            async for w in windows:
                if run.stop_requested:
                    raise asyncio.CancelledError
                values = np.asarray(w.values, np.float32)
                if journal is not None:
                    # One small append per window: what was measured survives a crash.
                    journal.write(journal_record(int(w.start_ns), values, n_metrics))
                run.windows_done += 1
                counters.windows_executed += 1
                counters.latest.update(w.values)
                if 0 <= w.window < run.plan.T:
                    counters.segment_errors.observe_window(run.plan.compositions[w.window], run.plan.window_s,
                                                           w.ran_ns, w.planned_ns)
                run.frames.append(wire.pack(wire.window_frame(w)))
    except asyncio.CancelledError:
        state = RunState.CANCELLED
        error = "cancelled by request" if run.cancel_requested else "cancelled: agent shutting down"
    except MimesysError as e:
        state, error = RunState.FAILED, str(e)
        run.reason = getattr(e, "reason", None)
        log.error("run %s failed: %s", run.run_id, e)
    except Exception as e:  # a bug or an unexpected OS error: the run fails, the agent stays up
        state, error = RunState.FAILED, f"{type(e).__name__}: {e}"
        log.exception("run %s failed unexpectedly", run.run_id)
    finally:
        if journal is not None:
            journal.close()
    # The final state is published only after the trace is on disk, so a client that sees
    # "done" can fetch trace.h5 at once. Shielded: a cancel that lands now waits for it.
    finish = asyncio.ensure_future(_finish(run, backend, counters, ended, state, error, n_metrics))
    while not finish.done():
        try:
            await asyncio.shield(finish)
        except asyncio.CancelledError:
            continue


async def _finish(run: Run, backend: Backend, counters: RunCounters, ended: Callable[[Run], None],
                  state: RunState, error: str | None, n_metrics: int) -> None:
    try:
        run.ended_at = time.time()
        if run.options.record and run.windows_done:
            try:
                await asyncio.to_thread(write_trace, run, backend, state.value, n_metrics)
                run.recorded = True
            except Exception as e:
                log.error("run %s: could not write its trace: %s", run.run_id, e)
                error = (error + "; " if error else "") + f"trace not written: {e}"
        run.plan = None
    finally:
        run.state, run.error = state, error
        end = {"type": "end", "state": state.value, "windows_done": run.windows_done}
        if error:
            end["error"] = error
        if run.reason:
            end["reason"] = run.reason
        if run.frames is not None:
            run.frames.close(wire.pack(end))
        counters.runs_by_state[state.value] += 1
        log.info("run %s %s after %d of %d windows%s", run.run_id, state.value, run.windows_done,
                 run.windows_total, f": {error}" if error else "")
        # Off the loop: run.json's two fsyncs and removing old runs' directories. An fsync on
        # a busy disk waits for what the whole filesystem has to write; on the loop it once
        # held every request for 31 s (the soak of 2026-11-26).
        await asyncio.to_thread(ended, run)
