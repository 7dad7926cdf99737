"""Small helpers shared by the HDF5 formats (plan, trace, dataset): atomic writes and
JSON-valued attributes. A file is written to a temporary name in the same directory
and renamed into place, so a crash never leaves a half-written file under the real name."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import h5py

from .errors import ValidationError
from .fsutil import atomic_path
from .untrusted import MAX_JSON_BYTES, json_limited


@contextlib.contextmanager
def atomic_h5(path: Path | str):
    with atomic_path(path) as tmp:   # unique temp, fsync of file and directory (mimesys.fsutil)
        with h5py.File(tmp, "w") as f:
            yield f


def set_json(attrs, key: str, value) -> None:
    attrs[key] = json.dumps(value, sort_keys=True)


def get_json(attrs, key: str, default=None, *, where: str | None = None):
    """A JSON-valued attribute. Files come from outside: it must be one string, which is read only
    when its stored size is within bounds, and decoded with bounded size, count and depth
    (mimesys.untrusted.json_limited); else ValidationError naming the attribute."""
    if key not in attrs:
        return default
    name = f"{where}: attribute {key}" if where else f"attribute {key}"
    aid = attrs.get_id(key)
    if aid.shape != () or (h5py.check_string_dtype(aid.dtype) is None and aid.dtype.kind != "S"):
        raise ValidationError(f"{name}: expected one JSON string")
    if aid.get_storage_size() > MAX_JSON_BYTES:    # fixed-length: known before a byte is read
        raise ValidationError(f"{name}: {aid.get_storage_size()} bytes; at most {MAX_JSON_BYTES}")
    try:
        raw = attrs[key]
        raw = raw.decode() if isinstance(raw, bytes) else str(raw)
    except UnicodeDecodeError:
        raise ValidationError(f"{name}: not UTF-8") from None
    return json_limited(raw, name)


def get_str(attrs, key: str, default: str | None = None) -> str | None:
    if key not in attrs:
        return default
    raw = attrs[key]
    return raw.decode() if isinstance(raw, bytes) else str(raw)
