"""What the agent keeps of its runs: each run's record in memory (Run) and its directory under
state_dir/runs/<run_id>/: `run.json` (the run's status, rewritten when it ends), the journal
`windows.bin` (journal.py) and `trace.h5` when recorded. Only the `runs.keep` most recent
directories are kept.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import secrets
import shutil
import time
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from mimesys.backend import Backend, RunOptions
from mimesys.errors import Conflict, InsufficientStorage, NotFound
from mimesys.fsutil import atomic_write_text
from mimesys.plan import Plan

from .framelog import FrameLog

RUN_ID_RE = re.compile(r"^[0-9]{8}T[0-9]{6}Z-[0-9a-f]{6}$")
DISK_RESERVE_BYTES = 64 << 20      # left free on the state filesystem beyond what a run needs


class RunState(str, Enum):
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"


@dataclass
class Run:
    run_id: str
    plan: Plan | None                # None once the run has ended (nothing needs it then)
    options: RunOptions
    dir: Path
    frames: FrameLog | None          # None once a later run started (its readers keep theirs)
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


class RunStore:
    """The runs' directories: where each lives, its run.json, the disk a run needs, pruning."""

    def __init__(self, runs_dir: Path, keep: int):
        self.runs_dir = runs_dir
        self.keep = keep
        self.runs_dir.mkdir(parents=True, exist_ok=True)

    def dir(self, run_id: str) -> Path:
        if not RUN_ID_RE.match(run_id):
            raise NotFound(f"no run {run_id!r} (run ids look like 20260101T120000Z-a1b2c3)")
        return self.runs_dir / run_id

    def write_status(self, run: Run) -> None:
        atomic_write_text(run.dir / "run.json", json.dumps({**run.status(), "window_s": run.window_s},
                                                            sort_keys=True))

    def read_status(self, run_id: str) -> dict:
        """The status run.json holds (a run of an earlier agent process)."""
        path = self.dir(run_id) / "run.json"
        try:
            status = json.loads(path.read_text())
        except (OSError, ValueError):
            raise NotFound(f"no run {run_id!r} on this agent (it keeps the {self.keep} most recent)") from None
        if status.get("state") == RunState.RUNNING.value:
            # Written by an agent that died mid-run: it will never finish.
            status.update(state=RunState.FAILED.value, error="the agent stopped during this run")
        return status

    def trace_path(self, run_id: str, status: dict) -> Path:
        """The trace.h5 of a run whose status is `status`."""
        if status["state"] == RunState.RUNNING.value:
            raise Conflict(f"run {run_id} is still running ({status['windows_done']} of "
                           f"{status['windows_total']} windows); its trace is written when it ends")
        path = self.dir(run_id) / "trace.h5"
        if not path.is_file():
            raise NotFound(f"run {run_id} has no recorded trace (record=false, or no window was measured)")
        return path

    def check_disk(self, plan: Plan, options: RunOptions, backend: Backend) -> None:
        """Refuse a run whose trace would not fit (before a window is run, not after)."""
        if not options.record:
            return
        n = len(backend.metric_schema())
        need = plan.T * options.repetitions * (8 + 4 * n) * 2 + DISK_RESERVE_BYTES  # journal + trace.h5
        st = os.statvfs(self.runs_dir)
        free = st.f_bavail * st.f_frsize
        if free < need:
            raise InsufficientStorage(f"{self.runs_dir}: {free >> 20} MiB free, this run's trace needs about "
                                      f"{need >> 20} MiB; free space or record=false")

    def prune(self, recent: dict[str, Run], current: str | None) -> list[str]:
        """Keep the `keep` most recent run directories (never `current`); -> the ids removed.
        `recent`: this process's runs, whose recorded start times order runs of one second."""
        def age(p: Path):
            # Ids sort by start second; within one second the random suffix says nothing, so the
            # start time this process recorded (else the directory's) orders them: the run that
            # just ended is never the one pruned.
            run = recent.get(p.name)
            try:
                return (p.name[:16], run.started_at if run is not None else p.stat().st_mtime)
            except OSError:
                return (p.name[:16], 0.0)
        dirs = sorted((p for p in self.runs_dir.iterdir() if p.is_dir() and RUN_ID_RE.match(p.name)),
                      key=age, reverse=True)
        removed = []
        for p in dirs[self.keep:]:
            if p.name == current:
                continue
            shutil.rmtree(p, ignore_errors=True)
            removed.append(p.name)
        return removed
