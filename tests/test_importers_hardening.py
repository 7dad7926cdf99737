"""Importers on malformed or hostile input (issue 16): an O(n + T) resampler (a day at 1 Hz no
longer builds a 60 GB overlap matrix), and a clear error naming the file for NaN timestamps,
gzip bombs, huge CSV fields and spans no trace can hold."""

from __future__ import annotations

import gzip
import tracemalloc

import numpy as np
import pytest

from agentd.metrics import MetricSpec
from controller.importers import base, get
from controller.importers.base import IntervalData, TraceImportError, resample_intervals

from conftest import ROOT

FIX = ROOT / "tests" / "fixtures" / "importers"


def _dense_reference(b, v, window_s):
    T = int(np.floor((b[-1] - b[0]) / window_s + 1e-9))
    edges = b[0] + window_s * np.arange(T + 1)
    lo = np.maximum(b[:-1, None], edges[None, :-1])
    hi = np.minimum(b[1:, None], edges[None, 1:])
    overlap = np.clip(hi - lo, 0.0, None)
    finite = np.isfinite(v)
    w = overlap.T @ finite.astype(float)
    s = overlap.T @ np.where(finite, v, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(w > 0, s / np.where(w > 0, w, 1.0), np.nan)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_resampler_matches_the_time_weighted_definition(seed):
    rng = np.random.default_rng(seed)
    n = 300
    b = np.concatenate([[100.0], 100.0 + np.cumsum(rng.uniform(0.05, 7.0, n))])
    v = rng.uniform(0, 1e9, (n, 3))
    v[rng.random((n, 3)) < 0.2] = np.nan
    v[50:120, 1] = np.nan           # a long gap: windows inside it are NaN
    md = [MetricSpec(f"m.x{i}", "") for i in range(3)]
    for window_s in (0.5, 1.0, 10.0):
        got = resample_intervals(IntervalData(b, v, md), window_s)
        ref = _dense_reference(b, v, window_s)
        assert got.shape == ref.shape
        assert np.array_equal(np.isnan(got), np.isnan(ref))
        np.testing.assert_allclose(got[~np.isnan(got)], ref[~np.isnan(ref)], rtol=2e-6)


def test_a_day_at_1hz_resamples_in_linear_memory():
    n = 86_400
    b = np.arange(n + 1, dtype=np.float64) + np.random.default_rng(0).uniform(-0.2, 0.2, n + 1) * (np.arange(n + 1) > 0)
    b[-1] = n
    v = np.ones((n, 2))
    tracemalloc.start()
    out = resample_intervals(IntervalData(b, v, [MetricSpec("a.b", ""), MetricSpec("a.c", "")]), 1.0)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert out.shape == (n, 2) and np.allclose(out, 1.0)
    assert peak < 64 << 20, f"peak {peak >> 20} MiB: not O(n + T)"   # the dense matrix alone was 60 GB


@pytest.mark.parametrize("fmt,text", [
    ("alibaba", "m_1,nan,41,92,,,43.04,31.03,4\nm_1,10,43,92,,,43.05,31.04,4\n"),
    ("bitbrains", (FIX / "bitbrains_vm.csv").read_text().splitlines()[0] + "\n"
     "nan;\t4;\t1;\t1;\t1;\t1;\t1;\t0;\t1;\t1;\t1\n1376315146;\t4;\t1;\t1;\t1;\t1;\t1;\t0;\t1;\t1;\t1\n"),
    ("prometheus", '{"status": "success", "data": {"resultType": "matrix", "result": [{"metric": '
                   '{"__name__": "node_cpu_seconds_total", "cpu": "0", "instance": "a", "mode": "idle"}, '
                   '"values": [[NaN, "1"], [1700000015, "2"], [1700000030, "3"]]}]}}'),
    ("csv", "timestamp,cpu.util\nnan,0.5\n2,0.4\n3,0.4\n"),
])
def test_nan_timestamps_are_a_clear_error(tmp_path, fmt, text):
    p = tmp_path / "bad"
    p.write_text(text)
    with pytest.raises(TraceImportError, match=str(p)) as e:
        get(fmt).load(p)
    assert "IndexError" not in str(e.value) and "malformed input" not in str(e.value), e.value


def test_gzip_bomb_is_refused_before_it_expands(tmp_path, monkeypatch):
    monkeypatch.setattr(base, "MAX_DECOMPRESSED_BYTES", 4 << 20)
    p = tmp_path / "stats.gz"
    p.write_bytes(gzip.compress(b"$tacc_stats 2.3.5\n" + b"\0" * (64 << 20), 9))
    assert p.stat().st_size < 200_000
    with pytest.raises(TraceImportError, match=r"expands past 4 MiB"):
        get("tacc_stats").load(p)
    p.write_bytes(gzip.compress(b"$tacc_stats 2.3.5\n")[:-6])
    with pytest.raises(TraceImportError, match=r"truncated gzip|corrupt gzip"):
        get("tacc_stats").load(p)


def test_huge_csv_field_is_a_clear_error(tmp_path):
    p = tmp_path / "huge.csv"
    p.write_text("timestamp,cpu.util\n1,\"" + "9" * 300_000 + "\"\n2,0.5\n")
    with pytest.raises(TraceImportError, match=r"huge.csv: malformed CSV: field larger than field limit"):
        get("csv").load(p)
    p.write_text("m_1,\"" + "1" * 300_000 + "\",41,92,,,43.04,31.03,4\n")
    with pytest.raises(TraceImportError, match=r"malformed CSV"):
        get("alibaba").load(p)


def test_a_span_no_trace_can_hold_is_refused_not_allocated(tmp_path):
    p = tmp_path / "ms.csv"
    p.write_text("timestamp,cpu.util\n0,0.5\n1e15,0.4\n")     # milliseconds taken for seconds, or worse
    with pytest.raises(TraceImportError, match=r"more than \d+ windows"):
        get("csv").load(p)
