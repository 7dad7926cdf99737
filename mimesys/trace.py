"""Trace: metric vectors per window, float32 [T, N] + metric schema. NaN = not measured.

Its file form (HDF5) is tracefile.py's, its wire form tracewire.py's.

`simulated` is True for traces produced by the simulated host backend; nothing that
reads such a trace may present its numbers as measured.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .errors import TraceError
from .fsutil import atomic_path
from .metrics import MetricSpec
from .tracefile import TRACE_LIMITS, read_trace_fields, write_trace
from .tracewire import trace_fields_from_wire, trace_to_wire
from .untrusted import H5Limits


@dataclass
class Trace:
    values: np.ndarray  # float32 [T, N]
    metrics: list[MetricSpec]
    window_s: float = 1.0
    window_start_ns: np.ndarray | None = None  # int64 [T]
    host_fingerprint: dict = field(default_factory=dict)
    provenance: dict = field(default_factory=dict)
    simulated: bool = False

    @property
    def names(self) -> list[str]:
        return [m.name for m in self.metrics]

    @property
    def T(self) -> int:
        return int(self.values.shape[0])

    def column(self, name: str) -> np.ndarray:
        try:
            return self.values[:, self.names.index(name)]
        except ValueError:
            raise TraceError(f"trace has no metric {name!r}") from None

    def select(self, names: list[str]) -> np.ndarray:
        """[T, len(names)]; a metric this trace lacks is a NaN column."""
        idx = {n: i for i, n in enumerate(self.names)}
        out = np.full((self.T, len(names)), np.nan, dtype=np.float32)
        for j, n in enumerate(names):
            if n in idx:
                out[:, j] = self.values[:, idx[n]]
        return out

    def validate(self) -> "Trace":
        v = self.values
        if not isinstance(v, np.ndarray) or v.ndim != 2:
            raise TraceError(f"values must be [T, N], got shape {getattr(v, 'shape', None)}")
        if v.shape[1] != len(self.metrics):
            raise TraceError(f"values have {v.shape[1]} columns but the schema lists {len(self.metrics)} metrics")
        names = self.names
        if len(set(names)) != len(names):
            dup = sorted({n for n in names if names.count(n) > 1})
            raise TraceError(f"duplicate metric names in schema: {dup}")
        if np.isinf(v).any():
            t, n = map(int, np.argwhere(np.isinf(v))[0])
            raise TraceError(f"infinite value in window {t}, metric {names[n]!r}")
        if self.window_start_ns is not None:
            ws = self.window_start_ns
            if not isinstance(ws, np.ndarray) or ws.ndim != 1 or ws.dtype.kind not in "iu":
                raise TraceError("window_start_ns must be a 1-D integer array")
            if len(ws) != v.shape[0]:
                raise TraceError(f"window_start_ns has {len(ws)} entries for {v.shape[0]} windows")
        return self

    def to_wire(self) -> dict:
        return trace_to_wire(self)

    @classmethod
    def from_wire(cls, obj, where: str = "trace", *, max_elements: int = 1 << 26) -> Trace:
        return cls(**trace_fields_from_wire(obj, where, max_elements)).validate()

    def write(self, path: Path | str) -> None:
        self.validate()
        write_trace(self, path)

    @classmethod
    def read(cls, path, *, where: str | None = None, limits: H5Limits = TRACE_LIMITS) -> Trace:
        """Read a trace file (a path, bytes or a binary file object). Every trace may come from
        outside, so the file is checked (mimesys.untrusted) before a byte of data is read."""
        return cls(**read_trace_fields(path, where, limits)).validate()

    @property
    def started_unix_s(self) -> float | None:
        """Wall-clock time of window 0's start, when the writer recorded it."""
        v = self.provenance.get("started_unix_s")
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None

    def write_csv(self, path: Path | str) -> None:
        """One row per window: window index, start time if known, then every metric (empty = NaN)."""
        with atomic_path(path) as tmp, tmp.open("w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["window", "start_s"] + self.names)
            for t in range(self.T):
                start = "" if self.window_start_ns is None else f"{self.window_start_ns[t] / 1e9:.6f}"
                w.writerow([t, start] + ["" if np.isnan(x) else f"{x:.6g}" for x in self.values[t]])


def wall_clock_of_monotonic(start_ns: int) -> float:
    """Unix time of a CLOCK_MONOTONIC instant (to within the few microseconds between the two reads)."""
    import time
    return time.time() - (time.monotonic_ns() - int(start_ns)) / 1e9

