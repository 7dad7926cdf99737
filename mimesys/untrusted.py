"""Untrusted files and bodies: the one place that decides what the agent and the controller
may read from outside.

HDF5 is a rich format and a hostile file can make an honest reader do things its author
never meant: a dataset's raw bytes may live in an *external file* named by absolute path
(the reader then reads e.g. the TLS key), a *virtual dataset* maps other files in, a soft or
external link points anywhere, a filter may load a plugin from disk, and a chunked dataset
may declare gigabytes it never wrote (a 1.6 KB body can ask for 381 MiB). So every HDF5
from the wire, from a released workload or from an agent is opened through `open_h5`, which
walks the whole file before any dataset's bytes are read and refuses:

- any link that is not a hard link (soft, external, user-defined);
- datasets with external storage or the virtual layout;
- dtypes other than plain numeric scalars (no compound, sub-array, reference, vlen, opaque),
  except the string datasets a caller names;
- filters outside an allow-list (deflate, shuffle, fletcher32): no plugin is ever needed;
- datasets whose declared bytes exceed a bound, or files whose datasets together do.

Errors name the object and the rule, never a value read from the file.

msgpack bodies are decoded here too, with limits on every container and on the total
number of elements, so a body costs a bounded multiple of its size in memory; and so are the
JSON texts files carry (the attributes of plans and traces), bounded in size, values and depth.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

# Turn off HDF5's dynamic filter plugins. The environment variable works only if it is set
# before the library initialises; emptying the search path works afterwards too.
os.environ.setdefault("HDF5_PLUGIN_PRELOAD", "::")

import h5py  # noqa: E402
import msgpack  # noqa: E402
import numpy as np  # noqa: E402

from .errors import ValidationError  # noqa: E402


def _disable_plugins() -> None:
    with contextlib.suppress(Exception):
        while h5py.h5pl.size() > 0:
            h5py.h5pl.remove(0)


_disable_plugins()

ALLOWED_FILTERS = {
    h5py.h5z.FILTER_DEFLATE: "deflate",
    h5py.h5z.FILTER_SHUFFLE: "shuffle",
    h5py.h5z.FILTER_FLETCHER32: "fletcher32",
}
MAX_OBJECTS = 10_000          # groups + datasets + links walked in one file
# The item size a reader may widen a stored number to: integers to int64 (indices, timestamps),
# floats to at least float32 (compositions and values are read as float32, whatever is stored).
READ_ITEMSIZE = {h5py.h5t.INTEGER: lambda stored: 8, h5py.h5t.FLOAT: lambda stored: max(4, stored)}
MAX_DEPTH = 32


class UntrustedFileError(ValidationError):
    """An HDF5 file uses a feature that untrusted input may not use, or is too large."""


@dataclass(frozen=True)
class H5Limits:
    # Sizes count each value at what a reader makes of it (READ_ITEMSIZE), not as stored: a file
    # of uint8 read as float32, or int8 read as int64, would otherwise be 4-8x its declared size.
    max_dataset_bytes: int = 1 << 30     # any one dataset, as read (shape x read item size)
    max_total_bytes: int = 2 << 30       # every dataset together
    max_chunks: int = 1 << 20            # chunks of one dataset: each is a lookup and a read under the GIL
    string_datasets: tuple[str, ...] = ()  # paths that may hold (variable-length) strings


DEFAULT_LIMITS = H5Limits()


def check_h5(f: h5py.File, where: str, limits: H5Limits = DEFAULT_LIMITS) -> None:
    """Walk every link and object of `f` (metadata only) and raise UntrustedFileError on the
    first thing untrusted input may not use."""
    total = 0
    count = 0
    seen: set = set()

    def walk(group: h5py.Group, path: str, depth: int) -> None:
        nonlocal total, count
        if depth > MAX_DEPTH:
            raise UntrustedFileError(f"{where}: groups nested deeper than {MAX_DEPTH} at {path or '/'}")
        for name in group.keys():
            count += 1
            if count > MAX_OBJECTS:
                raise UntrustedFileError(f"{where}: more than {MAX_OBJECTS} objects in the file")
            child = f"{path}/{name}"
            link = group.get(name, getlink=True)
            if not isinstance(link, h5py.HardLink):
                raise UntrustedFileError(f"{where}: {child} is a {type(link).__name__}; only hard links are "
                                         f"allowed in a file from outside")
            obj = group.get(name)
            addr = h5py.h5o.get_info(obj.id).addr if hasattr(h5py.h5o, "get_info") else id(obj)
            if addr in seen:
                continue  # a second hard link to an object already checked (or a cycle)
            seen.add(addr)
            if isinstance(obj, h5py.Group):
                walk(obj, child, depth + 1)
            elif isinstance(obj, h5py.Dataset):
                total += _check_dataset(obj, child, where, limits)
                if total > limits.max_total_bytes:
                    raise UntrustedFileError(f"{where}: datasets declare more than {limits.max_total_bytes} "
                                             f"bytes together")
            else:
                raise UntrustedFileError(f"{where}: {child} is a {type(obj).__name__}, not a group or dataset")

    walk(f, "", 0)


def _check_dataset(ds: h5py.Dataset, path: str, where: str, limits: H5Limits) -> int:
    dcpl = ds.id.get_create_plist()
    if dcpl.get_external_count() > 0:
        raise UntrustedFileError(f"{where}: dataset {path} keeps its data in an external file; "
                                 f"not allowed in a file from outside")
    if dcpl.get_layout() == h5py.h5d.VIRTUAL:
        raise UntrustedFileError(f"{where}: dataset {path} is a virtual dataset; not allowed in a file from outside")
    for i in range(dcpl.get_nfilters()):
        code = dcpl.get_filter(i)[0]
        if code not in ALLOWED_FILTERS:
            raise UntrustedFileError(f"{where}: dataset {path} uses HDF5 filter {code}; allowed: "
                                     f"{', '.join(sorted(ALLOWED_FILTERS.values()))}")
    tid = ds.id.get_type()
    cls = tid.get_class()
    if path.lstrip("/") in limits.string_datasets and cls == h5py.h5t.STRING:
        itemsize = 8 if tid.is_variable_str() else tid.get_size()
    elif cls in (h5py.h5t.INTEGER, h5py.h5t.FLOAT):
        if tid.get_size() > 8:
            raise UntrustedFileError(f"{where}: dataset {path} has a {tid.get_size()}-byte number type; at most 8 bytes")
        itemsize = READ_ITEMSIZE[cls](tid.get_size())
    else:
        raise UntrustedFileError(f"{where}: dataset {path} has HDF5 type class {cls} ({ds.dtype.kind!r}); only plain "
                                 f"integer or float scalars are allowed")
    shape = ds.shape
    if shape is None:
        return 0
    n = 1
    for d in shape:
        n *= int(d)
    nbytes = n * itemsize
    if nbytes > limits.max_dataset_bytes:
        raise UntrustedFileError(f"{where}: dataset {path} of shape {tuple(shape)} declares {nbytes} bytes (as read); "
                                 f"at most {limits.max_dataset_bytes} allowed")
    if dcpl.get_layout() == h5py.h5d.CHUNKED and n:
        chunks = 1
        for d, c in zip(shape, dcpl.get_chunk()):
            chunks *= -(-int(d) // max(1, int(c)))
        if chunks > limits.max_chunks:
            raise UntrustedFileError(f"{where}: dataset {path} of shape {tuple(shape)} is stored in {chunks} chunks; "
                                     f"at most {limits.max_chunks} allowed")
    return nbytes


@contextlib.contextmanager
def open_h5(source: "str | os.PathLike | bytes | io.IOBase", where: str,
            limits: H5Limits = DEFAULT_LIMITS, *, kind: str = "HDF5 file") -> Iterator[h5py.File]:
    """Open an HDF5 file from outside read-only and check it (check_h5) before yielding it.
    `source` is a path, the file's bytes, or a binary file object. Opening failures become
    UntrustedFileError naming `where`."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        source = io.BytesIO(bytes(source))
    elif isinstance(source, (str, os.PathLike)):
        # HDF5 opens a path with open(2): a FIFO there (`replay /tmp/plan.h5`, planted by whoever
        # may write /tmp) would block it forever, waiting for a writer. A path that cannot be
        # stat'ed is left to h5py's own error.
        with contextlib.suppress(OSError):
            if not stat.S_ISREG(os.stat(source).st_mode):
                raise UntrustedFileError(f"{where}: not a regular file (a FIFO or a device is not read)")
    try:
        f = h5py.File(source, "r")
    except (OSError, ValueError) as e:
        raise UntrustedFileError(f"{where}: not a readable {kind} ({_brief(e)})") from None
    try:
        check_h5(f, where, limits)
        yield f
    finally:
        f.close()


