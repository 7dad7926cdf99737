"""The run manager: one run at a time, started, cancelled and asked about.

A run executes a validated plan through the Backend (runloop.py): every executed window becomes
one wire frame in the run's FrameLog (framelog.py), for readers that connect late, and one record
in its journal (journal.py), which becomes trace.h5 when the run ends. What the agent keeps of
its runs on disk is runstore.py's; the runs a crash interrupted are recovered by run_recovery.py.
A finished run drops its plan; its frames are kept only until the next run starts.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from pathlib import Path

from mimesys.backend import Backend, RunOptions
from mimesys.catalog import Catalog
from mimesys.errors import Conflict, PlanError
from mimesys.plan import Plan

from .framelog import FrameLog, header_frame
from .runbook import RunBook
from .runloop import RunCounters, execute
from .runstore import Run, RunState, RunStore, new_run_id

log = logging.getLogger(__name__)


class RunConflict(Conflict):
    """Another run is executing; `running` names it (the 409 body carries it)."""

    def __init__(self, running: str):
        super().__init__(f"run {running} is still running; one run at a time (DELETE /v1/runs/{running} to cancel)")
        self.details = {"running": running}


@dataclass(frozen=True)
class RunLimits:
    """What one run may ask of the agent (the config's `runs` table and the host's CPUs)."""
    max_threads: int
    max_duration_s: float = 7 * 24 * 3600.0
    max_window_threads: int = 2_000_000

    def check_size(self, plan: Plan, options: RunOptions) -> None:
        """Before any of it is done: the run's duration, and its stored windows x threads (plan +
        warm-up windows: what the compiled schedule and its compile time grow with; the runner
        repeats the plan windows itself)."""
        executed = plan.T * options.repetitions + options.warmup_windows
        duration = executed * float(plan.window_s)
        if duration > self.max_duration_s:
            raise PlanError(f"run would last {duration:.0f} s ({executed} windows of {plan.window_s} s); "
                            f"runs.max_duration_s is {self.max_duration_s:.0f}")
        stored = plan.T + options.warmup_windows
        if stored * plan.K > self.max_window_threads:
            raise PlanError(f"run has {stored} plan and warm-up windows x {plan.K} threads = {stored * plan.K}; "
                            f"runs.max_window_threads is {self.max_window_threads}")


class RunManager:
    """One run at a time: a run started (checked off the loop) and cancelled; what is known of
    each run is its book's (`book`)."""

    def __init__(self, backend: Backend, catalog: Catalog, *, state_dir: Path, max_threads: int,
                 keep: int = 20, stream_buffer_bytes: int = 64 << 20, max_duration_s: float = 7 * 24 * 3600.0,
                 max_window_threads: int = 2_000_000):
        self.backend = backend
        self.catalog = catalog
        self.limits = RunLimits(max_threads, max_duration_s, max_window_threads)
        self.stream_buffer_bytes = stream_buffer_bytes
        self.store = RunStore(Path(state_dir) / "runs", keep)
        self.book = RunBook(self.store, backend)
        self.counters = RunCounters()           # for /metrics
        self._starting = asyncio.Lock()          # one start (validating off the loop) at a time

    def validate(self, plan: Plan) -> Plan:
        plan.validate(self.catalog, max_threads=self.limits.max_threads)
        self.backend.check_plan(plan)
        return plan

    def _prepare(self, plan: Plan, options: RunOptions) -> None:
        """Everything proportional to the plan's size, on a worker thread: the loop only waits."""
        self.limits.check_size(plan, options)
        plan.freeze()
        self.validate(plan)      # once: the backend and the compiler reuse the result
        self.store.check_disk(plan, options, self.backend)

    async def start(self, plan: Plan, options: RunOptions) -> Run:
        if (running := self.book.running()) is not None:
            raise RunConflict(running.run_id)
        async with self._starting:
            if (running := self.book.running()) is not None:
                raise RunConflict(running.run_id)
            await asyncio.to_thread(self._prepare, plan, options)
            run = self._new_run(plan, options)
            # The run's directory and run.json (fsynced: on a busy disk an fsync waits for what
            # the whole filesystem has to write, seconds) off the loop. Once under way it is
            # finished even if this request is cancelled, and the run begins: as if the client
            # had gone just after its 201.
            made = asyncio.ensure_future(asyncio.to_thread(self._create_dir, run))
            cancelled = False
            while not made.done():
                try:
                    await asyncio.shield(made)
                except asyncio.CancelledError:
                    cancelled = True
            made.result()
            self._begin(run)
            if cancelled:
                raise asyncio.CancelledError
            return run

    def _new_run(self, plan: Plan, options: RunOptions) -> Run:
        run_id = new_run_id()
        frames = FrameLog(header_frame(run_id, plan, options, self.backend), self.stream_buffer_bytes)
        return Run(run_id, plan, options, self.store.runs_dir / run_id, frames,
                   windows_total=plan.T * options.repetitions, window_s=float(plan.window_s), plan_windows=plan.T,
                   catalog_hash=plan.catalog_hash, seed=options.seed if options.seed is not None else plan.seed,
                   plan_provenance=plan.provenance)

    def _create_dir(self, run: Run) -> None:
        run.dir.mkdir(parents=True)
        self.store.write_status(run)

    def _begin(self, run: Run) -> None:
        self.book.add(run)
        run.task = asyncio.create_task(execute(run, self.backend, self.counters, self.book.ended),
                                       name=f"run-{run.run_id}")
        log.info("run %s started: %d windows x %d repetitions, %d stressors x %d threads",
                 run.run_id, run.plan.T, run.options.repetitions, run.plan.M, run.plan.K)

    async def cancel(self, run_id: str, *, by_request: bool = True) -> RunState:
        """Idempotent: the first call cancels the run; every call (a second DELETE, shutdown)
        waits until the run's cleanup is done, and none interrupts it."""
        run = self.book.get(run_id)
        if run is None:
            return RunState(self.book.status(run_id)["state"])
        if run.task is not None and not run.task.done():
            if not run.stop_requested:
                run.cancel_requested = by_request
                # The flag is checked at every window: a cancellation that lands just as an inner
                # wait_for completes can be swallowed (Python < 3.12); the run then stops at its
                # next window instead of running on.
                run.stop_requested = True
                run.task.cancel()
            # asyncio.wait never cancels the task it waits on, even if this caller is cancelled.
            await asyncio.wait({run.task})
        return run.state

    async def close(self) -> None:
        """Cancel the current run (agent shutdown)."""
        run = self.book.current
        if run is not None and run.task is not None and not run.task.done():
            await self.cancel(run.run_id, by_request=False)
