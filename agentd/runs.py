"""The run manager: one run at a time, its frames buffered for late readers, its trace on disk.

A run executes a validated plan through the Backend. Every executed window becomes one
wire frame appended to the run's FrameLog; a WebSocket that connects after the run began
still receives the header and every window from the first (the log is bounded by
`runs.stream_buffer_mib`; a reader that falls behind what the log still holds gets a
"gap" frame saying how many windows it missed and should fetch trace.h5 instead).

On disk, under state_dir/runs/<run_id>/: `run.json` (the run's status, rewritten when it
ends) and `trace.h5` when recorded (written atomically at the end, including a failed or
cancelled run's measured windows). Only the `runs.keep` most recent runs are kept.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import logging
import re
import secrets
import shutil
import time
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import AsyncIterator

import numpy as np

from . import __version__, wire
from .backend import Backend, RunOptions
from .catalog import Catalog
from .errors import Conflict, MimesysError, NotFound
from .plan import Plan
from .trace import Trace
from .telemetry import LatestSample, SegmentErrors

log = logging.getLogger(__name__)

RUN_ID_RE = re.compile(r"^[0-9]{8}T[0-9]{6}Z-[0-9a-f]{6}$")


class RunState(str, Enum):
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"


class RunConflict(Conflict):
    """Another run is executing; `running` names it (the 409 body carries it)."""

    def __init__(self, running: str):
        super().__init__(f"run {running} is still running; one run at a time (DELETE /v1/runs/{running} to cancel)")
        self.details = {"running": running}


class FrameLog:
    """Packed frames of one run, appended by the run task and followed by any number of readers.

    Bounded in bytes: when full, the oldest window frames are dropped (the header is kept
    apart and never dropped)."""

    def __init__(self, header: bytes, max_bytes: int):
        self.header = header
        self.max_bytes = max_bytes
        self._frames: collections.deque[bytes] = collections.deque()
        self._first = 0          # absolute index of _frames[0]
        self._bytes = 0
        self.closed = False
        self._changed = asyncio.Event()

    @property
    def dropped(self) -> int:
        return self._first

    def append(self, frame: bytes) -> None:
        self._frames.append(frame)
        self._bytes += len(frame)
        while self._bytes > self.max_bytes and len(self._frames) > 1:
            self._bytes -= len(self._frames.popleft())
            self._first += 1
        self._wake()

    def close(self, end_frame: bytes) -> None:
        self._frames.append(end_frame)  # the end frame is never evicted: nothing follows it
        self._bytes += len(end_frame)
        self.closed = True
        self._wake()

    def _wake(self) -> None:
        ev, self._changed = self._changed, asyncio.Event()
        ev.set()

    async def follow(self) -> AsyncIterator[bytes]:
        """The header, then every frame from the first still held, live until the end frame."""
        yield self.header
        i = 0
        while True:
            if i < self._first:
                yield wire.pack({"type": "gap", "missed": self._first - i,
                                 "hint": "frames were dropped from the bounded stream buffer; GET trace.h5"})
                i = self._first
            while i < self._first + len(self._frames):
                yield self._frames[i - self._first]
                i += 1
            if self.closed:
                return
            changed = self._changed
            await changed.wait()


@dataclass
class Run:
    run_id: str
    plan: Plan
    options: RunOptions
    dir: Path
    frames: FrameLog
    windows_total: int
    state: RunState = RunState.RUNNING
    windows_done: int = 0
    error: str | None = None
    reason: str | None = None        # machine-readable cause of a failure ("host_busy": retry later)
    started_at: float = field(default_factory=time.time)
    ended_at: float | None = None
    recorded: bool = False
    task: asyncio.Task | None = None
    cancel_requested: bool = False   # by DELETE (else: agent shutdown)
    stop_requested: bool = False

    def status(self) -> dict:
        return {"run_id": self.run_id, "state": self.state.value, "windows_done": self.windows_done,
                "windows_total": self.windows_total, "error": self.error, "reason": self.reason,
                "started_at": self.started_at,
                "ended_at": self.ended_at, "recorded": self.recorded,
                "repetitions": self.options.repetitions, "warmup_windows": self.options.warmup_windows}


def new_run_id() -> str:
    """Sortable by start time (pruning keeps the newest by name), unique by a random suffix."""
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-" + secrets.token_hex(3)


class RunManager:
    def __init__(self, backend: Backend, catalog: Catalog, *, state_dir: Path, max_threads: int,
                 keep: int = 20, stream_buffer_bytes: int = 64 << 20):
        self.backend = backend
        self.catalog = catalog
        self.runs_dir = Path(state_dir) / "runs"
        self.max_threads = max_threads
        self.keep = keep
        self.stream_buffer_bytes = stream_buffer_bytes
        self.current: Run | None = None
        self._recent: dict[str, Run] = {}      # this process's runs, by id (bounded by `keep`)
        # Counters for /metrics.
        self.runs_by_state: collections.Counter[str] = collections.Counter()
        self.windows_executed = 0
        self.segment_errors = SegmentErrors()   # runner scheduling error, per (stressor, thread, window)
        self.latest = LatestSample()            # the newest measured window, for the host gauges
        self.runs_dir.mkdir(parents=True, exist_ok=True)
        self.prune()

    # -- starting and stopping -------------------------------------------------
    def validate(self, plan: Plan) -> Plan:
        return plan.validate(self.catalog, max_threads=self.max_threads)

    async def start(self, plan: Plan, options: RunOptions) -> Run:
        if self.current is not None and self.current.state is RunState.RUNNING:
            raise RunConflict(self.current.run_id)
        self.validate(plan)
        run_id = new_run_id()
        run_dir = self.runs_dir / run_id
        run_dir.mkdir(parents=True)
        info = self.backend.info()
        header = wire.pack({"type": "header", "metrics": [m.to_dict() for m in self.backend.metric_schema()],
                            "window_s": float(plan.window_s), "simulated": bool(info.simulated),
                            "fingerprint": info.fingerprint, "backend": info.name,
                            "run": {"run_id": run_id, "windows_total": plan.T * options.repetitions,
                                    "plan_windows": plan.T, "repetitions": options.repetitions,
                                    "warmup_windows": options.warmup_windows, "shape": [plan.M, plan.K],
                                    "catalog_hash": plan.catalog_hash}})
        run = Run(run_id, plan, options, run_dir, FrameLog(header, self.stream_buffer_bytes),
                  windows_total=plan.T * options.repetitions)
        self._write_status(run)
        self.current = run
        self._recent[run_id] = run
        run.task = asyncio.create_task(self._execute(run), name=f"run-{run_id}")
        log.info("run %s started: %d windows x %d repetitions, %d stressors x %d threads",
                 run_id, plan.T, options.repetitions, plan.M, plan.K)
        return run

    async def cancel(self, run_id: str, *, by_request: bool = True) -> RunState:
        run = self._live(run_id)
        if run is None:
            return RunState(self.status(run_id)["state"])
        if run.state is RunState.RUNNING and run.task is not None:
            run.cancel_requested = by_request
            # The flag is checked at every window: a cancellation that lands just as an inner
            # wait_for completes can be swallowed (Python < 3.12); the run then stops at its
            # next window instead of running on. (Cancelling again would interrupt cleanup.)
            run.stop_requested = True
            run.task.cancel()
            await asyncio.wait({run.task})
        return run.state

    async def close(self) -> None:
        """Cancel the current run (agent shutdown)."""
        if self.current is not None and self.current.state is RunState.RUNNING:
            await self.cancel(self.current.run_id, by_request=False)

    async def _execute(self, run: Run) -> None:
        values: list[np.ndarray] = []
        starts: list[int] = []
        # The final state is published only after the trace is on disk, so a client that
        # sees "done" can fetch trace.h5 at once.
        state, error = RunState.DONE, None
        try:
            # aclosing: the backend's generator (and the runner it owns) is closed here, at
            # once, however this loop ends, not whenever the generator is collected.
            async with contextlib.aclosing(self.backend.execute(run.plan, run.options)) as windows:
                async for w in windows:
                    if run.stop_requested:
                        raise asyncio.CancelledError
                    values.append(np.asarray(w.values, np.float32))
                    starts.append(int(w.start_ns))
                    run.windows_done += 1
                    self.windows_executed += 1
                    self.latest.update(w.values)
                    if 0 <= w.window < run.plan.T:
                        self.segment_errors.observe_window(run.plan.compositions[w.window], run.plan.window_s,
                                                           w.ran_ns)
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
            run.ended_at = time.time()
            if run.options.record and values:
                try:
                    await asyncio.to_thread(self._write_trace, run, state, values, starts)
                    run.recorded = True
                except Exception as e:
                    log.error("run %s: could not write its trace: %s", run.run_id, e)
                    error = (error + "; " if error else "") + f"trace not written: {e}"
            run.state, run.error = state, error
            end = {"type": "end", "state": state.value, "windows_done": run.windows_done}
            if error:
                end["error"] = error
            if run.reason:
                end["reason"] = run.reason
            run.frames.close(wire.pack(end))
            self.runs_by_state[state.value] += 1
            self._write_status(run)
            log.info("run %s %s after %d of %d windows%s", run.run_id, state.value, run.windows_done,
                     run.windows_total, f": {error}" if error else "")
            self.prune()

    def _write_trace(self, run: Run, state: RunState, values: list[np.ndarray], starts: list[int]) -> None:
        info = self.backend.info()
        Trace(values=np.stack(values).astype(np.float32), metrics=self.backend.metric_schema(),
              window_s=float(run.plan.window_s), window_start_ns=np.asarray(starts, np.int64),
              host_fingerprint=info.fingerprint, simulated=bool(info.simulated),
              provenance={"kind": "run", "run_id": run.run_id, "state": state.value,
                          "backend": info.name, "agent_version": __version__,
                          "plan_windows": run.plan.T, "repetitions": run.options.repetitions,
                          "warmup_windows": run.options.warmup_windows,
                          "seed": run.options.seed if run.options.seed is not None else run.plan.seed,
                          "catalog_hash": run.plan.catalog_hash, "plan_provenance": run.plan.provenance},
              ).write(run.dir / "trace.h5")

    def _write_status(self, run: Run) -> None:
        tmp = run.dir / ".run.json.tmp"
        tmp.write_text(json.dumps(run.status(), sort_keys=True))
        tmp.replace(run.dir / "run.json")

    # -- queries -----------------------------------------------------------------
    def _live(self, run_id: str) -> Run | None:
        return self._recent.get(run_id)

    def _dir(self, run_id: str) -> Path:
        if not RUN_ID_RE.match(run_id):
            raise NotFound(f"no run {run_id!r} (run ids look like 20260101T120000Z-a1b2c3)")
        return self.runs_dir / run_id

    def status(self, run_id: str) -> dict:
        run = self._live(run_id)
        if run is not None:
            return run.status()
        path = self._dir(run_id) / "run.json"
        try:
            status = json.loads(path.read_text())
        except (OSError, ValueError):
            raise NotFound(f"no run {run_id!r} on this agent (it keeps the {self.keep} most recent)") from None
        if status.get("state") == RunState.RUNNING.value:
            # Written by an agent that died mid-run: it will never finish.
            status.update(state=RunState.FAILED.value, error="the agent stopped during this run")
        return status

    def frames(self, run_id: str) -> FrameLog:
        run = self._live(run_id)
        if run is None:
            self.status(run_id)  # 404 for an unknown run
            raise NotFound(f"run {run_id} was executed by an earlier agent process; its frames are gone, "
                           f"GET /v1/runs/{run_id}/trace.h5 instead")
        return run.frames

    def trace_path(self, run_id: str) -> Path:
        status = self.status(run_id)
        if status["state"] == RunState.RUNNING.value:
            raise Conflict(f"run {run_id} is still running ({status['windows_done']} of "
                           f"{status['windows_total']} windows); its trace is written when it ends")
        path = self._dir(run_id) / "trace.h5"
        if not path.is_file():
            raise NotFound(f"run {run_id} has no recorded trace (record=false, or no window was measured)")
        return path

    def prune(self) -> None:
        """Keep the `keep` most recent run directories (never the running one)."""
        dirs = sorted((p for p in self.runs_dir.iterdir() if p.is_dir() and RUN_ID_RE.match(p.name)),
                      key=lambda p: p.name, reverse=True)
        running = self.current.run_id if self.current and self.current.state is RunState.RUNNING else None
        for p in dirs[self.keep:]:
            if p.name == running:
                continue
            shutil.rmtree(p, ignore_errors=True)
            self._recent.pop(p.name, None)
