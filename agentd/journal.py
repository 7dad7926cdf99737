"""A run's journal, windows.bin: every measured window appended as it comes, so a crash keeps
what was measured; at the run's end (or on recovery after a crash) it becomes trace.h5.

One record per window: start_ns <i8, then the n metric values <f4 (NaN where a window has
fewer). A torn last record (a crash mid-write) is not a record. The trace is written streaming
JOURNAL_CHUNK windows at a time: a run may hold tens of millions of windows.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np

from mimesys import __version__
from mimesys.backend import Backend
from mimesys.trace import wall_clock_of_monotonic

from .trace_append import TraceAppender

JOURNAL = "windows.bin"
JOURNAL_CHUNK = 1 << 15             # windows read at once when a journal becomes trace.h5


def open_journal(path: Path):
    """The journal opened for appending: an append log, not an atomic file; O_NOFOLLOW: never
    through a link in the run dir."""
    return os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644),
                     "ab", buffering=0)


def write_trace(run, backend: Backend, state: str, n_metrics: int, *, extra: dict | None = None,
                limit: int | None = None) -> None:
    """`run`'s journal as its trace.h5 (the first `limit` windows at most); the journal is
    removed once the trace is complete. `run` is an agentd.runstore.Run."""
    journal = run.dir / JOURNAL
    info = backend.info()
    first = next(iter_journal(journal, n_metrics, chunk=1), (np.zeros(0, np.int64), None))[0]
    writer = TraceAppender(run.dir / "trace.h5", backend.metric_schema(), window_s=run.window_s,
                           host_fingerprint=info.fingerprint, simulated=bool(info.simulated), flush_s=math.inf,
                           provenance={"kind": "run", "run_id": run.run_id, "state": state,
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


def journal_record(start_ns: int, values: np.ndarray, n: int) -> bytes:
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