def _brief(e: Exception) -> str:
    # h5py's messages name the file object and the library's error stack; the first clause is enough.
    return str(e).split("(")[0].strip() or type(e).__name__


def read_array(ds: h5py.Dataset, where: str) -> np.ndarray:
    """A checked dataset's values. HDF5 errors while reading (a corrupt chunk) become clear errors."""
    try:
        return ds[()]
    except Exception as e:  # h5py raises several unrelated types for corrupt data
        raise UntrustedFileError(f"{where}: dataset {ds.name} could not be read ({type(e).__name__})") from None


# -- raw arrays on the wire -----------------------------------------------------------------
PLAIN_DTYPES = {"<f4", "<f8", "<i8", "<i4", "<u8", "<u4", "<i2", "<u2", "|u1", "|i1"}


def array_from_wire(obj, where: str, *, ndim: int, dtype: str, max_elements: int,
                    axis_limits: dict[int, int] | None = None) -> np.ndarray:
    """A raw array sent as {"shape": [...], "dtype": "<f4", "bytes": b"..."}: the size follows
    from the shape, and the bytes must be exactly that long, so nothing expands."""
    if not isinstance(obj, dict):
        raise ValidationError(f"{where}: expected a map {{shape, dtype, bytes}}, got {type(obj).__name__}")
    unknown = sorted(str(k) for k in obj if k not in ("shape", "dtype", "bytes"))
    if unknown:
        raise ValidationError(f"{where}: unknown field(s) {unknown}; valid: shape, dtype, bytes")
    shape, dt, data = obj.get("shape"), obj.get("dtype"), obj.get("bytes")
    if not isinstance(shape, list) or len(shape) != ndim or \
            not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
        raise ValidationError(f"{where}.shape: expected {ndim} non-negative integers")
    if dt != dtype:
        raise ValidationError(f"{where}.dtype: expected {dtype!r}")
    for axis, limit in (axis_limits or {}).items():
        if shape[axis] > limit:
            raise ValidationError(f"{where}.shape[{axis}] = {shape[axis]}; at most {limit} allowed here")
    n = 1
    for d in shape:
        n *= d
    if n > max_elements:
        raise ValidationError(f"{where}: shape {shape} has {n} values; at most {max_elements} allowed")
    itemsize = np.dtype(dtype).itemsize
    if not isinstance(data, (bytes, bytearray)) or len(data) != n * itemsize:
        raise ValidationError(f"{where}.bytes: expected {n * itemsize} bytes for shape {shape} and dtype {dtype}")
    return np.frombuffer(bytes(data), dtype=dtype).reshape(shape).astype(np.dtype(dtype).newbyteorder("="))


