"""Request bodies: msgpack maps checked field by field. Every failure is a ValidationError
naming the field (→ 400); nothing a client sends can reach a handler unchecked."""

from __future__ import annotations

from typing import Any, Mapping

from .. import wire
from ..backend import RunOptions
from ..errors import MimesysError, PlanError, TraceError, ValidationError
from ..plan import Plan
from ..trace import STRING_DATASETS, Trace
from ..untrusted import H5Limits

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
        raise ValidationError(f"request body: field {name!r} must be binary (HDF5 file bytes) or a map of "
                              f"raw arrays, got {type(v).__name__}")
    if not v:
        raise ValidationError(f"request body: field {name!r} is empty")
    return bytes(v)


def plan_field(obj: Mapping, *, max_threads: int | None = None, max_elements: int = 1 << 28) -> Plan:
    """The plan of a request: raw arrays ({compositions: {shape, dtype, bytes}, catalog_names, ...}),
    or HDF5 file bytes, which are checked (mimesys.untrusted) before anything is read."""
    if isinstance(obj.get("plan"), dict):
        return Plan.from_wire(obj["plan"], "plan", max_threads=max_threads, max_elements=max_elements)
    data = _bytes_field(obj, "plan")
    plan = Plan.from_bytes(data, where="plan", max_threads=max_threads, limits=wire_h5_limits(len(data)))
    if plan.compositions.size > max_elements:
        raise PlanError(f"plan: /compositions has {plan.compositions.size} values; at most {max_elements} allowed")
    return plan


def trace_field(obj: Mapping, *, max_elements: int = 1 << 26) -> Trace:
    """The trace of a request: raw arrays (Trace.to_wire) or HDF5 bytes, checked before reading."""
    if isinstance(obj.get("trace"), dict):
        return Trace.from_wire(obj["trace"], "trace", max_elements=max_elements)
    data = _bytes_field(obj, "trace")
    cap = wire_h5_limits(len(data))
    return Trace.read(data, where="trace", limits=H5Limits(
        max_dataset_bytes=min(cap.max_dataset_bytes, max_elements * 8),
        max_total_bytes=min(cap.max_total_bytes, max_elements * 16), string_datasets=STRING_DATASETS))


# An HDF5 body may expand (compression, unwritten chunks) by at most this factor, and to at
# least WIRE_H5_FLOOR: reading it holds the GIL (h5py), so what one request may make the agent
# read is bounded by what it sent. Larger plans travel as raw arrays (1:1, nothing expands).
WIRE_H5_EXPANSION = 256
WIRE_H5_FLOOR = 32 << 20


def wire_h5_limits(body_bytes: int) -> H5Limits:
    cap = min(1 << 30, max(WIRE_H5_FLOOR, WIRE_H5_EXPANSION * body_bytes))
    return H5Limits(max_dataset_bytes=cap, max_total_bytes=cap)


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
