"""Trace importers: the real tacc_stats / HPCPerfStats files in ../shared/traces, values worked
out by hand from their raw counters, the small fixtures of the other formats, and malformed
input (clear error naming file and line, nothing written)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from mimesys.trace import Trace
from controller.importers import get, names
from controller.importers.base import ImportReport, IntervalData, TraceImportError, resample_intervals
from controller.importers.tacc_stats import interval_data
from controller.importers.tacc_stats.textfile import parse_file

from conftest import ROOT, SHARED_TRACES

FIX = ROOT / "tests" / "fixtures" / "importers"
NUM_VMS = SHARED_TRACES / "stats-num_vms_1_7.txt"
STAMPEDE = SHARED_TRACES / "HPCPerfStatsdDataSample"
needs_traces = pytest.mark.skipif(not SHARED_TRACES.is_dir(), reason=f"shared traces directory {SHARED_TRACES} absent")


def shared_trace_files():
    if not SHARED_TRACES.is_dir():
        return []
    return sorted(p for p in SHARED_TRACES.iterdir() if p.is_file() and p.name != "README.md")


def test_registry_lists_every_format():
    assert names() == ["alibaba", "bitbrains", "csv", "prometheus", "tacc_stats"]
    assert get("hpcperfstats") is get("tacc_stats")


@needs_traces
@pytest.mark.parametrize("path", shared_trace_files(), ids=lambda p: p.name)
def test_every_shared_trace_imports(path, tmp_path):
    trace, report = get("tacc_stats").load(path)
    trace.validate()
    assert trace.T > 50
    names_ = trace.names
    for m in ("cpu.util", "cpu.util.core0", "disk.read_Bps", "disk.write_Bps", "net.rx_Bps", "mem.used_B"):
        assert m in names_, m
        col = trace.column(m)
        assert np.isfinite(col).all() and (col >= 0).all(), m
    assert ((trace.column("cpu.util") >= 0) & (trace.column("cpu.util") <= 1)).all()
    assert report.dropped, "a tacc_stats file always has types agentd has no name for"
    out = tmp_path / "t.h5"
    trace.write(out)
    back = Trace.read(out)
    assert back.names == names_ and np.array_equal(back.values, trace.values, equal_nan=True)


@needs_traces
def test_num_vms_values_by_hand():
    """Records 13 and 14 of stats-num_vms_1_7.txt (file lines 1057 and 1143), interval index 12:

    dt = 1764551795.670497 - 1764551794.639885 = 1.030612 s

    CPU, core 0 (`cpu 0` lines: user nice system idle iowait irq softirq, centiseconds):
      before 3347667 2 169988 24967839 63923 0 968
      after  3347671 2 169989 24967906 63953 0 968
      deltas   4     0   1      67      30   0  0
      busy = user+nice+system+irq+softirq = 4+0+1+0+0 = 5; total = busy+idle+iowait = 5+67+30 = 102
      util = 5/102 = 0.0490196

    Disk (`block sda`, wr_sectors is the 7th value; sdb and sdc do not change):
      wr_sectors 2623300857 -> 2623634169: 333312 sectors x 512 B = 170,655,744 B
      / 1.030612 s = 165,586,801 B/s  (165.6 MB/s)
      rd_sectors 62156159 -> 62156167: 8 x 512 = 4096 B / 1.030612 = 3974.3 B/s

    Memory bandwidth (`intel_hsw_imc`, 8 channels; CTL0 = 20972292 = 0x01400304 -> event 0x04
    umask 0x03 = CAS_COUNT.RD in CTR0; CTL1 = 20974596 = 0x01400C04 -> umask 0x0C = CAS_COUNT.WR
    in CTR1):
      CTR0 deltas: ff/14.1 271793, ff/14.0 1072155, 7f/17.1 1162562, 7f/17.0 1185567,
                   7f/14.0 2637630, 7f/14.1 1194039, ff/17.0 273049, ff/17.1 284150 -> 8,080,945
      CTR1 deltas: ff/14.1 57758, ff/14.0 335558, 7f/17.1 263793, 7f/17.0 285618,
                   7f/14.0 535732, 7f/14.1 294804, ff/17.0 58548, ff/17.1 68544   -> 1,900,355
      (8,080,945 + 1,900,355) x 64 B = 638,803,200 B / 1.030612 s = 619,828,995 B/s
    """
    report = ImportReport()
    data = interval_data(parse_file(NUM_VMS), report)
    col = {m.name: j for j, m in enumerate(data.metrics)}
    row = data.values[12]
    assert data.bounds_s[13] - data.bounds_s[12] == pytest.approx(1.030612, abs=1e-6)
    assert row[col["cpu.util.core0"]] == pytest.approx(5 / 102, rel=1e-9)
    assert row[col["disk.write_Bps"]] == pytest.approx(165_586_801, rel=1e-5)
    assert row[col["disk.read_Bps"]] == pytest.approx(3974.3, rel=1e-4)
    assert row[col["mem.bw_Bps"]] == pytest.approx(619_828_995, rel=1e-5)
    # the parts: 8,080,945 x 64 = 517,180,480 B / 1.030612 s = 501,818,803 B/s read;
    #            1,900,355 x 64 = 121,622,720 B / 1.030612 s = 118,010,192 B/s write (sum 619,828,995)
    assert row[col["mem.bw_read_Bps"]] == pytest.approx(501_818_803, rel=1e-6)
    assert row[col["mem.bw_write_Bps"]] == pytest.approx(118_010_192, rel=1e-6)


@needs_traces
def test_num_vms_window_is_time_weighted_by_hand():
    """Window 11 of the 1 s grid starting at the first record (t0 = 1764551783.244789) spans
    [t0+11, t0+12) = [...94.244789, ...95.244789). Interval 11 (...93.608070 -> ...94.639885,
    1.031815 s) covers its first 0.395096 s, interval 12 (above) the remaining 0.604904 s.
    disk.write_Bps of interval 11: sda wr_sectors 2623288497 -> 2623300857 = 12360 x 512 B =
    6,328,320 B / 1.031815 s = 6,133,192 B/s. Window = 0.395096 x 6,133,192 + 0.604904 x
    165,586,801 = 2,423,200 + 100,164,117 = 102,587,317 B/s."""
    trace, _ = get("tacc_stats").load(NUM_VMS, window_s=1.0)
    assert trace.column("disk.write_Bps")[11] == pytest.approx(102_587_317, rel=1e-5)


@needs_traces
def test_stampede_values_by_hand():
    """HPCPerfStatsdDataSample records 1 and 2 (lines 17 and 221), dt = 1778530796.714527 -
    1778530570.470903 = 226.243624 s.

    CPU core 0: before 8051233 17515 1863104 162099030 24697 87035 440252
                after  8051640 17516 1863117 162121037 24697 87038 440410
      deltas user 407, nice 1, system 13, idle 22007, iowait 0, irq 3, softirq 158
      busy = 407+1+13+3+158 = 582; total = 582+22007 = 22589; util = 582/22589 = 0.0257647

    Disk writes: nvme1n1 wr_sectors 530753200 -> 530797008 = 43808; nvme3n1 9224203 -> 9225469
      = 1266; nvme0n1, nvme2n1, nvme4n1 unchanged; nvme3c3n1 is nvme3n1's multipath path (same
      1266) and is left out. (43808 + 1266) x 512 = 23,077,888 B / 226.243624 s = 102,004.6 B/s
    Disk reads: nvme3n1 rd_sectors 19252619 -> 19257091 = 4472 x 512 = 2,289,664 B
      / 226.243624 = 10,120.35 B/s
    """
    f = parse_file(STAMPEDE)
    assert f.version == "tacc_stats 2.3.5"
    data = interval_data(f, ImportReport())
    col = {m.name: j for j, m in enumerate(data.metrics)}
    row = data.values[0]
    assert row[col["cpu.util.core0"]] == pytest.approx(582 / 22589, rel=1e-9)
    assert row[col["disk.write_Bps"]] == pytest.approx(102_004.6, rel=1e-5)
    assert row[col["disk.read_Bps"]] == pytest.approx(10_120.35, rel=1e-5)
    # 300 s records on a 1 s grid: every window inside one interval carries that interval's rate
    trace, report = get("tacc_stats").load(STAMPEDE, window_s=1.0)
    assert trace.column("disk.write_Bps")[100] == pytest.approx(102_004.6, rel=1e-5)
    assert any("nvme3c3n1" in src for src, _ in report.dropped)
    assert "mem.bw_Bps" not in trace.names  # no uncore counters in this file: absent, not 0


@needs_traces
def test_gzipped_archive_imports_the_same(tmp_path):
    import gzip
    p = tmp_path / "stats.gz"
    p.write_bytes(gzip.compress(NUM_VMS.read_bytes()))
    a, _ = get("tacc_stats").load(p)
    b, _ = get("tacc_stats").load(NUM_VMS)
    assert np.array_equal(a.values, b.values, equal_nan=True)


def test_rollover_of_a_48_bit_counter(tmp_path):
    """A W=48 counter that wraps: 2^48 - 1000 -> 3000 is an increase of 4000 CAS -> 256,000 B in 2 s."""
    top = (1 << 48) - 1000
    text = ("$hpcperfstats 2.4\n$hostname h\n"
            "!intel_hsw_imc CTL0,C CTL1,C CTR0,E,W=48 CTR1,E,W=48\n"
            "!cpu user,E,U=cs nice,E,U=cs system,E,U=cs idle,E,U=cs iowait,E,U=cs irq,E,U=cs softirq,E,U=cs\n\n"
            f"100.0 0 h\nintel_hsw_imc 0/0 20972292 20974596 {top} 5\ncpu 0 0 0 0 0 0 0 0\n\n"
            f"102.0 0 h\nintel_hsw_imc 0/0 20972292 20974596 3000 5\ncpu 0 50 0 50 100 0 0 0\n")
    p = tmp_path / "wrap"
    p.write_text(text)
    trace, _ = get("tacc_stats").load(p, window_s=1.0)
    assert trace.column("mem.bw_Bps") == pytest.approx([128_000, 128_000])
    assert trace.column("cpu.util.core0") == pytest.approx([0.5, 0.5])


def test_counter_reset_without_width_is_nan_not_zero(tmp_path):
    text = ("$tacc_stats 2.3.5\n!block rd_ios,E rd_sectors,E,U=512B wr_sectors,E,U=512B io_ticks,E,U=ms\n\n"
            "10 1 h\nblock sda 5 100 100 10\n\n12 1 h\nblock sda 1 2 2 1\n\n14 1 h\nblock sda 2 6 2 1\n")
    p = tmp_path / "reset"
    p.write_text(text)
    trace, report = get("tacc_stats").load(p, window_s=2.0)
    r = trace.column("disk.read_Bps")
    assert math.isnan(r[0]) and r[1] == pytest.approx(4 * 512 / 2)
    assert any("reset" in n for n in report.notes)


def test_resampling_is_time_weighted():
    # intervals [0,0.5) rate 10, [0.5,2) rate 40, [2,3) NaN, [3,3.2) rate 1 ; W = 1
    data = IntervalData(np.array([0, 0.5, 2, 3, 3.2]), np.array([[10.0], [40.0], [np.nan], [1.0]]), [])
    out = resample_intervals(data, 1.0)
    assert out.shape == (3, 1)
    assert out[0, 0] == pytest.approx(0.5 * 10 + 0.5 * 40)
    assert out[1, 0] == pytest.approx(40)
    assert math.isnan(out[2, 0])  # only the NaN interval overlaps window 2: unknown, not 0


# -- the other formats ------------------------------------------------------------------------

def test_csv_timestamps_resampled():
    trace, report = get("csv").load(FIX / "trace.csv", window_s=1.0)
    assert trace.names == ["cpu.util", "cpu.util.core0", "mem.bw_Bps", "disk.write_Bps"]
    # rows at 100, 101, 102.5, 103: window [102,103) is half row 101 (0.25) and half row 102.5 (0.10)
    assert trace.column("cpu.util") == pytest.approx([0.5, 0.25, 0.175, 0.75])
    assert math.isnan(trace.column("disk.write_Bps")[0])
    assert trace.column("mem.bw_Bps")[2] == pytest.approx(2e9)  # the NaN half does not count as 0
    assert ("Comment", "not a metric name in agentd's scheme (e.g. cpu.util.core0, disk.read_Bps)") in report.dropped


def test_csv_roundtrip_of_trace_export(tmp_path):
    tr, _ = get("csv").load(FIX / "trace.csv")
    tr.write_csv(tmp_path / "x.csv")
    back, _ = get("csv").load(tmp_path / "x.csv")
    assert np.allclose(back.values, tr.values, equal_nan=True, rtol=1e-5)


def test_alibaba_one_machine():
    trace, report = get("alibaba").load(FIX / "alibaba_machine_usage.csv", machine="m_1932", window_s=10)
    assert trace.column("cpu.util") == pytest.approx([0.41, 0.43, 0.45, 0.47, 0.47, 0.40])
    assert math.isnan(trace.column("disk.io_frac")[3])  # 101 = the dataset's abnormal marker
    assert math.isnan(trace.column("mem.bw_frac")[0]) and trace.column("mem.bw_frac")[2] == pytest.approx(0.12)
    with pytest.raises(TraceImportError, match="2 machines.*--machine"):
        get("alibaba").load(FIX / "alibaba_machine_usage.csv")


def test_bitbrains_vm():
    trace, report = get("bitbrains").load(FIX / "bitbrains_vm.csv", window_s=300)
    assert trace.T == 4
    assert trace.column("cpu.util")[0] == pytest.approx(0.93233333)
    assert trace.column("disk.write_Bps")[0] == pytest.approx(2.2 * 1024)
    assert trace.column("mem.used_B")[1] == pytest.approx(5856644.8 * 1024, rel=1e-6)
    assert trace.host_fingerprint["cpus"] == 4
    assert any("Unix seconds" in n for n in report.notes)


def test_prometheus_rates_by_hand():
    """cpu 0, first 15 s: idle +6, user +8, iowait +1 -> 8/15 busy. sda written +15,360,000 B / 15 s
    = 1,024,000 B/s (sda1, a partition, is left out). eth0 goes 5,300,000 -> 150,000: a reset, so
    the increase is 150,000 B / 15 s = 10,000 B/s."""
    trace, report = get("prometheus").load(FIX / "prometheus_node_exporter.json", window_s=15)
    assert trace.column("cpu.util.core0") == pytest.approx([8 / 15, 4 / 15, 14 / 15])
    assert trace.column("disk.write_Bps") == pytest.approx([1_024_000, 0, 3_072_000])
    assert trace.column("net.rx_Bps") == pytest.approx([10_000, 10_000, 10_000])
    assert any(src == "node_load1" for src, _ in report.dropped)


def test_prometheus_several_instances_need_machine(tmp_path):
    doc = json.loads((FIX / "prometheus_node_exporter.json").read_text())
    other = json.loads(json.dumps(doc["data"]["result"][0]))
    other["metric"]["instance"] = "db2:9100"
    doc["data"]["result"].append(other)
    p = tmp_path / "two.json"
    p.write_text(json.dumps(doc))
    with pytest.raises(TraceImportError, match=r"2 instances.*--machine INSTANCE"):
        get("prometheus").load(p, window_s=15)
    trace, _ = get("prometheus").load(p, window_s=15, machine="web1:9100")
    assert trace.column("cpu.util.core0") == pytest.approx([8 / 15, 4 / 15, 14 / 15])


def _tacc_cpu(records: list[tuple[float, list[int]]]) -> str:
    """A tacc_stats file of one core's cpu counters (user nice system idle iowait irq softirq, cs)."""
    text = ("$tacc_stats 2.3.5\n$hostname h\n"
            "!cpu user,E,U=cs nice,E,U=cs system,E,U=cs idle,E,U=cs iowait,E,U=cs irq,E,U=cs softirq,E,U=cs\n\n")
    return text + "".join(f"{t} 0 h\ncpu 0 {' '.join(map(str, v))}\n\n" for t, v in records)


