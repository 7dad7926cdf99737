"""The run manager: one run at a time, its frames buffered for late readers, its trace on disk.

A run executes a validated plan through the Backend. Every executed window becomes one
wire frame appended to the run's FrameLog; a WebSocket that connects after the run began
still receives the header and every window from the first (the log is bounded by
`runs.stream_buffer_mib`; a reader that falls behind what the log still holds gets a
"gap" frame saying how many windows it missed and should fetch the recorded trace (GET /v1/runs/{id}/trace.msgpack) instead).

On disk, under state_dir/runs/<run_id>/: `run.json` (the run's status, rewritten when it
ends), `windows.bin` (every measured window appended as it comes: a crash keeps what was
measured) and `trace.h5` when recorded (written at the end from windows.bin, streamed through
in chunks of JOURNAL_CHUNK windows: a run may hold tens of millions, and its end must not need
them all in memory at once; including a failed or cancelled run's measured windows). An agent
that starts after a crash marks the interrupted run failed at once and writes its trace on a
thread of its own after the agent is up, saying so in run.json (`recovering` until then): a
long journal, or one planted, never holds READY back. Only the `runs.keep` most recent runs are
kept.

Ending a run is shielded: a second DELETE, or agent shutdown during a DELETE, waits for the
first one's cleanup instead of interrupting it (a run interrupted there would read
"running" forever and refuse every later POST). A finished run drops its plan; its frames
are kept only until the next run starts.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import logging
import math
import os
import re
import secrets
import shutil
import threading
import time
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import AsyncIterator

import numpy as np

from mimesys import __version__, wire
from mimesys.backend import Backend, RunOptions
from mimesys.catalog import Catalog
from mimesys.errors import Conflict, InsufficientStorage, MimesysError, NotFound, PlanError
from mimesys.fsutil import atomic_write_text
from mimesys.plan import Plan
from mimesys.trace import Trace, wall_clock_of_monotonic

from .prometheus.telemetry import LatestSample, SegmentErrors
from .trace_append import TraceAppender

log = logging.getLogger(__name__)

RUN_ID_RE = re.compile(r"^[0-9]{8}T[0-9]{6}Z-[0-9a-f]{6}$")
JOURNAL = "windows.bin"
JOURNAL_CHUNK = 1 << 15             # windows read at once when a journal becomes trace.h5
DISK_RESERVE_BYTES = 64 << 20      # left free on the state filesystem beyond what a run needs


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
                                 "hint": "frames were dropped from the bounded stream buffer; GET /v1/runs/{id}/trace.msgpack"})
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
    plan: Plan | None                # None once the run has ended (nothing needs it then)
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
    window_s: float = 1.0
    plan_windows: int = 0
    catalog_hash: str = ""
    seed: int = 0
    plan_provenance: dict = field(default_factory=dict)

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
                 keep: int = 20, stream_buffer_bytes: int = 64 << 20, max_duration_s: float = 7 * 24 * 3600.0,
                 max_window_threads: int = 2_000_000):
        self.backend = backend
        self.catalog = catalog
        self.runs_dir = Path(state_dir) / "runs"
        self.max_threads = max_threads
        self.keep = keep
        self.stream_buffer_bytes = stream_buffer_bytes
        self.max_duration_s = max_duration_s
        self.max_window_threads = max_window_threads
        self._starting = asyncio.Lock()          # one start (validating off the loop) at a time
        self.current: Run | None = None
        self._recent: dict[str, Run] = {}      # this process's runs, by id (bounded by `keep`)
        # Counters for /metrics.
        self.runs_by_state: collections.Counter[str] = collections.Counter()
        self.windows_executed = 0
        self.segment_errors = SegmentErrors()   # runner scheduling error, per (stressor, thread, window)
        self.latest = LatestSample()            # the newest measured window, for the host gauges
        self.runs_dir.mkdir(parents=True, exist_ok=True)
        interrupted = self.mark_interrupted()
        self.prune()
        # The journals of interrupted runs become trace.h5 off the start path (see the module docstring).
        self.recovered = threading.Event()
        threading.Thread(target=self.recover, args=(interrupted,), name="run-recovery", daemon=True).start()

    # -- starting and stopping -------------------------------------------------
    def validate(self, plan: Plan) -> Plan:
        plan.validate(self.catalog, max_threads=self.max_threads)
        self.backend.check_plan(plan)
        return plan

    def check_size(self, plan: Plan, options: RunOptions) -> None:
        """What a run asks of the agent, before any of it is done: its duration, and its stored
        windows x threads (plan + warm-up windows: what the compiled schedule and its compile
        time grow with; the runner repeats the plan windows itself)."""
        executed = plan.T * options.repetitions + options.warmup_windows
        duration = executed * float(plan.window_s)
        if duration > self.max_duration_s:
            raise PlanError(f"run would last {duration:.0f} s ({executed} windows of {plan.window_s} s); "
                            f"runs.max_duration_s is {self.max_duration_s:.0f}")
        stored = plan.T + options.warmup_windows
        if stored * plan.K > self.max_window_threads:
            raise PlanError(f"run has {stored} plan and warm-up windows x {plan.K} threads = {stored * plan.K}; "
                            f"runs.max_window_threads is {self.max_window_threads}")

    def _prepare(self, plan: Plan, options: RunOptions) -> None:
        """Everything proportional to the plan's size, on a worker thread: the loop only waits."""
        self.check_size(plan, options)
        plan.freeze()
        self.validate(plan)      # once: the backend and the compiler reuse the result
        self._check_disk(plan, options)

    async def start(self, plan: Plan, options: RunOptions) -> Run:
        if self.current is not None and self.current.state is RunState.RUNNING:
            raise RunConflict(self.current.run_id)
        async with self._starting:
            if self.current is not None and self.current.state is RunState.RUNNING:
                raise RunConflict(self.current.run_id)
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

    def _create_dir(self, run: Run) -> None:
        run.dir.mkdir(parents=True)
        self._write_status(run)

    def _new_run(self, plan: Plan, options: RunOptions) -> Run:
        run_id = new_run_id()
        run_dir = self.runs_dir / run_id
        info = self.backend.info()
        header = wire.pack({"type": "header", "metrics": [m.to_dict() for m in self.backend.metric_schema()],
                            "window_s": float(plan.window_s), "simulated": bool(info.simulated),
                            "fingerprint": info.fingerprint, "backend": info.name,
                            "run": {"run_id": run_id, "windows_total": plan.T * options.repetitions,
                                    "plan_windows": plan.T, "repetitions": options.repetitions,
                                    "warmup_windows": options.warmup_windows, "shape": [plan.M, plan.K],
                                    "catalog_hash": plan.catalog_hash}})
        run = Run(run_id, plan, options, run_dir, FrameLog(header, self.stream_buffer_bytes),
                  windows_total=plan.T * options.repetitions, window_s=float(plan.window_s), plan_windows=plan.T,
                  catalog_hash=plan.catalog_hash, seed=options.seed if options.seed is not None else plan.seed,
                  plan_provenance=plan.provenance)
        return run

    def _begin(self, run: Run) -> Run:
        plan, options, run_id = run.plan, run.options, run.run_id
        previous = self.current
        if previous is not None and previous.state is not RunState.RUNNING:
            previous.frames = None   # readers already following keep their reference
        self.current = run
        self._recent[run_id] = run
        run.task = asyncio.create_task(self._execute(run), name=f"run-{run_id}")
        log.info("run %s started: %d windows x %d repetitions, %d stressors x %d threads",
                 run_id, plan.T, options.repetitions, plan.M, plan.K)
        return run

    async def cancel(self, run_id: str, *, by_request: bool = True) -> RunState:
        """Idempotent: the first call cancels the run; every call (a second DELETE, shutdown)
        waits until the run's cleanup is done, and none interrupts it."""
        run = self._live(run_id)
        if run is None:
            return RunState(self.status(run_id)["state"])
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
        if self.current is not None and self.current.task is not None and not self.current.task.done():
            await self.cancel(self.current.run_id, by_request=False)

    async def _execute(self, run: Run) -> None:
        state, error = RunState.DONE, None
        n_metrics = len(self.backend.metric_schema())
        journal = None
        try:
            if run.options.record:
                # An append log, not an atomic file; O_NOFOLLOW: never through a link in the run dir.
                journal = os.fdopen(os.open(run.dir / JOURNAL, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW
                                            | os.O_CLOEXEC, 0o644), "ab", buffering=0)
            # aclosing: the backend's generator (and the runner it owns) is closed here, at
            # once, however this loop ends, not whenever the generator is collected.
            async with contextlib.aclosing(self.backend.execute(run.plan, run.options)) as windows:
                async for w in windows:
                    if run.stop_requested:
                        raise asyncio.CancelledError
                    values = np.asarray(w.values, np.float32)
                    if journal is not None:
                        # One small append per window: what was measured survives a crash.
                        journal.write(_journal_record(int(w.start_ns), values, n_metrics))
                    run.windows_done += 1
                    self.windows_executed += 1
                    self.latest.update(w.values)
                    if 0 <= w.window < run.plan.T:
                        self.segment_errors.observe_window(run.plan.compositions[w.window], run.plan.window_s,
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
        finish = asyncio.ensure_future(self._finish(run, state, error, n_metrics))
        while not finish.done():
            try:
                await asyncio.shield(finish)
            except asyncio.CancelledError:
                continue

    async def _finish(self, run: Run, state: RunState, error: str | None, n_metrics: int) -> None:
        try:
            run.ended_at = time.time()
            if run.options.record and run.windows_done:
                try:
                    await asyncio.to_thread(self._write_trace, run, state, n_metrics)
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
            self.runs_by_state[state.value] += 1
            log.info("run %s %s after %d of %d windows%s", run.run_id, state.value, run.windows_done,
                     run.windows_total, f": {error}" if error else "")
            # Off the loop: run.json's two fsyncs and removing old runs' directories. An fsync on
            # a busy disk waits for what the whole filesystem has to write; on the loop it once
            # held every request for 31 s (the soak of 2026-11-26).
            await asyncio.to_thread(self._write_status_and_prune, run)

    def _write_status_and_prune(self, run: Run) -> None:
        with contextlib.suppress(OSError):
            self._write_status(run)
        self.prune()

    def _write_trace(self, run: Run, state: RunState, n_metrics: int, *, extra: dict | None = None,
                     limit: int | None = None) -> None:
        journal = run.dir / JOURNAL
        info = self.backend.info()
        first = next(iter_journal(journal, n_metrics, chunk=1), (np.zeros(0, np.int64), None))[0]
        writer = TraceAppender(run.dir / "trace.h5", self.backend.metric_schema(), window_s=run.window_s,
                               host_fingerprint=info.fingerprint, simulated=bool(info.simulated), flush_s=math.inf,
                               provenance={"kind": "run", "run_id": run.run_id, "state": state.value,
                                           "backend": info.name, "agent_version": __version__,
                                           "plan_windows": run.plan_windows, "repetitions": run.options.repetitions,
                                           "warmup_windows": run.options.warmup_windows, "seed": run.seed,
                                           "catalog_hash": run.catalog_hash, "plan_provenance": run.plan_provenance,
                                           **({"window_start_clock": "CLOCK_MONOTONIC",
                                               "started_unix_s": wall_clock_of_monotonic(first[0])} if len(first) else {}),
                                           **(extra or {})})
        try:
            for starts, values in iter_journal(journal, n_metrics, limit=limit):
                writer.append_many(starts, values)
            writer.finish()
        except BaseException:
            writer.abandon()
            raise
        journal.unlink(missing_ok=True)

    def _check_disk(self, plan: Plan, options: RunOptions) -> None:
        """Refuse a run whose trace would not fit (before a window is run, not after)."""
        if not options.record:
            return
        n = len(self.backend.metric_schema())
        need = plan.T * options.repetitions * (8 + 4 * n) * 2 + DISK_RESERVE_BYTES  # journal + trace.h5
        st = os.statvfs(self.runs_dir)
        free = st.f_bavail * st.f_frsize
        if free < need:
            raise InsufficientStorage(f"{self.runs_dir}: {free >> 20} MiB free, this run's trace needs about "
                                      f"{need >> 20} MiB; free space or record=false")

    def mark_interrupted(self) -> list[Path]:
        """Runs a crashed agent left "running": marked failed now (no later POST waits on them),
        `recovering` until `recover` has written their traces. -> their directories."""
        out = []
        for d in self.runs_dir.iterdir():
            status_path = d / "run.json"
            if not (d.is_dir() and RUN_ID_RE.match(d.name) and status_path.is_file()):
                continue
            try:
                status = json.loads(status_path.read_text())
            except (OSError, ValueError):
                continue
            if status.get("state") != RunState.RUNNING.value and not status.get("recovering"):
                continue    # (recovering: an agent stopped again before it had written the trace)
            status.update(state=RunState.FAILED.value, recovering=True,
                          error="the agent stopped during this run; its measured windows are being recovered")
            atomic_write_text(status_path, json.dumps(status, sort_keys=True))
            out.append(d)
        return out

    def recover(self, dirs: list[Path]) -> None:
        """Write what each interrupted run's journal kept as trace.h5, saying how many windows
        were measured (on its own thread; `recovered` is set when done)."""
        try:
            n = len(self.backend.metric_schema())
            for d in dirs:
                status_path = d / "run.json"
                try:
                    status = json.loads(status_path.read_text())
                except (OSError, ValueError):
                    continue
                kept = 0
                journal = d / JOURNAL
                if journal.is_file():
                    try:
                        opts = RunOptions(repetitions=int(status.get("repetitions", 1)),
                                          warmup_windows=int(status.get("warmup_windows", 0)))
                        run = Run(d.name, None, opts, d, None, int(status.get("windows_total", 0)),
                                  window_s=float(status.get("window_s", 1.0)))
                        # No more than the run could have measured: the journal lies in a
                        # directory of the agent's user, and what it says is only a file.
                        found = journal_windows(journal, n)
                        kept = min(found, max(0, run.windows_total))
                        if found > kept:
                            log.warning("run %s: its journal holds %d windows, more than the run's %d; "
                                        "only the first %d are kept", d.name, found, run.windows_total, kept)
                        if kept:
                            self._write_trace(run, RunState.FAILED, n, extra={"interrupted": True}, limit=kept)
                    except Exception as e:
                        log.error("run %s: could not recover its measured windows: %s", d.name, e)
                status.pop("recovering", None)
                status.update(state=RunState.FAILED.value, windows_done=kept, recorded=(d / "trace.h5").is_file(),
                              error=f"the agent stopped during this run; {kept} measured windows kept in trace.h5"
                              if kept else "the agent stopped during this run")
                with contextlib.suppress(OSError):
                    atomic_write_text(status_path, json.dumps(status, sort_keys=True))
                log.warning("run %s was interrupted by an agent stop; %d windows recovered", d.name, kept)
        finally:
            self.recovered.set()

    def _write_status(self, run: Run) -> None:
        atomic_write_text(run.dir / "run.json", json.dumps({**run.status(), "window_s": run.window_s},
                                                            sort_keys=True))

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
                           f"GET /v1/runs/{run_id}/trace.msgpack instead")
        if run.frames is None:
            raise NotFound(f"run {run_id} has ended and a later run started; its frames are gone, "
                           f"GET /v1/runs/{run_id}/trace.msgpack instead")
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
        def age(p: Path):
            # Ids sort by start second; within one second the random suffix says nothing, so the
            # start time this process recorded (else the directory's) orders them: the run that
            # just ended is never the one pruned.
            run = self._recent.get(p.name)
            try:
                return (p.name[:16], run.started_at if run is not None else p.stat().st_mtime)
            except OSError:
                return (p.name[:16], 0.0)
        dirs = sorted((p for p in self.runs_dir.iterdir() if p.is_dir() and RUN_ID_RE.match(p.name)),
                      key=age, reverse=True)
        current = self.current.run_id if self.current is not None else None
        for p in dirs[self.keep:]:
            if p.name == current:
                continue
            shutil.rmtree(p, ignore_errors=True)
            self._recent.pop(p.name, None)


