"""A recorded trace as a stream of bounded msgpack messages: how a run's trace leaves the agent.

HDF5 is a file format here, never a wire format (its parser is a large C library; a few bytes of
it can declare gigabytes). `GET /v1/runs/{id}/trace.msgpack` answers with a sequence of msgpack
maps, each at most MAX_MESSAGE_BYTES:

    {"v", "type": "header", "windows": T, "metrics": [MetricSpec dicts], "window_s",
     "host_fingerprint", "provenance", "simulated", "has_window_start_ns"}
    {"v", "type": "windows", "first": i, "values": {shape [n, N], dtype "<f4", bytes},
     "window_start_ns"?: {shape [n], dtype "<i8", bytes}}          (in order, n ≥ 1)
    {"v", "type": "end", "windows": T}

The writer reads the agent's own trace file a chunk at a time (`iter_messages`); the reader
(`TraceStreamReader`) checks the header's size against its budget before it allocates, then
fills the arrays it allocated chunk by chunk, so neither side holds more than the trace itself
plus one message.
"""

from __future__ import annotations

from pathlib import Path
from typing import AsyncIterator, Iterator

import msgpack
import numpy as np

from . import wire
from .errors import TraceError, ValidationError
from .h5io import get_json, get_str
from .trace import Trace
from .tracefile import FORMAT, STRING_DATASETS
from .tracewire import WIRE_FIELDS
from .untrusted import H5Limits, array_from_wire, array_to_wire, open_h5

CONTENT_TYPE = "application/msgpack"           # a sequence of maps, not one
MAX_MESSAGE_BYTES = 8 << 20                    # one message, header included
CHUNK_BYTES = 4 << 20                          # the values a writer puts in one message
MAX_METRICS = 4096
# The agent's own trace file, read a chunk at a time: its size is the run's (bounded by the
# agent's run limits), not one request's.
OWN_FILE_LIMITS = H5Limits(max_dataset_bytes=1 << 40, max_total_bytes=1 << 41, string_datasets=STRING_DATASETS)


