"""The runs this agent process knows: the current one and the recent ones by id, live, and the
earlier ones through their directories (runstore.py). Runs an earlier process left "running"
are marked failed at once and their journals recovered on a thread of their own
(run_recovery.py): `recovered` is set when that is done.
"""

from __future__ import annotations

import contextlib
import threading
from pathlib import Path

from mimesys.backend import Backend
from mimesys.errors import NotFound

from . import run_recovery
from .framelog import FrameLog
from .runstore import Run, RunState, RunStore


class RunBook:
    def __init__(self, store: RunStore, backend: Backend):
        self.store = store
        self.current: Run | None = None
        self._recent: dict[str, Run] = {}      # this process's runs, by id (bounded by `keep`)
        interrupted = run_recovery.mark_interrupted(store.runs_dir)
        self.prune()
        self.recovered = threading.Event()
        threading.Thread(target=self._recover, args=(interrupted, backend), name="run-recovery",
                         daemon=True).start()

    def _recover(self, dirs: list[Path], backend: Backend) -> None:
        try:
            run_recovery.recover(dirs, backend)
        finally:
            self.recovered.set()

    def running(self) -> Run | None:
        """The run executing now, if any."""
        return self.current if self.current is not None and self.current.state is RunState.RUNNING else None

    def add(self, run: Run) -> None:
        """`run` becomes the current run; the one before drops its frames."""
        previous = self.current
        if previous is not None and previous.state is not RunState.RUNNING:
            previous.frames = None   # readers already following keep their reference
        self.current = run
        self._recent[run.run_id] = run

    def get(self, run_id: str) -> Run | None:
        """The run of this process with that id, if it still keeps it."""
        return self._recent.get(run_id)

    def ended(self, run: Run) -> None:
        """A run's end, on a worker thread: its final run.json, then old runs pruned."""
        with contextlib.suppress(OSError):
            self.store.write_status(run)
        self.prune()

    def prune(self) -> None:
        """Keep the `keep` most recent run directories (never the current one)."""
        for run_id in self.store.prune(self._recent, self.current.run_id if self.current is not None else None):
            self._recent.pop(run_id, None)

    def status(self, run_id: str) -> dict:
        run = self._recent.get(run_id)
        return run.status() if run is not None else self.store.read_status(run_id)

    def frames(self, run_id: str) -> FrameLog:
        run = self._recent.get(run_id)
        if run is None:
            self.status(run_id)  # 404 for an unknown run
            raise NotFound(f"run {run_id} was executed by an earlier agent process; its frames are gone, "
                           f"GET /v1/runs/{run_id}/trace.msgpack instead")
        if run.frames is None:
            raise NotFound(f"run {run_id} has ended and a later run started; its frames are gone, "
                           f"GET /v1/runs/{run_id}/trace.msgpack instead")
        return run.frames

    def trace_path(self, run_id: str) -> Path:
        return self.store.trace_path(run_id, self.status(run_id))
