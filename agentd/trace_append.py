"""A trace written as it is recorded: `mimesys-agent record` for days must not hold every
window in memory, and a SIGKILL on day 6 must not lose six days. The file has the layout of
agentd/trace.py (so Trace.read and every tool read it), with /values and /window_start_ns as
chunked, growable datasets; it is flushed every `flush_s` seconds and at the end, so a crash
loses at most that much. Metadata is written when the file is created; finish() updates the
provenance with what was actually recorded."""

from __future__ import annotations

import time
from pathlib import Path

import h5py
import numpy as np

from .h5io import get_json, set_json
from .metrics import MetricSpec
from .trace import FORMAT, SCHEMA_VERSION, write_schema_datasets

CHUNK_ROWS = 256


class TraceAppender:
    def __init__(self, path: Path, metrics: list[MetricSpec], *, window_s: float, host_fingerprint: dict,
                 provenance: dict, simulated: bool, flush_s: float = 60.0):
        self.path = Path(path)
        self.n = len(metrics)
        self.flush_s = float(flush_s)
        self.rows = 0
        tmp = self.path.with_name(f".{self.path.name}.new")
        f = h5py.File(tmp, "w")
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
        except BaseException:
            f.close()
            tmp.unlink(missing_ok=True)
            raise
        # Under its real name from the first flush on: the point is that it survives us.
        tmp.replace(self.path)
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

    def flush(self) -> None:
        self.f.flush()
        self._last_flush = time.monotonic()

    def finish(self, **provenance) -> None:
        prov = get_json(self.f.attrs, "provenance", {}) or {}
        prov.update(provenance, complete=True, windows=self.rows)
        set_json(self.f.attrs, "provenance", prov)
        self.f.flush()
        self.f.close()

    def abandon(self) -> None:
        """Close without marking complete (what was flushed stays readable)."""
        try:
            self.f.close()
        except Exception:
            pass
