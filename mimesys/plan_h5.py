"""A plan as an HDF5 file (the layout is in mimesys/plan.py's docstring). Every plan file is from
outside (a request body, a released workload): opened with limits and checked before a dataset
is read (mimesys/untrusted.py)."""

from __future__ import annotations

import io
from pathlib import Path

import h5py
import numpy as np

from .errors import PlanError, ValidationError
from .h5io import atomic_h5, get_json, get_str, set_json
from .plan_wire import MAX_WINDOWS
from .untrusted import H5Limits, open_h5, read_array

FORMAT = "mimesys.plan"
SCHEMA_VERSION = 1
_GZIP = dict(compression="gzip", compression_opts=4, shuffle=True)


def write(plan, path: Path | str) -> None:
    """A Plan (mimesys/plan.py) into an HDF5 file, atomically."""
    with atomic_h5(path) as f:
        _write_into(plan, f)


def to_bytes(plan) -> bytes:
    buf = io.BytesIO()
    with h5py.File(buf, "w") as f:
        _write_into(plan, f)
    return buf.getvalue()


def _write_into(plan, f: h5py.File) -> None:
    f.create_dataset("compositions", data=np.asarray(plan.compositions, np.float32), **_GZIP)
    f.attrs["format"] = FORMAT
    f.attrs["schema_version"] = SCHEMA_VERSION
    f.attrs["window_s"] = float(plan.window_s)
    f.attrs["catalog_hash"] = plan.catalog_hash
    f.attrs["seed"] = int(plan.seed)
    set_json(f.attrs, "catalog_names", list(plan.catalog_names))
    set_json(f.attrs, "provenance", plan.provenance)
    set_json(f.attrs, "host_fingerprint", plan.host_fingerprint)
    if plan.core_busy_target is not None:
        f.create_dataset("core_busy_target", data=np.asarray(plan.core_busy_target, np.float32), **_GZIP)
    if plan.mem_held_B is not None:
        f.create_dataset("mem_held_B", data=np.asarray(plan.mem_held_B, np.float64), **_GZIP)


def read_fields(source, where: str, limits: H5Limits, max_threads: int | None = None) -> dict:
    """Plan's constructor arguments from a file path or file bytes; PlanError naming what and where."""
    try:
        with open_h5(source, where, limits, kind="HDF5 plan") as f:
            ds = f.get("compositions")
            # Before anything is decompressed: a few KiB of gzip may declare 100000 threads.
            if max_threads and isinstance(ds, h5py.Dataset) and ds.ndim == 3 and ds.shape[2] > max_threads:
                raise PlanError(f"{where}: {ds.shape[2]} threads; this host runs at most {max_threads} (its CPU limit)")
            return _read_from(f, where)
    except PlanError:
        raise
    except ValidationError as e:
        raise PlanError(str(e)) from None
    except (OSError, KeyError, ValueError, TypeError) as e:
        raise PlanError(f"{where}: not a readable HDF5 plan: {type(e).__name__}") from None


def _read_from(f: h5py.File, where: str) -> dict:
    if get_str(f.attrs, "format") != FORMAT:
        raise PlanError(f"{where}: attribute format={get_str(f.attrs, 'format')!r}, expected {FORMAT!r}")
    version = int(f.attrs.get("schema_version", 0))
    if version < 1 or version > SCHEMA_VERSION:
        raise PlanError(f"{where}: plan schema_version {version} not supported (this build reads 1..{SCHEMA_VERSION})")
    ds = _compositions(f, where)
    names = get_json(f.attrs, "catalog_names", where=where)   # ValidationError naming the attribute
    provenance = get_json(f.attrs, "provenance", {}, where=where)
    fingerprint = get_json(f.attrs, "host_fingerprint", {}, where=where)
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise PlanError(f"{where}: attribute catalog_names must be a JSON list of names")
    seed = _scalar_attr(f, "seed", 0, int, where)
    T, _, K = ds.shape
    busy = _optional(f, "core_busy_target", (T, K), "[T, K]", np.float32, where)
    held = _optional(f, "mem_held_B", (T,), "[T]", np.float64, where)
    if not 0 <= seed < 1 << 64:   # as on the wire (plan_wire); the schedule stores it as a u64
        raise PlanError(f"{where}: attribute seed must be an integer in [0, 2^64)")
    return dict(compositions=np.asarray(read_array(ds, where), dtype=np.float32), catalog_names=names,
                catalog_hash=get_str(f.attrs, "catalog_hash", ""), window_s=_scalar_attr(f, "window_s", 1.0, float, where),
                seed=seed, provenance=provenance or {}, host_fingerprint=fingerprint or {},
                core_busy_target=busy, mem_held_B=held)


def _compositions(f: h5py.File, where: str) -> h5py.Dataset:
    if "compositions" not in f:
        raise PlanError(f"{where}: no /compositions dataset")
    ds = f["compositions"]
    if not isinstance(ds, h5py.Dataset):
        raise PlanError(f"{where}: /compositions is not a dataset")
    if ds.ndim != 3:
        raise PlanError(f"{where}: /compositions must be [T, M, K], got shape {ds.shape}")
    if ds.shape[0] > MAX_WINDOWS:
        raise PlanError(f"{where}: plan has {ds.shape[0]} windows; at most {MAX_WINDOWS} allowed")
    return ds


def _optional(f: h5py.File, name: str, shape: tuple, axes: str, dtype, where: str) -> np.ndarray | None:
    """An optional per-window dataset, which must match the compositions' windows (and threads)."""
    if name not in f:
        return None
    ds = f[name]
    if not isinstance(ds, h5py.Dataset) or ds.shape != shape:
        raise PlanError(f"{where}: /{name} must be {axes} = [{', '.join(map(str, shape))}], got "
                        f"{getattr(ds, 'shape', 'a group')}")
    return np.asarray(read_array(ds, where), dtype=dtype)


def _scalar_attr(f: h5py.File, key: str, default, kind, where: str):
    raw = f.attrs.get(key, default)
    try:
        value = kind(np.asarray(raw).item())
    except (TypeError, ValueError, OverflowError):
        raise PlanError(f"{where}: attribute {key} must be a number") from None
    if kind is float and not np.isfinite(value):
        raise PlanError(f"{where}: attribute {key} must be finite")
    return value
