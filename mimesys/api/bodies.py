"""Request bodies: msgpack maps checked field by field. Every failure is a ValidationError
naming the field (→ 400); nothing a client sends can reach a handler unchecked."""

from __future__ import annotations

from typing import Any, Mapping

from .. import wire
from ..backend import RunOptions
from ..errors import UnsupportedMediaType, ValidationError
from ..plan import Plan
from ..trace import Trace

UINT64_MAX = (1 << 64) - 1


def body_map(data: bytes, *, allowed: tuple[str, ...], required: tuple[str, ...], max_bytes: int) -> dict:
    if not data:
        raise ValidationError("empty request body; expected a msgpack map")
    if data[:8] == HDF5_SIGNATURE:
        raise UnsupportedMediaType("request body is an HDF5 file; this API takes a msgpack map (application/msgpack) "
                                   "with plans and traces as raw arrays")
    obj = wire.unpack(data, where="request body", max_bytes=max_bytes)
    unknown = sorted(str(k) for k in obj if k not in (*allowed, "v"))
    if unknown:
        raise ValidationError(f"request body: unknown field(s) {unknown}; valid fields: {', '.join(allowed)}")
    for name in required:
        if name not in obj:
            raise ValidationError(f"request body: missing field {name!r}")
    return obj


HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"
PLAN_FORMAT = ("a map of raw arrays: {compositions: {shape: [T, M, K], dtype: '<f4', bytes}, catalog_names, "
               "catalog_hash, window_s, seed, ...} (Plan.to_wire; `mimesys` converts plan files before sending)")
TRACE_FORMAT = ("a map of raw arrays: {values: {shape: [T, N], dtype: '<f4', bytes}, metrics: [...], window_s, ...} "
                "(Trace.to_wire; `mimesys` converts trace files before sending)")


def _not_a_map(obj: Mapping, name: str, expected: str) -> ValidationError:
    """HDF5 never crosses the API: file bytes in a field get 415 naming the format to send;
    anything else that is not a map, 400."""
    v = obj[name]
    if isinstance(v, (bytes, bytearray)):
        what = "HDF5 file bytes" if bytes(v[:8]) == HDF5_SIGNATURE else "binary data"
        return UnsupportedMediaType(f"request body: field {name!r} is {what}; this API takes {expected}")
    return ValidationError(f"request body: field {name!r} must be {expected}, got {type(v).__name__}")


def plan_field(obj: Mapping, *, max_threads: int | None = None, max_elements: int = 1 << 28) -> Plan:
    """The plan of a request, as raw arrays (Plan.to_wire): its size follows from its shapes."""
    if not isinstance(obj.get("plan"), dict):
        raise _not_a_map(obj, "plan", PLAN_FORMAT)
    return Plan.from_wire(obj["plan"], "plan", max_threads=max_threads, max_elements=max_elements)


def trace_field(obj: Mapping, *, max_elements: int = 1 << 26, name: str = "trace") -> Trace:
    """The trace of a request, as raw arrays (Trace.to_wire)."""
    if not isinstance(obj.get(name), dict):
        raise _not_a_map(obj, name, TRACE_FORMAT)
    return Trace.from_wire(obj[name], name, max_elements=max_elements)


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
