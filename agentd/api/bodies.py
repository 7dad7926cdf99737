"""Request bodies: msgpack maps checked field by field. Every failure is a ValidationError
naming the field (→ 400); nothing a client sends can reach a handler unchecked."""

from __future__ import annotations

import io
from typing import Any, Mapping

import h5py
import numpy as np

from .. import wire
from ..backend import RunOptions
from ..errors import MimesysError, PlanError, TraceError, ValidationError
from ..plan import Plan
from ..trace import Trace

UINT64_MAX = (1 << 64) - 1


def body_map(data: bytes, *, allowed: tuple[str, ...], required: tuple[str, ...], max_bytes: int) -> dict:
    if not data:
        raise ValidationError("empty request body; expected a msgpack map")
    obj = wire.unpack(data, where="request body", max_bytes=max_bytes)
    unknown = sorted(str(k) for k in obj if k not in (*allowed, "v"))
    if unknown:
        raise ValidationError(f"request body: unknown field(s) {unknown}; valid fields: {', '.join(allowed)}")
    for name in required:
        if name not in obj:
            raise ValidationError(f"request body: missing field {name!r}")
    return obj


def _bytes_field(obj: Mapping, name: str) -> bytes:
    v = obj[name]
    if not isinstance(v, (bytes, bytearray)):
        raise ValidationError(f"request body: field {name!r} must be binary (HDF5 file bytes), got {type(v).__name__}")
    if not v:
        raise ValidationError(f"request body: field {name!r} is empty")
    return bytes(v)


def _check_dataset_size(data: bytes, name: str, max_elements: int, where: str, *,
                        axis_limits: dict[int, tuple[int, str]] | None = None) -> None:
    """Look at a dataset's shape before reading it: a small, highly compressed body must not
    make the agent allocate gigabytes (a decompression bomb)."""
    try:
        with h5py.File(io.BytesIO(data), "r") as f:
            ds = f.get(name)
            if not isinstance(ds, h5py.Dataset):
                return  # the format's own reader reports the missing dataset
            shape = ds.shape or ()
    except Exception:
        return  # not HDF5 at all: the format's own reader says so
    for axis, (limit, what) in (axis_limits or {}).items():
        if len(shape) > axis and shape[axis] > limit:
            raise ValidationError(f"{where}: /{name} has {shape[axis]} {what}; at most {limit} allowed here")
    n = int(np.prod(shape, dtype=np.float64)) if shape else 0
    if n > max_elements:
        raise ValidationError(f"{where}: /{name} of shape {tuple(shape)} has {n} values; at most {max_elements} "
                              f"allowed in a request")


def plan_field(obj: Mapping, *, max_threads: int | None = None, max_elements: int = 1 << 28) -> Plan:
    data = _bytes_field(obj, "plan")
    limits = {2: (max_threads, "threads (this host's CPU limit)")} if max_threads else None
    _check_dataset_size(data, "compositions", max_elements, "plan", axis_limits=limits)
    try:
        return Plan.from_bytes(data, where="plan")
    except MimesysError:
        raise
    except Exception as e:  # h5py raises many types for hostile files; all of them are the client's
        raise PlanError(f"plan: not a readable HDF5 plan: {type(e).__name__}: {e}") from None


def trace_field(obj: Mapping, *, max_elements: int = 1 << 26) -> Trace:
    data = _bytes_field(obj, "trace")
    _check_dataset_size(data, "values", max_elements, "trace")
    buf = io.BytesIO(data)
    try:
        return Trace.read(buf)
    except TraceError as e:
        raise TraceError(str(e).replace(repr(buf), "trace").replace(str(buf), "trace")) from None
    except MimesysError:
        raise
    except Exception as e:
        raise TraceError(f"trace: not a readable mimesys trace: {type(e).__name__}: {e}") from None


def _int(v: Any, where: str, lo: int, hi: int) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise ValidationError(f"{where}: expected an integer, got {type(v).__name__}")
    if not lo <= v <= hi:
        raise ValidationError(f"{where}: {v} outside [{lo}, {hi}]")
    return v


def seed_field(obj: Mapping, where: str = "request body: seed") -> int | None:
    v = obj.get("seed")
    return None if v is None else _int(v, where, 0, UINT64_MAX)


RUN_OPTION_FIELDS = ("repetitions", "warmup_windows", "record", "seed")


def run_options(obj: Mapping, *, max_repetitions: int, max_warmup_windows: int) -> RunOptions:
    raw = obj.get("options", {})
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ValidationError(f"request body: options must be a map, got {type(raw).__name__}")
    unknown = sorted(str(k) for k in raw if k not in RUN_OPTION_FIELDS)
    if unknown:
        raise ValidationError(f"options: unknown field(s) {unknown}; valid: {', '.join(RUN_OPTION_FIELDS)}")
    record = raw.get("record", True)
    if not isinstance(record, bool):
        raise ValidationError(f"options.record: expected true or false, got {type(record).__name__}")
    return RunOptions(
        repetitions=_int(raw.get("repetitions", 1), "options.repetitions", 1, max_repetitions),
        warmup_windows=_int(raw.get("warmup_windows", 0), "options.warmup_windows", 0, max_warmup_windows),
        record=record,
        seed=seed_field(raw, "options.seed"),
    )
