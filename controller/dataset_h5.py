"""A Dataset as an HDF5 file (the layout is in controller/dataset.py's docstring). Datasets are
handed between operators, so a file is opened with limits and checked before an array is read
(mimesys/untrusted.py); the model's loader (controller/model/data.py) opens them the same way."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Iterator

import h5py
import numpy as np

from mimesys.errors import ValidationError
from mimesys.h5io import atomic_h5, get_json, get_str, set_json
from mimesys.metrics import MetricSpec
from mimesys.untrusted import H5Limits, open_h5, read_array


class DatasetError(ValidationError):
    """A dataset file is malformed or inconsistent; the message names the file and field."""


FORMAT = "mimesys.dataset"
SCHEMA_VERSION = 1
ARRAYS = ("prev_action", "action", "prev_obs", "obs", "obs_spread")
# As read: every array becomes float32 (round int32, source uint8), so a file's uint8 arrays are
# counted at 4 bytes a value, not at the size the file declares.
READ_AS = {**{name: np.float32 for name in ARRAYS}, "round": np.int32, "source": np.uint8}
DATASET_LIMITS = H5Limits(max_dataset_bytes=4 << 30, max_total_bytes=16 << 30)


@contextlib.contextmanager
def open_dataset(path: Path | str, limits: H5Limits = DATASET_LIMITS) -> Iterator[h5py.File]:
    """A dataset file opened the way plans and traces are (mimesys.untrusted.open_h5): datasets
    are handed between operators, so links other than hard links, external storage, virtual
    layouts and declared sizes past `limits` are refused before a byte of data is read, and so
    are the arrays this module reads once widened to what they are read as (READ_AS)."""
    where = str(path)
    with open_h5(path, where, limits, kind="mimesys dataset") as f:
        total = 0
        for name, dtype in READ_AS.items():
            ds = f.get(name)
            if not isinstance(ds, h5py.Dataset):
                continue
            nbytes = int(ds.size or 0) * np.dtype(dtype).itemsize
            total += nbytes
            if nbytes > limits.max_dataset_bytes or total > limits.max_total_bytes:
                raise DatasetError(f"{where}: /{name} of shape {ds.shape} is {nbytes} bytes once read as "
                                   f"{np.dtype(dtype).name}; at most {limits.max_dataset_bytes} per array and "
                                   f"{limits.max_total_bytes} together")
        yield f


def read_checked(f: h5py.File, name: str, where: str) -> np.ndarray:
    """One array of a file opened by open_dataset, as READ_AS says."""
    ds = f[name]
    if not isinstance(ds, h5py.Dataset):
        raise DatasetError(f"{where}: /{name} is not a dataset")
    return np.asarray(read_array(ds, where), READ_AS[name])


def write(ds, path: Path | str) -> None:
    """Atomic: a crash leaves the old file (or none), never half of this one."""
    with atomic_h5(path) as f:
        for name in ARRAYS:
            f.create_dataset(name, data=np.asarray(getattr(ds, name), np.float32),
                             compression="gzip", compression_opts=4, shuffle=True)
        if ds.round is not None:
            f.create_dataset("round", data=np.asarray(ds.round, np.int32))
        if ds.source is not None:
            f.create_dataset("source", data=np.asarray(ds.source, np.uint8))
        f.attrs["format"] = FORMAT
        f.attrs["schema_version"] = SCHEMA_VERSION
        f.attrs["window_s"] = float(ds.window_s)
        f.attrs["simulated"] = bool(ds.simulated)
        f.attrs["catalog_hash"] = ds.catalog_hash
        set_json(f.attrs, "metrics", [m.to_dict() for m in ds.metrics])
        set_json(f.attrs, "catalog_names", list(ds.catalog_names))
        set_json(f.attrs, "host_fingerprint", ds.host_fingerprint)
        set_json(f.attrs, "provenance", ds.provenance)


def read_fields(path: Path | str) -> dict:
    """The Dataset fields a file holds, its format and arrays checked; DatasetError if not."""
    where = str(path)
    try:
        with open_dataset(path) as f:
            fmt = get_str(f.attrs, "format")
            if fmt != FORMAT:
                raise DatasetError(f"{where}: attribute format={fmt!r}, expected {FORMAT!r}")
            version = int(f.attrs.get("schema_version", 0))
            if not 1 <= version <= SCHEMA_VERSION:
                raise DatasetError(f"{where}: dataset schema_version {version} not supported "
                                   f"(this build reads 1..{SCHEMA_VERSION})")
            for name in ARRAYS:
                if name not in f:
                    raise DatasetError(f"{where}: no /{name} dataset")
            arrays = {name: read_checked(f, name, where) for name in ARRAYS}
            fields = dict(**arrays,
                          metrics=[MetricSpec.from_dict(d) for d in get_json(f.attrs, "metrics", [], where=where)],
                          catalog_names=list(get_json(f.attrs, "catalog_names", [], where=where)),
                          catalog_hash=get_str(f.attrs, "catalog_hash", ""),
                          window_s=float(f.attrs.get("window_s", 1.0)),
                          host_fingerprint=get_json(f.attrs, "host_fingerprint", {}, where=where) or {},
                          simulated=bool(f.attrs.get("simulated", False)),
                          provenance=get_json(f.attrs, "provenance", {}, where=where) or {},
                          round=read_checked(f, "round", where) if "round" in f else None,
                          source=read_checked(f, "source", where) if "source" in f else None)
    except DatasetError:
        raise
    except ValidationError as e:     # the gate's refusals (UntrustedFileError), JSON attributes
        raise DatasetError(str(e)) from None
    except (OSError, KeyError, ValueError, TypeError) as e:
        raise DatasetError(f"{where}: not a readable mimesys dataset: {e}") from e
    return fields
