"""Trace: metric vectors per window, float32 [T, N] + metric schema. NaN = not measured.

On disk (HDF5):

    /values           float32 [T, N]
    /window_start_ns  int64 [T]       optional: CLOCK_MONOTONIC start of each window
    attrs: format="mimesys.trace", schema_version, window_s, metrics (JSON list of
           MetricSpec dicts), host_fingerprint (JSON), provenance (JSON), simulated (bool)

`simulated` is True for traces produced by the simulated host backend; nothing that
reads such a trace may present its numbers as measured.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path

import h5py
import numpy as np

from .errors import TraceError
from .h5io import atomic_h5, get_json, get_str, set_json
from .metrics import MetricSpec

FORMAT = "mimesys.trace"
SCHEMA_VERSION = 1


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
        if self.window_start_ns is not None and len(self.window_start_ns) != v.shape[0]:
            raise TraceError(f"window_start_ns has {len(self.window_start_ns)} entries for {v.shape[0]} windows")
        return self

    # -- HDF5 -----------------------------------------------------------------
    def write(self, path: Path | str) -> None:
        self.validate()
        with atomic_h5(path) as f:
            f.create_dataset("values", data=np.asarray(self.values, np.float32))
            if self.window_start_ns is not None:
                f.create_dataset("window_start_ns", data=np.asarray(self.window_start_ns, np.int64))
            f.attrs["format"] = FORMAT
            f.attrs["schema_version"] = SCHEMA_VERSION
            f.attrs["window_s"] = float(self.window_s)
            f.attrs["simulated"] = bool(self.simulated)
            set_json(f.attrs, "metrics", [m.to_dict() for m in self.metrics])
            set_json(f.attrs, "host_fingerprint", self.host_fingerprint)
            set_json(f.attrs, "provenance", self.provenance)

    @classmethod
    def read(cls, path: Path | str) -> "Trace":
        try:
            with h5py.File(path, "r") as f:
                if get_str(f.attrs, "format") != FORMAT:
                    raise TraceError(f"{path}: attribute format={get_str(f.attrs, 'format')!r}, expected {FORMAT!r}")
                version = int(f.attrs.get("schema_version", 0))
                if not 1 <= version <= SCHEMA_VERSION:
                    raise TraceError(f"{path}: trace schema_version {version} not supported")
                if "values" not in f:
                    raise TraceError(f"{path}: no /values dataset")
                metrics = [MetricSpec.from_dict(d) for d in get_json(f.attrs, "metrics", [])]
                tr = cls(
                    values=np.asarray(f["values"][()], dtype=np.float32),
                    metrics=metrics,
                    window_s=float(f.attrs.get("window_s", 1.0)),
                    window_start_ns=f["window_start_ns"][()] if "window_start_ns" in f else None,
                    host_fingerprint=get_json(f.attrs, "host_fingerprint", {}) or {},
                    provenance=get_json(f.attrs, "provenance", {}) or {},
                    simulated=bool(f.attrs.get("simulated", False)),
                )
        except (OSError, KeyError, ValueError) as e:
            raise TraceError(f"{path}: not a readable mimesys trace: {e}") from e
        return tr.validate()

    def write_csv(self, path: Path | str) -> None:
        """One row per window: window index, start time if known, then every metric (empty = NaN)."""
        path = Path(path)
        tmp = path.with_name(f".{path.name}.tmp")
        with tmp.open("w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["window", "start_s"] + self.names)
            for t in range(self.T):
                start = "" if self.window_start_ns is None else f"{self.window_start_ns[t] / 1e9:.6f}"
                w.writerow([t, start] + ["" if np.isnan(x) else f"{x:.6g}" for x in self.values[t]])
        tmp.replace(path)
