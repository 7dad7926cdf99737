"""A recorded trace as bounded msgpack messages (mimesys/tracestream.py): what the agent sends
for GET /v1/runs/{id}/trace.msgpack, and what a client refuses before allocating."""

from __future__ import annotations

import msgpack
import numpy as np
import pytest

from mimesys import tracestream, wire
from mimesys.errors import ValidationError
from mimesys.metrics import MetricSpec
from mimesys.trace import Trace
from mimesys.untrusted import array_to_wire


def _trace(T=10, N=3, starts=True):
    v = np.arange(T * N, dtype=np.float32).reshape(T, N) / 7
    v[2, 1] = np.nan
    return Trace(values=v, metrics=[MetricSpec(f"m{i}", "fraction") for i in range(N)], window_s=0.5,
                 window_start_ns=np.arange(T, dtype=np.int64) * 500_000_000 if starts else None,
                 host_fingerprint={"cpus": 2}, provenance={"run_id": "r"}, simulated=True)


@pytest.mark.parametrize("starts", [True, False])
def test_a_file_streams_in_chunks_and_comes_back_equal(tmp_path, monkeypatch, starts):
    monkeypatch.setattr(tracestream, "CHUNK_BYTES", 40)      # several messages of a few windows each
    tr = _trace(starts=starts)
    tr.write(tmp_path / "trace.h5")
    msgs = list(tracestream.iter_messages(tmp_path / "trace.h5", "t"))
    assert len(msgs) > 4 and all(len(m) < tracestream.MAX_MESSAGE_BYTES for m in msgs)
    # the file and the trace in memory give the same messages
    assert [msgpack.unpackb(m) for m in msgs] == [msgpack.unpackb(m) for m in tracestream.trace_messages(tr)]
    reader = tracestream.TraceStreamReader("t", max_bytes=1 << 20)
    data = b"".join(msgs)
    for i in range(0, len(data), 7):                            # split anywhere, as a socket does
        reader.feed(data[i:i + 7])
    back = reader.result()
    np.testing.assert_array_equal(back.values, tr.values)
    assert (back.window_start_ns is None) == (not starts)
    if starts:
        np.testing.assert_array_equal(back.window_start_ns, tr.window_start_ns)
    assert back.provenance == tr.provenance and back.simulated and back.window_s == 0.5
    assert [m.name for m in back.metrics] == ["m0", "m1", "m2"]


def _header(T, N=3, **kw):
    return wire.pack({"type": "header", "windows": T, "metrics": [{"name": f"m{i}", "unit": "fraction"} for i in range(N)],
                      "window_s": 1.0, "has_window_start_ns": False, **kw})


def _chunk(first, n, N=3):
    return wire.pack({"type": "windows", "first": first, "values": array_to_wire(np.zeros((n, N), np.float32), "<f4")})


@pytest.mark.parametrize("data, fragment", [
    (_header(10**9), "at most 1048576 accepted"),                                   # refused before allocating
    (_header(2) + _chunk(0, 3), "shape[0] = 3; at most 2"),
    (_header(4) + _chunk(1, 1), "windows from 1, expected 0"),
    (_header(2) + _chunk(0, 1, N=4), "expected [1..2, 3]"),
    (_header(2) + _chunk(0, 1) + wire.pack({"type": "end", "windows": 1}), "ended after 1 of 2"),
    (_header(1) + _chunk(0, 1), "ended early"),
    (_chunk(0, 1), "before the header"),
    (_header(1) + _header(1), "a second header"),
    (_header(0) + wire.pack({"type": "end", "windows": 0}) + _chunk(0, 1), "after the end"),
    (msgpack.packb([1, 2]), "expected a map"),
    (b"\xc1", "not a msgpack message stream"),
    (msgpack.packb({"type": "windows", "x": b"\0" * (9 << 20)}, use_bin_type=True), "longer than"),
    (_header(1, window_s=-1) + _chunk(0, 1) + wire.pack({"type": "end", "windows": 1}), "window_s"),
])
def test_a_malformed_stream_is_one_clear_error(data, fragment):
    with pytest.raises(ValidationError) as e:
        tracestream.read_messages(data, "the trace of run x", max_bytes=1 << 20)
    assert fragment in str(e.value) and "the trace of run x" in str(e.value)