def test_cpu_coverage_warns_where_the_busy_modes_miss_time(tmp_path):
    """Two 20 s intervals whose modes add up to 1800 of 2000 cs (0.9 of the wall: the busy modes,
    counted at ticks, missed work): cpu.util keeps busy / all modes (450 / 1800), and the report
    says 0.9 and warns; the same counters covering the wall get the figure without the warning."""
    short = _tacc_cpu([(100.0, [0] * 7), (120.0, [450, 0, 0, 1350, 0, 0, 0]), (140.0, [900, 0, 0, 2700, 0, 0, 0])])
    full = _tacc_cpu([(100.0, [0] * 7), (120.0, [500, 0, 0, 1500, 0, 0, 0]), (140.0, [1000, 0, 0, 3000, 0, 0, 0])])
    (tmp_path / "short").write_text(short)
    (tmp_path / "full").write_text(full)
    trace, report = get("tacc_stats").load(tmp_path / "short", window_s=20.0)
    assert trace.column("cpu.util.core0") == pytest.approx([0.25, 0.25])
    [note] = [n for n in report.notes if n.startswith("cpu:")]
    assert "0.9000 of the wall time" in note and "miss CPU time" in note
    _, report = get("tacc_stats").load(tmp_path / "full", window_s=20.0)
    [note] = [n for n in report.notes if n.startswith("cpu:")]
    assert "1.0000 of the wall time" in note and "miss" not in note


