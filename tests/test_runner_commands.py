"""`mimesys-agent run-plan` and `mimesys-agent calibrate` end to end with the real runner,
and the calibration file's reader."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from click.testing import CliRunner

from mimesys.calibration import read as read_calibration
from mimesys.calibration import write as write_calibration
from mimesys.errors import ValidationError

from runner_helpers import make_plan, runner_or_skip

CPUS = "0" if (os.cpu_count() or 1) == 1 else "0-1"


@pytest.fixture(autouse=True)
def _runner():
    runner_or_skip()


@pytest.mark.serial   # the hold sizes compute from the core's busy fraction: another test's CPU moves it
def test_run_plan_says_what_the_hold_changed(catalog, tmp_path):
    """A plan whose readers cost the core far less than its 0.7 target: the runner stretches the
    compute and shortens the second reader so it fits; the report shows both against the
    compiled plan."""
    import numpy as np
    from agentd.commands.run_plan import run_plan
    plan = make_plan(catalog, {"disk_rand_read_4k": 0.35, "disk_seq_read_direct": 0.35, "cpu_int_crc32": 0.3},
                     T=6, K=1, window_s=0.5)
    plan.core_busy_target = np.full((6, 1), 0.7, np.float32)
    plan.write(tmp_path / "plan.h5")
    report = tmp_path / "report.json"
    res = CliRunner().invoke(run_plan, [str(tmp_path / "plan.h5"), "--cpus", CPUS.split("-")[-1], "--scratch-dir",
                                        str(tmp_path / "scratch"), "--report", str(report)])
    assert res.exit_code == 0, res.output
    doc = json.loads(report.read_text())
    crc = doc["stressors"]["cpu_int_crc32"]
    assert crc["compiled_s"] == pytest.approx(6 * 0.5 * 0.3, rel=1e-6) and crc["planned_s"] > 1.2 * crc["compiled_s"]
    assert doc["hold"]["compute_resized_s"] > 0.1 and doc["hold"]["other_shortened_s"] > 0.1, doc["hold"]
    assert "hold (the plan names each core's busy fraction)" in res.output


def test_run_plan_prints_planned_vs_achieved(catalog, tmp_path):
    from agentd.commands.run_plan import run_plan
    plan_path = tmp_path / "plan.h5"
    make_plan(catalog, {"cpu_int_crc32": 0.3, "net_udp_sink": 0.2, "disk_rand_read_4k": [0.2, 0.0][:len(CPUS.split("-"))]},
              T=4, K=len(CPUS.split("-")), window_s=0.2).write(plan_path)
    report = tmp_path / "out" / "report.json"
    res = CliRunner().invoke(run_plan, [str(plan_path), "--cpus", CPUS, "--scratch-dir", str(tmp_path / "scratch"),
                                        "--seed", "9", "--repetitions", "2", "--warmup-windows", "1",
                                        "--report", str(report)])
    assert res.exit_code == 0, res.output
    assert "cpu_int_crc32" in res.output and "ran/plan" in res.output and "runner: done" in res.output
    doc = json.loads(report.read_text())
    assert doc["windows"] == 8 and doc["seed"] == 9 and doc["exit"] == "done"   # warm-up run, not reported
    crc = doc["stressors"]["cpu_int_crc32"]
    assert crc["planned_s"] == pytest.approx(8 * 0.2 * 0.3 * doc["threads"], rel=1e-6)
    assert crc["compiled_s"] == crc["planned_s"]           # no core busy target: nothing held
    assert doc["hold"] == {"compute_resized_s": 0.0, "other_shortened_s": 0.0} and "hold (" not in res.output
    assert crc["ran_s"] > 0.5 * crc["planned_s"] and crc["ops"] > 0
    assert doc["timing"]["segments"] > 0 and doc["timing"]["p99_segment_error_ms"] is not None
    assert list((tmp_path / "scratch").iterdir()) == []


def test_run_plan_bad_input_is_one_line(catalog, tmp_path):
    from agentd.commands.run_plan import run_plan
    bad = tmp_path / "bad.h5"
    bad.write_bytes(b"not hdf5")
    res = CliRunner().invoke(run_plan, [str(bad)])
    assert res.exit_code == 1 and "not a readable HDF5 plan" in res.output and "Traceback" not in res.output
    plan_path = tmp_path / "p.h5"
    make_plan(catalog, {"cpu_fp_poly": 0.5}, T=1, K=1, window_s=0.1).write(plan_path)
    res = CliRunner().invoke(run_plan, [str(plan_path), "--cpus", "x-y"])
    assert res.exit_code == 1 and "--cpus" in res.output


# Not serial: a calibration measures, but what is asserted of it holds beside other work (rates
# far under this host's, a CPU fraction that may be low, segments that only need the long ones
# to move more than the short); it passed beside four busy loops and a direct-IO writer.
def test_calibrate_writes_rates_and_peaks(tmp_path):
    from agentd.commands.calibrate import calibrate
    out = tmp_path / "calibration.json"
    only = ["cpu_fp_poly", "mem_stream_triad_256M", "net_tcp_loopback", "disk_seq_read_direct"]
    # no host-peak probes here (3 minutes at the default --probe-seconds; the probes and reach
    # are test_host_probes.py's): the rates and the catalog's own peaks
    args = ["--out", str(out), "--window-s", "0.2", "--cpus", CPUS, "--scratch-dir", str(tmp_path / "s"),
            "--probe-seconds", "0"]
    for n in only:
        args += ["--only", n]
    res = CliRunner().invoke(calibrate, args)
    assert res.exit_code == 0, res.output
    doc = read_calibration(out)
    assert set(doc["stressors"]) == set(only)
    fp = doc["stressors"]["cpu_fp_poly"]
    assert fp["one_thread"]["ops_per_s"] > 1e6 and fp["all_threads"] is None
    assert 0.05 < fp["one_thread"]["cpu_fraction"] <= 1.0   # low on a busy host: preempted while timed
    triad = doc["stressors"]["mem_stream_triad_256M"]
    assert triad["one_thread"]["bytes_per_s"] > 1e8
    if CPUS != "0":
        assert triad["all_threads"]["threads"] == 2
    for key in ("mem.bw_Bps", "disk.read_Bps", "net.tx_Bps"):
        assert doc["peaks"][key] > 0, key
    assert doc["peaks"]["net.rx_Bps"] == doc["peaks"]["net.tx_Bps"]   # a link's two directions
    assert doc["peaks"]["mem.bw_Bps"] == max(triad["one_thread"]["bytes_per_s"],
                                             (triad["all_threads"] or triad["one_thread"])["bytes_per_s"])
    assert "host_peaks" not in doc and "reach" not in doc     # --probe-seconds 0: no probes
    seg = doc["stressors"]["disk_seq_read_direct"]["segment"]   # the disk stressor's short segments
    assert seg["long_bytes"] > seg["short_bytes"] > 0 and seg["bytes_per_s"] > 0
    assert 0 <= seg["dead_s"] <= seg["short_s"] and seg["pairs"] == 4
    assert f"each segment loses {seg['dead_s'] * 1e3:.1f} ms" in res.output
    assert all("segment" not in doc["stressors"][n] for n in only[:3])


def test_segment_dead_time_is_what_the_short_segments_miss_of_the_long_ones_rate():
    """Runner counts of 10 and 40 ms segments of a device moving 1 GB/s after 3 ms: the pass
    finds the rate between the two lengths and the 3 ms; the warm-up pair is not read; a device
    that moved no more in the long segments than in the short has no figure."""
    from types import SimpleNamespace

    from agentd.calibrator import build_segment_plan, summarize_segments
    from mimesys.catalog import load_catalog
    catalog = load_catalog()
    names = ["disk_seq_write_fdatasync", "disk_rand_read_4k"]
    sp = build_segment_plan(catalog, 2, names)
    a = sp.plan.compositions
    assert a.shape[0] == 2 * (1 + 2 * 5) and sp.plan.window_s == 0.25
    windows = []
    for t in range(a.shape[0]):
        ran = np.rint(a[t] * 0.25e9).astype(np.int64)
        moved = np.where(ran > 0, np.clip(ran / 1e9 - 0.003, 0, None) * 1e9, 0).astype(np.int64)
        moved[catalog.index("disk_rand_read_4k")] = np.where(ran[catalog.index("disk_rand_read_4k")] > 0, 5_000_000, 0)
        if t in (1, 12):
            moved *= 10                                      # the warm-up pairs: not read
        windows.append(SimpleNamespace(window=t, bytes=moved, ran_ns=ran))
    seg = summarize_segments(catalog, sp, windows)
    fd = seg["disk_seq_write_fdatasync"]
    assert fd["dead_s"] == pytest.approx(0.003, abs=1e-5) and fd["bytes_per_s"] == pytest.approx(1e9, rel=1e-3)
    assert fd["short_s"] == pytest.approx(0.01) and fd["long_s"] == pytest.approx(0.04) and fd["pairs"] == 4
    assert seg["disk_rand_read_4k"]["dead_s"] is None and seg["disk_rand_read_4k"]["bytes_per_s"] is None


def test_calibration_reader_rejects_foreign_files(tmp_path):
    p = tmp_path / "c.json"
    p.write_text("{]")
    with pytest.raises(ValidationError, match="not JSON"):
        read_calibration(p)
    p.write_text(json.dumps({"format": "other"}))
    with pytest.raises(ValidationError, match="not a mimesys calibration file"):
        read_calibration(p)
    write_calibration({"format": "mimesys.calibration", "schema_version": 99, "stressors": {}, "peaks": {}}, p)
    with pytest.raises(ValidationError, match="schema_version 99"):
        read_calibration(p)


def test_calibration_records_a_variant_this_host_cannot_run(tmp_path):
    """A variant the runner refuses (here: a catalog asking for 512-bit SIMD, which the
    kernel does not implement) is recorded as unavailable with the runner's reason; the
    others are still measured."""
    import asyncio

    from agentd.calibrator import measure
    from mimesys.catalog import load_catalog
    from agentd.runner import RunnerConfig
    from runner_helpers import ROOT_CATALOG
    text = ROOT_CATALOG.read_text().replace("params = { vector_bits = 256, dim = 1024 }",
                                            "params = { vector_bits = 512, dim = 1024 }")
    (tmp_path / "catalog.toml").write_text(text)
    catalog = load_catalog(tmp_path / "catalog.toml")
    doc = asyncio.run(measure(RunnerConfig(cpus=(0,)), window_s=0.1, catalog=catalog,
                              only=["cpu_fp_poly", "cpu_simd_dist_256"]))
    assert "vector_bits=512, expected 128 or 256" in doc["stressors"]["cpu_simd_dist_256"]["unavailable"]
    assert doc["stressors"]["cpu_fp_poly"]["one_thread"]["ops_per_s"] > 0