def _journal_record(start_ns: int, values: np.ndarray, n: int) -> bytes:
    v = np.full(n, np.nan, "<f4")
    v[:min(n, values.shape[0])] = values[:n]
    return np.int64(start_ns).astype("<i8").tobytes() + v.tobytes()


def _record(n: int) -> np.dtype:
    return np.dtype([("start", "<i8"), ("values", "<f4", (n,))])


def journal_windows(path: Path, n: int) -> int:
    """Whole records in a journal (a torn last record, a crash mid-write, is not one)."""
    return path.stat().st_size // _record(n).itemsize if path.is_file() else 0


def iter_journal(path: Path, n: int, *, chunk: int = JOURNAL_CHUNK, limit: int | None = None):
    """(start_ns int64 [B], values float32 [B, n]) of at most `chunk` whole records at a time,
    the first `limit` at most; a torn last record is ignored. Memory: one chunk."""
    if not path.is_file():
        return
    rec = _record(n)
    whole = journal_windows(path, n)
    if limit is not None:
        whole = min(whole, limit)
    with open(path, "rb") as f:
        done = 0
        while done < whole:
            b = min(chunk, whole - done)
            arr = np.frombuffer(f.read(b * rec.itemsize), dtype=rec)
            if len(arr) < b:
                return     # the file shrank under us
            done += b
            yield arr["start"].astype(np.int64), arr["values"].astype(np.float32).reshape(b, n)


def read_journal(path: Path, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(start_ns int64 [T], values float32 [T, n]) of every whole record, all at once (tests and
    short journals; a run's end streams it with iter_journal)."""
    parts = list(iter_journal(path, n))
    if not parts:
        return np.zeros(0, np.int64), np.zeros((0, n), np.float32)
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])