def test_prometheus_cpu_coverage_warns_where_the_modes_fall_short(tmp_path):
    """cpu 0's modes gain 35 + 7 s over 60 s of samples (a reset on the way counts its new value,
    as Prometheus does): 0.7 of the wall, warned."""
    def series(mode, values):
        return {"metric": {"__name__": "node_cpu_seconds_total", "cpu": "0", "mode": mode},
                "values": [[1700000000 + 15 * i, str(v)] for i, v in enumerate(values)]}
    doc = {"status": "success", "data": {"resultType": "matrix", "result": [
        series("idle", [100, 110, 120, 5, 15]), series("user", [50, 52, 54, 1, 3])]}}
    p = tmp_path / "short.json"
    p.write_text(json.dumps(doc))
    _, report = get("prometheus").load(p, window_s=15)
    [note] = [n for n in report.notes if n.startswith("cpu:")]
    assert "0.7000 of the wall time" in note and "miss CPU time" in note


# -- malformed input --------------------------------------------------------------------------

@pytest.mark.parametrize("fmt,text,match", [
    ("tacc_stats", "hello\n", r"bad:1: first line .*expected a `\$tacc_stats"),
    ("tacc_stats", "$tacc_stats 2.3.5\n!cpu user,E idle,E\n\n1 0 h\ncpu 0 1 2 3\n", r"bad:5: cpu 0: 3 values \(expected 2 values"),
    ("tacc_stats", "$tacc_stats 2.3.5\n!cpu user,E idle,E\n\n1 0 h\ncpu 0 1 x\n", r"bad:5: cpu 0: field 'idle' is 'x'"),
    ("tacc_stats", "$tacc_stats 2.3.5\n!cpu user,E idle,E\n\n1 0 h\ndisk 0 1 2\n", r"bad:5: type 'disk' has no schema line"),
    ("tacc_stats", "$tacc_stats 2.3.5\n!cpu user,E idle,E\n\n1 0 h\ncpu 0 1 2\n", r"1 record\(s\); rates need at least two"),
    ("csv", "timestamp,cpu.util\n1,0.5\n2,abc\n", r"bad:3: column 'cpu.util' is 'abc' \(expected a number"),
    ("csv", "timestamp,cpu.util\n1,0.5\n1,0.4\n", r"bad:3: timestamp 1 does not increase"),
    ("csv", "cpu.util\n0.5\n", r"bad:1: .*expected exactly one of the columns 'window' or 'timestamp'"),
    ("alibaba", "m_1,0,1,2,3\n", r"bad:1: 5 columns \(expected 9 columns"),
    ("bitbrains", "Timestamp;x\n", r"bad:1: header"),
    ("prometheus", '{"status": "success", "data": {"resultType": "vector", "result": []}}', r"resultType 'vector'"),
    ("prometheus", "{not json", r"bad:1: not JSON"),
])
def test_malformed_input_names_file_and_line(tmp_path, fmt, text, match):
    p = tmp_path / "bad"
    p.write_text(text)
    with pytest.raises(TraceImportError, match=match):
        get(fmt).load(p)


