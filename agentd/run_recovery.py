"""After a crash: runs an earlier agent process left "running". They are marked failed at once
(no later POST waits on them), then, on a thread of its own after the agent is up, each one's
journal is written as trace.h5, saying so in run.json (`recovering` until then): a long journal,
or one planted, never holds READY back.
"""

from __future__ import annotations

import contextlib
import json
import logging
from pathlib import Path

from mimesys.backend import Backend, RunOptions
from mimesys.fsutil import atomic_write_text

from .journal import JOURNAL, journal_windows, write_trace
from .runstore import RUN_ID_RE, Run, RunState

log = logging.getLogger("agentd.runs")


def mark_interrupted(runs_dir: Path) -> list[Path]:
    """Runs a crashed agent left "running": marked failed now, `recovering` until `recover` has
    written their traces. -> their directories."""
    out = []
    for d in runs_dir.iterdir():
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


def recover(dirs: list[Path], backend: Backend) -> None:
    """Write what each interrupted run's journal kept as trace.h5, saying how many windows
    were measured."""
    n = len(backend.metric_schema())
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
                    write_trace(run, backend, RunState.FAILED.value, n, extra={"interrupted": True}, limit=kept)
            except Exception as e:
                log.error("run %s: could not recover its measured windows: %s", d.name, e)
        status.pop("recovering", None)
        status.update(state=RunState.FAILED.value, windows_done=kept, recorded=(d / "trace.h5").is_file(),
                      error=f"the agent stopped during this run; {kept} measured windows kept in trace.h5"
                      if kept else "the agent stopped during this run")
        with contextlib.suppress(OSError):
            atomic_write_text(status_path, json.dumps(status, sort_keys=True))
        log.warning("run %s was interrupted by an agent stop; %d windows recovered", d.name, kept)
