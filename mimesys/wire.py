"""Wire format: msgpack maps with a schema version, shared by the agent and its clients.

Every body and WebSocket frame is a msgpack map with "v" (WIRE_VERSION) and, for frames,
"type". New fields are optional; readers ignore keys they do not know. Metric vectors
travel as little-endian float32 bytes ("values"), NaN meaning not measured.

Plans and traces in request bodies travel as raw arrays: {"compositions": {"shape", "dtype":
"<f4", "bytes"}, "catalog_names", "catalog_hash", "window_s", "seed", ...} (Plan.to_wire) and
{"values": {...}, "metrics", "window_start_ns"?: {...}, ...} (Trace.to_wire); HDF5 file bytes
are refused (415, mimesys/api/bodies.py), and a recorded trace leaves the agent as bounded
messages (mimesys/tracestream.py). Bodies are decoded with limits on every container, on their
entries in total and on their nesting (untrusted.unpack_limited).

Frames on /v1/runs/{id}/trace and /v1/monitor:
  {"v", "type": "header", "metrics": [MetricSpec dicts], "window_s", "simulated", "fingerprint", "run"?}
  {"v", "type": "window", "repetition", "window", "start_ns", "values", "ran_ns"?, "ops"?, "shape"?}
  {"v", "type": "sample", "timestamp_ns", "values"}                  (monitor)
  {"v", "type": "end", "state", "error"?}
"""

from __future__ import annotations

import msgpack
import numpy as np

from .errors import ValidationError
from .untrusted import unpack_limited

WIRE_VERSION = 1
CONTENT_TYPE = "application/msgpack"


def pack(obj: dict) -> bytes:
    return msgpack.packb({"v": WIRE_VERSION, **obj}, use_bin_type=True)


def unpack(data: bytes, *, where: str = "body", max_bytes: int | None = None) -> dict:
    if max_bytes is not None and len(data) > max_bytes:
        raise ValidationError(f"{where}: {len(data)} bytes exceeds the limit of {max_bytes}")
    obj = unpack_limited(data, where)
    if not isinstance(obj, dict):
        raise ValidationError(f"{where}: expected a msgpack map, got {type(obj).__name__}")
    v = obj.get("v", WIRE_VERSION)
    if not isinstance(v, int) or v < 1 or v > WIRE_VERSION:
        raise ValidationError(f"{where}: wire version {v!r} not supported (this build speaks 1..{WIRE_VERSION})")
    return obj


def vec_to_bytes(values: np.ndarray) -> bytes:
    return np.asarray(values, dtype="<f4").tobytes()


def vec_from_bytes(data: bytes, n: int | None = None, *, where: str = "values") -> np.ndarray:
    if not isinstance(data, (bytes, bytearray)) or len(data) % 4:
        raise ValidationError(f"{where}: expected float32 bytes")
    v = np.frombuffer(data, dtype="<f4").astype(np.float32)
    if n is not None and v.shape[0] != n:
        raise ValidationError(f"{where}: {v.shape[0]} values, schema has {n}")
    return v


def window_frame(w) -> dict:
    """An ExecutedWindow as a frame (without 'v'; pack() adds it)."""
    frame = {"type": "window", "repetition": int(w.repetition), "window": int(w.window),
             "start_ns": int(w.start_ns), "values": vec_to_bytes(w.values)}
    if w.ran_ns is not None:
        frame["shape"] = list(w.ran_ns.shape)
        frame["ran_ns"] = np.asarray(w.ran_ns, "<i8").tobytes()
        frame["ops"] = np.asarray(w.ops, "<i8").tobytes()
    return frame
