"""Small helpers shared by the HDF5 formats (plan, trace, dataset): atomic writes and
JSON-valued attributes. A file is written to a temporary name in the same directory
and renamed into place, so a crash never leaves a half-written file under the real name."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import h5py

from .fsutil import atomic_path


@contextlib.contextmanager
def atomic_h5(path: Path | str):
    with atomic_path(path) as tmp:   # unique temp, fsync of file and directory (mimesys.fsutil)
        with h5py.File(tmp, "w") as f:
            yield f


def set_json(attrs, key: str, value) -> None:
    attrs[key] = json.dumps(value, sort_keys=True)


def get_json(attrs, key: str, default=None):
    if key not in attrs:
        return default
    raw = attrs[key]
    if isinstance(raw, bytes):
        raw = raw.decode()
    return json.loads(raw)


def get_str(attrs, key: str, default: str | None = None) -> str | None:
    if key not in attrs:
        return default
    raw = attrs[key]
    return raw.decode() if isinstance(raw, bytes) else str(raw)
