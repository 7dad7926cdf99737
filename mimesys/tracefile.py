"""A trace's file form (HDF5), written atomically and read as a file from outside: checked
(mimesys.untrusted) before a byte of data is read.

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
"""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np

from .errors import TraceError, ValidationError
from .h5io import atomic_h5, get_json, get_str, set_json
from .metrics import MetricSpec
from .untrusted import H5Limits, open_h5, read_array

FORMAT = "mimesys.trace"
SCHEMA_VERSION = 1
# What a trace file from outside may declare (an agent's, an import's, a request's).
STRING_DATASETS = ("metric_names", "metric_units")   # written for people; the reader ignores them
TRACE_LIMITS = H5Limits(max_dataset_bytes=1 << 30, max_total_bytes=2 << 30, string_datasets=STRING_DATASETS)


def write_trace(trace, path: Path | str) -> None:
    """A validated Trace to `path`."""
    with atomic_h5(path) as f:
        f.create_dataset("values", data=np.asarray(trace.values, np.float32))
        if trace.window_start_ns is not None:
            f.create_dataset("window_start_ns", data=np.asarray(trace.window_start_ns, np.int64))
        write_schema_datasets(f, trace.metrics)
        f.attrs["format"] = FORMAT
        f.attrs["schema_version"] = SCHEMA_VERSION
        f.attrs["window_s"] = float(trace.window_s)
        f.attrs["simulated"] = bool(trace.simulated)
        set_json(f.attrs, "metrics", [m.to_dict() for m in trace.metrics])
        set_json(f.attrs, "host_fingerprint", trace.host_fingerprint)
        set_json(f.attrs, "provenance", trace.provenance)


def read_trace_fields(path, where: str | None, limits: H5Limits) -> dict:
    """A trace file's fields (Trace's keyword arguments), or TraceError saying what is wrong."""
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
            return dict(
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


def write_schema_datasets(f: h5py.File, metrics: list[MetricSpec]) -> None:
    """/metric_names and /metric_units as UTF-8 string datasets (see the module docstring)."""
    text = h5py.string_dtype("utf-8")
    f.create_dataset("metric_names", data=np.array([m.name for m in metrics], dtype=object), dtype=text)
    f.create_dataset("metric_units", data=np.array([m.unit for m in metrics], dtype=object), dtype=text)
