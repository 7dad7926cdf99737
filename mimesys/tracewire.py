"""A trace on the wire (msgpack bodies, mimesys/wire.py): raw arrays and plain maps, nothing to
interpret; a trace from the wire is checked field by field as any request's body is."""

from __future__ import annotations

from .errors import TraceError, ValidationError
from .metrics import MetricSpec
from .untrusted import array_from_wire, array_to_wire, metadata_maps

WIRE_FIELDS = ("values", "metrics", "window_s", "window_start_ns", "host_fingerprint", "provenance", "simulated")


def trace_to_wire(trace) -> dict:
    out = {"values": array_to_wire(trace.values, "<f4"), "metrics": [m.to_dict() for m in trace.metrics],
           "window_s": float(trace.window_s), "host_fingerprint": trace.host_fingerprint,
           "provenance": trace.provenance, "simulated": bool(trace.simulated)}
    if trace.window_start_ns is not None:
        out["window_start_ns"] = array_to_wire(trace.window_start_ns, "<i8")
    return out


def trace_fields_from_wire(obj, where: str, max_elements: int) -> dict:
    """A wire map's trace fields (Trace's keyword arguments), or TraceError naming the bad one."""
    if not isinstance(obj, dict):
        raise TraceError(f"{where}: expected a map, got {type(obj).__name__}")
    unknown = sorted(str(k) for k in obj if k not in WIRE_FIELDS)
    if unknown:
        raise TraceError(f"{where}: unknown field(s) {unknown}; valid: {', '.join(WIRE_FIELDS)}")
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
    prov, fp = metadata_maps(obj, where, TraceError)
    return dict(values=values, metrics=metrics, window_s=float(window_s), window_start_ns=starts, host_fingerprint=fp,
                provenance=prov, simulated=bool(obj.get("simulated", False)))
