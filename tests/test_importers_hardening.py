"""Importers on malformed or hostile input (issue 16): an O(n + T) resampler (a day at 1 Hz no
longer builds a 60 GB overlap matrix), and a clear error naming the file for NaN timestamps,
gzip bombs, huge CSV fields and spans no trace can hold."""

from __future__ import annotations

import gzip
import tracemalloc

import numpy as np
import pytest

from mimesys.metrics import MetricSpec
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


def test_two_rows_a_month_apart_with_a_thousand_columns_are_refused_before_the_grid(tmp_path):
    """Each size alone is allowed (a month of windows; a thousand metrics); their product, 30 GB
    of output for a 20 kB file, is refused before anything that size is allocated."""
    import resource
    p = tmp_path / "wide.csv"
    names = ",".join(f"disk.d{k}.read_Bps" for k in range(1000))
    p.write_text(f"timestamp,{names}\n0,{','.join(['1'] * 1000)}\n1300000,{','.join(['2'] * 1000)}\n")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(TraceImportError, match=r"2600000 windows × 1000 metrics = 2600000000 values, more than"):
        get("csv").load(p)
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 200_000     # kB


# -- issue 22: one pass, C speed, memory linear in the samples --------------------------------
def _prometheus_answer(path, series: int, samples: int, rng):
    result = []
    t = 1_700_000_000 + np.arange(samples)
    for k in range(series):
        counter = np.cumsum(rng.uniform(0, 1, samples)) + 1000.0
        result.append({"metric": {"__name__": "node_cpu_seconds_total", "cpu": str(k // 8),
                                  "mode": ("user", "nice", "system", "idle", "iowait", "irq", "softirq",
                                           "steal")[k % 8], "instance": "n"},
                       "values": [[int(a), f"{b:.3f}"] for a, b in zip(t, counter)]})
    import json
    path.write_text(json.dumps({"status": "success", "data": {"resultType": "matrix", "result": result}}))


def test_prometheus_rates_match_the_pairwise_definition(tmp_path):
    """The vectorized rate() against the definition, pair by pair: counter resets, duplicate
    sample times, NaN values, and a series that starts late."""
    import json
    t = np.array([0, 1, 2, 2, 3, 5, 6, 7, 8], dtype=float) + 1_700_000_000
    v = np.array([10, 12, 15, 15, 3, 9, np.nan, 20, 26])           # reset at 3, a NaN sample
    late = t[3:]
    doc = {"status": "success", "data": {"resultType": "matrix", "result": [
        {"metric": {"__name__": "node_context_switches_total"},
         "values": [[a, "NaN" if np.isnan(b) else f"{b:g}"] for a, b in zip(t.tolist(), v.tolist())]},
        {"metric": {"__name__": "node_pressure_io_waiting_seconds_total"},
         "values": [[a, f"{0.5 * i:g}"] for i, a in enumerate(late.tolist())]}]}}
    p = tmp_path / "q.json"
    p.write_text(json.dumps(doc))
    tr, _ = get("prometheus").load(p, window_s=1.0)
    grid = np.unique(t)
    want = np.full(len(grid) - 1, np.nan)
    for a in range(len(t) - 1):
        i0, i1 = np.searchsorted(grid, t[a]), np.searchsorted(grid, t[a + 1])
        inc = v[a + 1] - v[a] if v[a + 1] >= v[a] else v[a + 1]
        if i1 > i0:
            want[i0:i1] = inc / (t[a + 1] - t[a])
    per_second = np.repeat(want, np.diff(grid).astype(int))      # 1 s windows over the grid's span
    got = tr.column("perf.ctx_switches_per_s")
    np.testing.assert_allclose(got, per_second, equal_nan=True)
    assert np.isnan(tr.column("psi.io.some")[:2]).all() and np.nanmax(tr.column("psi.io.some")) <= 1


@pytest.mark.parametrize("fmt", ["csv", "prometheus"])
def test_imports_do_not_hold_the_file_as_python_objects(tmp_path, fmt):
    rng = np.random.default_rng(0)
    rows, series = 10_000, 64
    p = tmp_path / f"big.{fmt}"
    if fmt == "csv":
        v = rng.uniform(0, 1, (rows, series))
        with p.open("w") as fh:
            fh.write("timestamp," + ",".join(f"cpu.util.core{i}" for i in range(series)) + "\n")
            np.savetxt(fh, np.column_stack([np.arange(rows), v]), fmt=["%d"] + ["%.4f"] * series, delimiter=",")
    else:
        _prometheus_answer(p, series, rows, rng)
    size = p.stat().st_size
    tracemalloc.start()
    tr, _ = get(fmt).load(p, window_s=1.0)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert tr.T == rows - 1 + (fmt == "csv")
    # The numbers are rows x series x 8 B (5 MB). Row lists of strings, or [ts, "v"] pairs as
    # Python lists, cost 10-20x that: before issue 22 this peaked at 86 MiB (csv) and 134 MiB (prometheus).
    assert peak < 48 << 20, f"{fmt}: peak {peak >> 20} MiB for a {size >> 20} MiB file"


def test_malformed_prometheus_answers_are_one_line_errors_not_tracebacks(tmp_path):
    import json
    p = tmp_path / "prom.json"
    cases = {
        '{"status": "success", "data": "x"}': r"resultType",
        '{"status": "success", "data": {"resultType": "matrix", "result": [{"metric": 3, "values": []}]}}':
            r"lacks metric/values",
        "[" * 100_000 + "]" * 100_000: r"nested too deeply|not JSON",
    }
    for text, message in cases.items():
        p.write_text(text)
        with pytest.raises(TraceImportError, match=message):
            get("prometheus").load(p)
    # a CPU label that is a digit to str.isdigit() but not to int() ("²"): a name, not an index
    t = [[1_700_000_000 + k, str(100.0 + k)] for k in range(4)]
    series = [{"metric": {"__name__": "node_cpu_seconds_total", "cpu": cpu, "mode": mode, "instance": "n"},
               "values": t} for cpu in ("0", "²") for mode in ("user", "idle")]
    p.write_text(json.dumps({"status": "success", "data": {"resultType": "matrix", "result": series}}))
    trace, _ = get("prometheus").load(p)
    assert trace.T >= 1