def chunk_windows(n_metrics: int) -> int:
    return max(1, CHUNK_BYTES // (max(1, n_metrics) * 4 + 8))


def _messages(header: dict, values, starts) -> Iterator[bytes]:
    """header, windows chunks, end; `values` [T, N] and `starts` [T] (or None) are arrays or the
    file's datasets, sliced a chunk at a time."""
    T, N = values.shape
    yield wire.pack({"type": "header", "windows": int(T), **header, "has_window_start_ns": starts is not None})
    step = chunk_windows(N)
    for i in range(0, T, step):
        msg = {"type": "windows", "first": i, "values": array_to_wire(np.asarray(values[i:i + step], np.float32), "<f4")}
        if starts is not None:
            msg["window_start_ns"] = array_to_wire(np.asarray(starts[i:i + step], np.int64), "<i8")
        yield wire.pack(msg)
    yield wire.pack({"type": "end", "windows": int(T)})


def iter_messages(path: Path, where: str) -> Iterator[bytes]:
    """The packed messages of the trace file at `path` (the agent's own), read a chunk at a time."""
    with open_h5(path, where, OWN_FILE_LIMITS, kind="mimesys trace") as f:
        if get_str(f.attrs, "format") != FORMAT:
            raise TraceError(f"{where}: not a mimesys trace")
        values = f.get("values")
        if values is None or values.ndim != 2:
            raise TraceError(f"{where}: no [T, N] /values dataset")
        a = f.attrs
        header = {"metrics": get_json(a, "metrics", [], where=where), "window_s": float(a.get("window_s", 1.0)),
                  "host_fingerprint": get_json(a, "host_fingerprint", {}, where=where) or {},
                  "provenance": get_json(a, "provenance", {}, where=where) or {},
                  "simulated": bool(a.get("simulated", False))}
        yield from _messages(header, values, f.get("window_start_ns"))


def trace_messages(trace: Trace) -> Iterator[bytes]:
    """The same messages for a trace in memory (tests, in-process replays)."""
    header = {"metrics": [m.to_dict() for m in trace.metrics], "window_s": float(trace.window_s),
              "host_fingerprint": trace.host_fingerprint, "provenance": trace.provenance,
              "simulated": bool(trace.simulated)}
    yield from _messages(header, trace.values, trace.window_start_ns)


class TraceStreamReader:
    """Feed it the body as it arrives (`feed`), then take the trace (`result`). Everything it
    allocates is checked first: the header's windows × metrics against `max_bytes`, each
    message against MAX_MESSAGE_BYTES."""

    def __init__(self, where: str, *, max_bytes: int):
        self.where, self.max_bytes = where, max_bytes
        self._unpacker = msgpack.Unpacker(max_buffer_size=MAX_MESSAGE_BYTES, raw=False, strict_map_key=False,
                                          max_bin_len=MAX_MESSAGE_BYTES, max_str_len=1 << 20,
                                          max_array_len=100_000, max_map_len=100_000)
        self._header: dict | None = None
        self._values: np.ndarray | None = None
        self._starts: np.ndarray | None = None
        self._filled = 0
        self._ended = False

    def feed(self, data: bytes) -> None:
        try:
            self._unpacker.feed(data)
        except msgpack.BufferFull:
            raise ValidationError(f"{self.where}: a message longer than {MAX_MESSAGE_BYTES} bytes") from None
        while True:
            try:
                obj = next(self._unpacker)
            except StopIteration:
                return
            except (ValueError, msgpack.UnpackException, msgpack.ExtraData) as e:
                raise ValidationError(f"{self.where}: not a msgpack message stream ({type(e).__name__})") from None
            self._message(obj)

    def _message(self, obj) -> None:
        where = self.where
        if not isinstance(obj, dict) or not isinstance(obj.get("type"), str):
            raise ValidationError(f"{where}: expected a map with a type")
        if self._ended:
            raise ValidationError(f"{where}: a message after the end")
        kind = obj["type"]
        if kind == "header":
            if self._header is not None:
                raise ValidationError(f"{where}: a second header")
            self._start(obj)
        elif self._header is None:
            raise ValidationError(f"{where}: {kind!r} before the header")
        elif kind == "windows":
            self._chunk(obj)
        elif kind == "end":
            if obj.get("windows") != self._filled or self._filled != self._values.shape[0]:
                raise ValidationError(f"{where}: ended after {self._filled} of {self._values.shape[0]} windows")
            self._ended = True
        else:
            raise ValidationError(f"{where}: unknown message type {kind!r}")

    def _start(self, obj: dict) -> None:
        T, N, has_starts = header_shape(obj, self.where, self.max_bytes)
        self._header = obj
        self._values = np.empty((T, N), np.float32)
        self._starts = np.empty(T, np.int64) if has_starts else None

    def _chunk(self, obj: dict) -> None:
        where, T, N = self.where, *self._values.shape
        if obj.get("first") != self._filled:
            raise ValidationError(f"{where}: windows from {obj.get('first')!r}, expected {self._filled}")
        left = T - self._filled
        v = array_from_wire(obj.get("values"), f"{where}.values", ndim=2, dtype="<f4", max_elements=left * N,
                            axis_limits={0: left})
        if v.shape[1] != N or v.shape[0] == 0:
            raise ValidationError(f"{where}.values: shape {list(v.shape)}; expected [1..{left}, {N}]")
        n = v.shape[0]
        if self._starts is not None:
            s = array_from_wire(obj.get("window_start_ns"), f"{where}.window_start_ns", ndim=1, dtype="<i8",
                                max_elements=n, axis_limits={0: n})
            if s.shape[0] != n:
                raise ValidationError(f"{where}.window_start_ns: {s.shape[0]} entries for {n} windows")
            self._starts[self._filled:self._filled + n] = s
        self._values[self._filled:self._filled + n] = v
        self._filled += n

    def result(self) -> Trace:
        if not self._ended:
            got = "no header" if self._header is None else f"{self._filled} windows"
            raise ValidationError(f"{self.where}: the stream ended early ({got}, no end message)")
        head = {k: v for k, v in self._header.items() if k in WIRE_FIELDS and k not in ("values", "window_start_ns")}
        head["values"] = array_to_wire(np.empty((0, self._values.shape[1]), np.float32), "<f4")
        tr = Trace.from_wire(head, self.where)          # every header field checked as a request's would be
        try:
            return Trace(self._values, tr.metrics, window_s=tr.window_s, window_start_ns=self._starts,
                         host_fingerprint=tr.host_fingerprint, provenance=tr.provenance,
                         simulated=tr.simulated).validate()
        except TraceError:
            raise
        except ValidationError as e:
            raise TraceError(str(e)) from None


def header_shape(obj: dict, where: str, max_bytes: int) -> tuple[int, int, bool]:
    """(windows, metrics, whether window starts follow) a header declares, checked before anything
    is allocated for them: at most MAX_METRICS metrics and max_bytes of arrays."""
    T, metrics = obj.get("windows"), obj.get("metrics")
    if isinstance(T, bool) or not isinstance(T, int) or T < 0:
        raise ValidationError(f"{where}: header.windows must be a non-negative integer")
    if not isinstance(metrics, list) or not 0 < len(metrics) <= MAX_METRICS:
        raise ValidationError(f"{where}: header.metrics must be a list of 1..{MAX_METRICS} metrics")
    N = len(metrics)
    has_starts = bool(obj.get("has_window_start_ns"))
    need = T * (N * 4 + (8 if has_starts else 0))
    if need > max_bytes:
        raise ValidationError(f"{where}: {T} windows × {N} metrics is {need} bytes; at most {max_bytes} accepted")
    return T, N, has_starts


async def read_stream(chunks: AsyncIterator[bytes], where: str, *, max_bytes: int) -> Trace:
    """The trace from a body arriving in chunks (aiohttp's `resp.content.iter_chunked(n)`)."""
    r = TraceStreamReader(where, max_bytes=max_bytes)
    async for chunk in chunks:
        r.feed(chunk)
    return r.result()


def read_messages(data: bytes, where: str, *, max_bytes: int) -> Trace:
    """A whole stream already in memory (tests, small traces)."""
    r = TraceStreamReader(where, max_bytes=max_bytes)
    r.feed(data)
    return r.result()