def array_to_wire(a: np.ndarray, dtype: str) -> dict:
    a = np.ascontiguousarray(a, dtype=dtype)
    return {"shape": list(a.shape), "dtype": dtype, "bytes": a.tobytes()}


# -- msgpack --------------------------------------------------------------------------------
MAX_CONTAINER_ITEMS = 100_000    # entries in any one array or map
MAX_TOTAL_ITEMS = 250_000        # entries in every array and map of one body together
MAX_DEPTH_MSGPACK = 32


class _TooMany(Exception):
    pass


MAX_DEPTH_METADATA = 16          # provenance and fingerprints: a run's trace nests its plan's one level down


def metadata_maps(obj: dict, where: str, error: type[ValidationError]) -> tuple[dict, dict]:
    """(provenance, host_fingerprint) of a plan or trace sent as a map: maps, at most
    MAX_DEPTH_METADATA deep, else `error` (the caller's kind of ValidationError) naming which."""
    prov, fp = obj.get("provenance", {}), obj.get("host_fingerprint", {})
    if not isinstance(prov, dict) or not isinstance(fp, dict):
        raise error(f"{where}: provenance and host_fingerprint must be maps")
    try:
        check_depth(prov, f"{where}.provenance", MAX_DEPTH_METADATA)
        check_depth(fp, f"{where}.host_fingerprint", MAX_DEPTH_METADATA)
    except ValidationError as e:
        raise error(str(e)) from None
    return prov, fp


