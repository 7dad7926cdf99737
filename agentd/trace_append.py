"""A trace written as it is recorded: `mimesys-agent record` for days must not hold every
window in memory, and a SIGKILL on day 6 must not lose six days. The file has the layout of
mimesys/tracefile.py (so Trace.read and every tool read it), with /values and /window_start_ns as
chunked, growable datasets; it is flushed every `flush_s` seconds and at the end, so a crash
loses at most that much. Metadata is written when the file is created; finish() updates the
provenance with what was actually recorded."""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

import h5py
import numpy as np

from mimesys.fsutil import create_temp_beside, fd_path, replace_checked
from mimesys.h5io import get_json, set_json
from mimesys.metrics import MetricSpec
from mimesys.tracefile import FORMAT, SCHEMA_VERSION, write_schema_datasets

CHUNK_ROWS = 256


class TraceAppender:
    def __init__(self, path: Path, metrics: list[MetricSpec], *, window_s: float, host_fingerprint: dict,
                 provenance: dict, simulated: bool, flush_s: float = 60.0):
        self.path = Path(path)
        self.n = len(metrics)
        self.flush_s = float(flush_s)
        self.rows = 0
        # A unique temp opened through its descriptor (mimesys.fsutil): `record` may run as root
        # into a directory others can write; a fixed `.new` name there could be a planted link.
        self._fd, tmp = create_temp_beside(self.path)
        try:
            f = h5py.File(fd_path(self._fd, tmp), "w")
        except BaseException:
            os.close(self._fd)
            tmp.unlink(missing_ok=True)
            raise
        try:
            f.create_dataset("values", shape=(0, self.n), maxshape=(None, self.n), dtype=np.float32,
                             chunks=(CHUNK_ROWS, max(self.n, 1)))
            f.create_dataset("window_start_ns", shape=(0,), maxshape=(None,), dtype=np.int64, chunks=(CHUNK_ROWS,))
            write_schema_datasets(f, metrics)
            f.attrs["format"] = FORMAT
            f.attrs["schema_version"] = SCHEMA_VERSION
            f.attrs["window_s"] = float(window_s)
            f.attrs["simulated"] = bool(simulated)
            set_json(f.attrs, "metrics", [m.to_dict() for m in metrics])
            set_json(f.attrs, "host_fingerprint", host_fingerprint)
            set_json(f.attrs, "provenance", {**provenance, "complete": False})
            f.flush()
            os.fsync(self._fd)
            # Under its real name from the first flush on: the point is that it survives us.
            replace_checked(self._fd, tmp, self.path)
        except BaseException:
            f.close()
            os.close(self._fd)
            tmp.unlink(missing_ok=True)
            raise
        self.f = f
        self._last_flush = time.monotonic()

    def append(self, start_ns: int, values) -> None:
        v = np.asarray(values, np.float32).reshape(1, self.n)
        self.f["values"].resize(self.rows + 1, axis=0)
        self.f["window_start_ns"].resize(self.rows + 1, axis=0)
        self.f["values"][self.rows] = v[0]
        self.f["window_start_ns"][self.rows] = int(start_ns)
        self.rows += 1
        if time.monotonic() - self._last_flush >= self.flush_s:
            self.flush()

    def append_many(self, starts_ns, values) -> None:
        """Rows [B] and [B, N] at once (one resize per call, not per row)."""
        v = np.asarray(values, np.float32).reshape(-1, self.n)
        B = v.shape[0]
        if B == 0:
            return
        self.f["values"].resize(self.rows + B, axis=0)
        self.f["window_start_ns"].resize(self.rows + B, axis=0)
        self.f["values"][self.rows:self.rows + B] = v
        self.f["window_start_ns"][self.rows:self.rows + B] = np.asarray(starts_ns, np.int64)
        self.rows += B
        if time.monotonic() - self._last_flush >= self.flush_s:
            self.flush()

    def flush(self) -> None:
        self.f.flush()
        os.fsync(self._fd)          # on disk, not only in the page cache: survives power loss too
        self._last_flush = time.monotonic()

    def finish(self, **provenance) -> None:
        prov = get_json(self.f.attrs, "provenance", {}) or {}
        prov.update(provenance, complete=True, windows=self.rows)
        set_json(self.f.attrs, "provenance", prov)
        self.f.flush()
        self.f.close()
        os.fsync(self._fd)
        os.close(self._fd)

    def abandon(self) -> None:
        """Close without marking complete (what was flushed stays readable)."""
        try:
            self.f.close()
        except Exception:
            pass
        with contextlib.suppress(OSError):
            os.close(self._fd)
