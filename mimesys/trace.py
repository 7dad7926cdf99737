"""Trace: metric vectors per window, float32 [T, N] + metric schema. NaN = not measured.

On disk (HDF5):

    /values           float32 [T, N]
    /window_start_ns  int64 [T]       optional: start of each window (provenance.window_start_clock
                                      names the clock; provenance.started_unix_s is window 0's
                                      wall-clock time)
    /metric_names, /metric_units  strings [N]  the schema's names and units again, for tools that
                                      show datasets but not JSON attributes (h5dump, HDFView, xarray);
                                      written, never read: the `metrics` attribute is the source
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

from .errors import TraceError, ValidationError
from .h5io import atomic_h5, get_json, get_str, set_json
from .untrusted import MAX_DEPTH_METADATA, H5Limits, array_from_wire, array_to_wire, check_depth, open_h5, read_array
from .metrics import MetricSpec
from .fsutil import atomic_path

FORMAT = "mimesys.trace"
SCHEMA_VERSION = 1
# What a trace file from outside may declare (an agent's, an import's, a request's).
STRING_DATASETS = ("metric_names", "metric_units")   # written for people; the reader ignores them
TRACE_LIMITS = H5Limits(max_dataset_bytes=1 << 30, max_total_bytes=2 << 30, string_datasets=STRING_DATASETS)


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

    # -- the wire: raw arrays, nothing to interpret ----------------------------
    WIRE_FIELDS = ("values", "metrics", "window_s", "window_start_ns", "host_fingerprint", "provenance", "simulated")

    def to_wire(self) -> dict:
        out = {"values": array_to_wire(self.values, "<f4"), "metrics": [m.to_dict() for m in self.metrics],
               "window_s": float(self.window_s), "host_fingerprint": self.host_fingerprint,
               "provenance": self.provenance, "simulated": bool(self.simulated)}
        if self.window_start_ns is not None:
            out["window_start_ns"] = array_to_wire(self.window_start_ns, "<i8")
        return out

    @classmethod
    def from_wire(cls, obj, where: str = "trace", *, max_elements: int = 1 << 26) -> "Trace":
        if not isinstance(obj, dict):
            raise TraceError(f"{where}: expected a map, got {type(obj).__name__}")
        unknown = sorted(str(k) for k in obj if k not in cls.WIRE_FIELDS)
        if unknown:
            raise TraceError(f"{where}: unknown field(s) {unknown}; valid: {', '.join(cls.WIRE_FIELDS)}")
        for name in ("values", "metrics"):
            if name not in obj:
                raise TraceError(f"{where}: missing field {name!r}")
        try:
            values = array_from_wire(obj["values"], f"{where}.values", ndim=2, dtype="<f4", max_elements=max_elements)
            starts = None
            if obj.get("window_start_ns") is not None:
                starts = array_from_wire(obj["window_start_ns"], f"{where}.window_start_ns", ndim=1, dtype="<i8",
                                         max_elements=max(1, values.shape[0]),
                                         axis_limits={0: values.shape[0]})
        except TraceError:
            raise
        except ValidationError as e:
            raise TraceError(str(e)) from None
        raw_metrics = obj["metrics"]
        if not isinstance(raw_metrics, list) or not all(isinstance(d, dict) and isinstance(d.get("name"), str)
                                                        for d in raw_metrics):
            raise TraceError(f"{where}.metrics: expected a list of maps with a name")
        try:
            metrics = [MetricSpec.from_dict(d) for d in raw_metrics]
        except (ValueError, KeyError) as e:
            raise TraceError(f"{where}.metrics: {e}") from None
        window_s = obj.get("window_s", 1.0)
        if isinstance(window_s, bool) or not isinstance(window_s, (int, float)) or not window_s > 0:
            raise TraceError(f"{where}.window_s: expected a positive number")
        fp, prov = obj.get("host_fingerprint", {}), obj.get("provenance", {})
        if not isinstance(fp, dict) or not isinstance(prov, dict):
            raise TraceError(f"{where}: host_fingerprint and provenance must be maps")
        try:
            check_depth(prov, f"{where}.provenance", MAX_DEPTH_METADATA)
            check_depth(fp, f"{where}.host_fingerprint", MAX_DEPTH_METADATA)
        except ValidationError as e:
            raise TraceError(str(e)) from None
        return cls(values, metrics, window_s=float(window_s), window_start_ns=starts, host_fingerprint=fp,
                   provenance=prov, simulated=bool(obj.get("simulated", False))).validate()

    # -- HDF5 -----------------------------------------------------------------
    def write(self, path: Path | str) -> None:
        self.validate()
        with atomic_h5(path) as f:
            f.create_dataset("values", data=np.asarray(self.values, np.float32))
            if self.window_start_ns is not None:
                f.create_dataset("window_start_ns", data=np.asarray(self.window_start_ns, np.int64))
            write_schema_datasets(f, self.metrics)
            f.attrs["format"] = FORMAT
            f.attrs["schema_version"] = SCHEMA_VERSION
            f.attrs["window_s"] = float(self.window_s)
            f.attrs["simulated"] = bool(self.simulated)
            set_json(f.attrs, "metrics", [m.to_dict() for m in self.metrics])
            set_json(f.attrs, "host_fingerprint", self.host_fingerprint)
            set_json(f.attrs, "provenance", self.provenance)

    @classmethod
    def read(cls, path, *, where: str | None = None, limits: H5Limits = TRACE_LIMITS) -> "Trace":
        """Read a trace file (a path, bytes or a binary file object). Every trace may come from
        outside, so the file is checked (mimesys.untrusted) before a byte of data is read."""
        where = where or (str(path) if isinstance(path, (str, Path)) else "trace")
        try:
            with open_h5(path, where, limits, kind="mimesys trace") as f:
                if get_str(f.attrs, "format") != FORMAT:
                    raise TraceError(f"{where}: attribute format={get_str(f.attrs, 'format')!r}, expected {FORMAT!r}")
                version = int(f.attrs.get("schema_version", 0))
                if not 1 <= version <= SCHEMA_VERSION:
                    raise TraceError(f"{where}: trace schema_version {version} not supported")
                if not isinstance(f.get("values"), h5py.Dataset):
                    raise TraceError(f"{where}: no /values dataset")
                values = f["values"]
                if values.ndim != 2:
                    raise TraceError(f"{where}: /values must be [T, N], got {values.ndim} dimensions")
                starts = None
                if "window_start_ns" in f:
                    ds = f["window_start_ns"]
                    # Checked against /values before it is read: its size is the sender's to choose.
                    if not isinstance(ds, h5py.Dataset) or ds.ndim != 1 or ds.shape[0] != values.shape[0]:
                        raise TraceError(f"{where}: /window_start_ns must be 1-D with one entry per window "
                                         f"({values.shape[0]})")
                    if ds.dtype.kind not in "iu":
                        raise TraceError(f"{where}: /window_start_ns must be integers")
                    starts = np.asarray(read_array(ds, where), np.int64)
                metrics = [MetricSpec.from_dict(d) for d in get_json(f.attrs, "metrics", [], where=where)]
                tr = cls(
                    values=np.asarray(read_array(values, where), dtype=np.float32),
                    metrics=metrics,
                    window_s=float(f.attrs.get("window_s", 1.0)),
                    window_start_ns=starts,
                    host_fingerprint=get_json(f.attrs, "host_fingerprint", {}, where=where) or {},
                    provenance=get_json(f.attrs, "provenance", {}, where=where) or {},
                    simulated=bool(f.attrs.get("simulated", False)),
                )
        except TraceError:
            raise
        except ValidationError as e:
            raise TraceError(str(e)) from None
        except (OSError, KeyError, ValueError, TypeError, AttributeError) as e:
            raise TraceError(f"{where}: not a readable mimesys trace: {type(e).__name__}: {e}") from None
        return tr.validate()

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


def write_schema_datasets(f: h5py.File, metrics: list[MetricSpec]) -> None:
    """/metric_names and /metric_units as UTF-8 string datasets (see the module docstring)."""
    text = h5py.string_dtype("utf-8")
    f.create_dataset("metric_names", data=np.array([m.name for m in metrics], dtype=object), dtype=text)
    f.create_dataset("metric_units", data=np.array([m.unit for m in metrics], dtype=object), dtype=text)


def wall_clock_of_monotonic(start_ns: int) -> float:
    """Unix time of a CLOCK_MONOTONIC instant (to within the few microseconds between the two reads)."""
    import time
    return time.time() - (time.monotonic_ns() - int(start_ns)) / 1e9