def check_depth(obj: object, where: str, max_depth: int) -> None:
    """ValidationError when lists and maps nest deeper than max_depth (obj itself at depth 1).
    Iterative: the object was already bounded in entries, the walk costs no stack."""
    stack = [(obj, 1)]
    while stack:
        x, d = stack.pop()
        if isinstance(x, dict):
            x = x.values()
        elif not isinstance(x, list):
            continue
        if d > max_depth:
            raise ValidationError(f"{where}: nested more than {max_depth} deep")
        stack.extend((y, d + 1) for y in x if isinstance(y, (dict, list)))


def unpack_limited(data: bytes, where: str) -> object:
    """msgpack.unpackb with limits on every container and on the sum of their entries. A byte of
    body can otherwise become ~72 bytes of Python objects (empty arrays, small ints)."""
    budget = [MAX_TOTAL_ITEMS]

    def count(n: int) -> None:
        budget[0] -= n + 1
        if budget[0] < 0:
            raise _TooMany

    def on_list(x):
        count(len(x))
        return x

    def on_map(x):
        count(len(x))
        return x

    limit = min(len(data), MAX_CONTAINER_ITEMS)
    try:
        obj = msgpack.unpackb(data, raw=False, strict_map_key=True, max_bin_len=len(data),
                              max_str_len=len(data), max_array_len=limit, max_map_len=limit,
                              max_ext_len=0, list_hook=on_list, object_hook=on_map, use_list=True)
    except _TooMany:
        raise ValidationError(f"{where}: more than {MAX_TOTAL_ITEMS} array/map entries in one body") from None
    except RecursionError:
        raise ValidationError(f"{where}: nested too deeply") from None
    except Exception as e:  # msgpack raises several unrelated types for bad input
        raise ValidationError(f"{where}: not valid msgpack: {type(e).__name__}: {_brief(e)}") from None
    check_depth(obj, where, MAX_DEPTH_MSGPACK)
    return obj


MAX_JSON_BYTES = 4 << 20         # one JSON text read from a file (an attribute of a plan or trace)
MAX_DEPTH_JSON = 32
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')


def json_limited(text: str, where: str) -> object:
    """json.loads with msgpack's limits (unpack_limited): its size, the values it holds and their
    nesting are bounded before the decoder runs. json.loads has no hooks for lists, and a file's
    60 MB `[[],[],…]` would be ~1.3 GB of objects, its deep nesting a RecursionError. So the text,
    its strings cut out, is counted: every value and key but the first follows a `[`, `{`, `,` or `:`."""
    if len(text) > MAX_JSON_BYTES:
        raise ValidationError(f"{where}: {len(text)} characters of JSON; at most {MAX_JSON_BYTES}")
    bare = _JSON_STRING.sub('""', text)
    values = 1 + sum(bare.count(c) for c in "[{,:")
    if values > MAX_TOTAL_ITEMS:
        raise ValidationError(f"{where}: more than {MAX_TOTAL_ITEMS} JSON values")
    b = np.frombuffer(bare.encode("utf-8", "surrogatepass"), np.uint8)
    step = np.isin(b, (ord("["), ord("{"))).view(np.int8) - np.isin(b, (ord("]"), ord("}"))).view(np.int8)
    if b.size and int(np.cumsum(step, dtype=np.int32).max()) > MAX_DEPTH_JSON:
        raise ValidationError(f"{where}: JSON nested more than {MAX_DEPTH_JSON} deep")
    try:
        return json.loads(text)
    except RecursionError:   # not reached within the depth above; kept so it can never escape
        raise ValidationError(f"{where}: JSON nested too deeply") from None
    except ValueError as e:   # JSONDecodeError, an integer of more than 4300 digits
        raise ValidationError(f"{where}: not valid JSON: {_brief(e)}") from None


def check_regular_file(path: Path, where: str) -> None:
    """A file from outside named by path: a regular file (not a FIFO that blocks the reader,
    not a device)."""
    import stat
    try:
        st = os.stat(path)
    except OSError as e:
        raise ValidationError(f"{where}: cannot stat {path}: {e.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        raise ValidationError(f"{where}: {path} is not a regular file")