def test_wall_clock_start_where_the_source_stamps_unix_time():
    """A source stamped with Unix time gives the trace its wall-clock start (as a recorded
    trace has); seconds from the trace's own start do not pass for a date."""
    tacc, _ = get("tacc_stats").load(NUM_VMS) if NUM_VMS.is_file() else (None, None)
    prom, _ = get("prometheus").load(FIX / "prometheus_node_exporter.json", window_s=15)
    ali, _ = get("alibaba").load(FIX / "alibaba_machine_usage.csv", machine="m_1932", window_s=10)
    assert prom.started_unix_s == pytest.approx(prom.window_start_ns[0] / 1e9) and prom.started_unix_s > 1.5e9
    assert prom.provenance["window_start_clock"].startswith("CLOCK_REALTIME")
    assert ali.started_unix_s is None and "not a date" in ali.provenance["window_start_clock"]
    if tacc is not None:
        assert tacc.started_unix_s == pytest.approx(tacc.window_start_ns[0] / 1e9)


@needs_traces
def test_tacc_stats_records_times_cores_is_bounded_before_the_table_is_made(monkeypatch):
    import controller.importers.tacc_stats as tacc
    from controller.importers.base import TraceImportError
    monkeypatch.setattr(tacc, "MAX_IMPORT_CELLS", 100)
    with pytest.raises(TraceImportError, match=r"intervals × \d+ metrics = \d+ values, more than 100"):
        get("tacc_stats").load(NUM_VMS, window_s=1.0)
