"""The host-peak probes (`mimesys-runner --probe`) and the `calibrate` command that runs them
with the catalog's reach runs: which shapes are screened and confirmed, what the JSON and the
calibration file hold, how reach and capacity are derived. They assert structure, never a
figure against the host's (a figure measured beside other work is only lower), so they run
in `make test`'s parallel phase; that a paced variant holds its resolved rate is measured alone
(test_stressors_reach.py::test_paced_variant_is_steady_per_100ms), as is the memory probe,
whose shapes are asserted to reach a bandwidth."""

from __future__ import annotations

import os

import numpy as np
import pytest

from runner_helpers import SCRATCH, runner_or_skip

CPU = (os.cpu_count() or 1) - 1


@pytest.mark.slow
def test_calibration_probes_host_peaks_and_reports_reach(catalog, tmp_path):
    """`calibrate --json`: host peaks from the probes (not catalog kernels), the catalog's best
    per metric, reach = best / peak, all in one JSON line and in the file; capacity_peaks
    gives importers the probed peaks under trace metric names; a paced variant's rate is resolved
    from its base's measured one and never run past."""
    import json
    import subprocess
    import sys
    out = tmp_path / "cal.json"
    only = ["disk_seq_read_1m_qd4", "disk_seq_write_direct_1m_qd4", "disk_rand_read_4k_qd64",
            "disk_rand_write_4k_qd64", "net_tcp_loopback", "net_tcp_loopback_pace50", "mem_stream_triad_256M"]
    # Three probes (before the stressors, after each of the 2 reach runs) are most of this test:
    # the first screens ~100 shapes (8.2 s on the 2-vCPU VM at --probe-seconds 0.02: a
    # deep-queue shape of 4 MiB IOs lasts an IO's latency, ~0.1 s, however short it is asked to
    # be), the two after the reach runs only run its confirmed shapes again (2.4 s). Nothing here
    # asserts a probe's figure beyond its being there (test_probes_try_the_catalogs_own_shapes
    # screens the disk and loopback shapes at 0.03), nor the disk stressors' segments
    # (test_runner_commands.py does): one segment pair each.
    r = subprocess.run([sys.executable, "-m", "agentd.cli", "calibrate", "--json", "--output", str(out), "--cpus", str(CPU),
                        "--scratch-dir", str(SCRATCH), "--window-s", "0.2", "--probe-seconds", "0.02",
                        "--segment-pairs", "1", "--reach-repeats", "2", "--one-thread-only"]
                       + [a for n in only for a in ("--only", n)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    lines = [ln for ln in r.stdout.splitlines() if ln.strip()]
    assert len(lines) == 1, r.stdout
    doc = json.loads(lines[0])
    peaks, reach, best = doc["host_peaks"], doc["reach"], doc["catalog_best"]
    pairs = doc["reach_pairs"]
    for metric in ("disk.read_Bps", "disk.write_Bps", "disk.read_iops", "disk.write_iops", "net.lo_Bps", "mem.bw_Bps"):
        assert peaks[metric] > 0, (metric, doc["host_peaks_method"])
        # reach: the median of the side-by-side pairs (a reach run, then the probes)
        assert len(pairs[metric]) == 2, pairs
        assert reach[metric] == pytest.approx(float(np.median(pairs[metric])), abs=1e-4)
        assert min(pairs[metric]) <= reach[metric] <= max(pairs[metric])
    assert best["disk.write_iops"]["stressor"] == "disk_rand_write_4k_qd64"
    # each metric's two best variants ran REACH_DRAWS times in each of the 2 pairs (--reach-repeats
    # 2); catalog_best is the best of all runs
    from agentd.calibrator import REACH_DRAWS
    from mimesys.calibration import read as read_calibration
    runs = read_calibration(out)["reach_runs"]
    for metric, b in best.items():
        assert len(runs[b["stressor"]]) == 2 * REACH_DRAWS, (metric, sorted(runs))
        field = "ops_per_s" if metric.endswith("iops") else "bytes_per_s"
        tried = [doc_e[field] for e in [read_calibration(out)["stressors"][b["stressor"]], *runs[b["stressor"]]]
                 for doc_e in (e["one_thread"], e["all_threads"]) if doc_e]
        assert b["value"] == pytest.approx(max(tried))
    assert best["net.lo_Bps"]["stressor"] == "net_tcp_loopback"     # paced variants never count
    from mimesys.calibration import capacity_peaks, read
    saved = read(out)
    assert saved["reach"] == reach
    cap = capacity_peaks(saved)
    # the capacity is the probe's peak, or what the catalog demonstrably reached past it
    assert cap["disk.write_Bps"] == max(peaks["disk.write_Bps"], best["disk.write_Bps"]["value"])
    assert cap["net.lo.rx_Bps"] == cap["net.lo.tx_Bps"] == max(peaks["net.lo_Bps"], best["net.lo_Bps"]["value"])
    paced = saved["stressors"]["net_tcp_loopback_pace50"]
    base = saved["stressors"]["net_tcp_loopback"]["one_thread"]["bytes_per_s"]
    assert paced["pace_Bps"] == pytest.approx(0.5 * base)
    # The pacer never runs ahead of its rate (other work beside this test can only slow it);
    # that it holds the rate is measured alone, per 100 ms, by test_paced_variant_is_steady_per_100ms.
    assert 0 < paced["one_thread"]["bytes_per_s"] <= 1.10 * paced["pace_Bps"], (paced, base)


def test_probes_try_the_catalogs_own_shapes():
    """The probes must find the host's peak, not just differ from the catalog: the disk probes
    include native AIO from every CPU's thread (the catalog's all-threads queue-depth runs
    went past a one-thread probe: write IOPS reach 1.5-3.0 on the 2-vCPU VM), io_uring (the
    kernels' submission) and 32 in flight, the loopback probe 256 KiB sends (the catalog's best loopback message size); and
    the peak is a second run of the best shapes, not the luckiest screening run. Each run's
    figure is printed with MIMESYS_PROBE_VERBOSE."""
    import subprocess
    runner = runner_or_skip()
    r = subprocess.run([str(runner), "--probe", "disk", "--probe-seconds", "0.03", "--scratch-dir", str(SCRATCH),
                        "--scratch-budget", str(64 << 20)], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "MIMESYS_PROBE_VERBOSE": "1"})
    assert r.returncode == 0, r.stderr
    peaks = {ln.split()[1]: ln for ln in r.stdout.splitlines() if ln.startswith("peak ")}
    assert set(peaks) == {"disk.read_Bps", "disk.write_Bps", "disk.read_iops", "disk.write_iops"}, r.stdout
    if any(" nan " in ln for ln in peaks.values()):
        pytest.skip(f"disk probes cannot run under {SCRATCH}: {r.stdout}")
    multi = (os.cpu_count() or 1) > 1

    def screened_then_confirmed(metric, peak, err):
        """(screened shapes, shapes run again): the peak is the best second run of the 4 best."""
        def split(prefix):
            rows = [ln.split(" ", 3) for ln in err.splitlines() if ln.startswith(prefix + " " + metric + " ")]
            return [(float(v), how) for _, _, v, how in rows]
        shapes, again = split("shape"), split("again")
        top = sorted(shapes, key=lambda x: -x[0])[:4]
        assert sorted(h for _, h in again) == sorted(h for _, h in top), (metric, top, again)
        assert float(peak.split()[2]) == pytest.approx(max(v for v, _ in again), rel=1e-6), (peak, again)
        assert f"best of the 4 best of {len(shapes)} shapes run again" in peak, peak
        return shapes
    for metric, ln in peaks.items():
        mine = screened_then_confirmed(metric, ln, r.stderr)
        # synchronous threads, one AIO thread, AIO and io_uring on each CPU's thread
        per = 4 if multi else 3
        assert len(mine) == per * (8 if metric.endswith("Bps") else 3), (metric, mine)
        assert any("uring x cpus" in h for _, h in mine), mine
        if multi:
            assert any("aio x cpus" in h for _, h in mine), mine
    r = subprocess.run([str(runner), "--probe", "net", "--probe-seconds", "0.03"], capture_output=True, text=True,
                       timeout=60, env={**os.environ, "MIMESYS_PROBE_VERBOSE": "1"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("peak net.lo_Bps ") and float(r.stdout.split()[2]) > 0, r.stdout
    mine = screened_then_confirmed("net.lo_Bps", r.stdout.strip(), r.stderr)
    assert any("self x 262144 B" in h for _, h in mine), mine


def test_a_probe_given_the_shapes_an_earlier_one_confirmed_runs_only_those():
    """`--probe-shapes`: the probes after calibration's reach runs skip the screening and run the
    shapes the first probe confirmed (its `shapes` lines), each once; a spec naming an unknown
    metric or no shapes is refused before anything runs, a shape this host lacks is a nan peak."""
    import subprocess
    runner = str(runner_or_skip())
    env = {**os.environ, "MIMESYS_PROBE_VERBOSE": "1"}
    first = subprocess.run([runner, "--probe", "net", "--probe-seconds", "0.03"], capture_output=True, text=True,
                           timeout=60, env=env)
    assert first.returncode == 0, first.stderr
    [ids] = [ln.split()[2] for ln in first.stdout.splitlines() if ln.startswith("shapes net.lo_Bps ")]
    ran_first = sorted(ln.split(" ", 3)[3] for ln in first.stderr.splitlines() if ln.startswith("again "))
    assert len(ids.split(",")) == len(ran_first) == 4, (ids, first.stderr)
    again = subprocess.run([runner, "--probe", "net", "--probe-seconds", "0.03", "--probe-shapes", f"net.lo_Bps={ids}"],
                           capture_output=True, text=True, timeout=60, env=env)
    assert again.returncode == 0, again.stderr
    assert not [ln for ln in again.stderr.splitlines() if ln.startswith("shape ")], again.stderr   # no screening
    assert sorted(ln.split(" ", 3)[3] for ln in again.stderr.splitlines() if ln.startswith("again ")) == ran_first
    peak = next(ln for ln in again.stdout.splitlines() if ln.startswith("peak "))
    assert float(peak.split()[2]) > 0 and "best of 4 shapes an earlier probe screened, run again" in peak, peak
    assert f"shapes net.lo_Bps {ids}" in again.stdout
    for bad, why in [("net.lo=1", "is not METRIC=I,J"), ("net.lo_Bps=", "names no shape"),
                     ("net.lo_Bps=1,x", "expected 1 to 16 shape indices")]:
        r = subprocess.run([runner, "--probe", "net", "--probe-shapes", bad], capture_output=True, text=True, timeout=10)
        assert r.returncode == 2 and why in r.stderr and not r.stdout.startswith("peak"), (bad, r)
    r = subprocess.run([runner, "--probe", "net", "--probe-seconds", "0.03", "--probe-shapes", "net.lo_Bps=999"],
                       capture_output=True, text=True, timeout=10)
    assert r.returncode == 0 and "peak net.lo_Bps nan --probe-shapes: shape 999 is not one of this host's" in r.stdout, r


def test_capacity_is_the_probe_peak_unless_the_catalog_went_past_it():
    """A probe that a catalog stressor beat understated the host (reach > 1): scaling foreign
    traces or DTW to the probe's figure would call the host's own loopback 4x its capacity."""
    from mimesys.calibration import capacity_peaks
    doc = {"peaks": {"cpu.util": 1.0},
           "host_peaks": {"disk.read_Bps": 3.0e9, "net.lo_Bps": 6.3e9},
           "catalog_best": {"disk.read_Bps": {"value": 2.4e9, "stressor": "disk_seq_read_1m_qd4", "threads": 1},
                            "net.lo_Bps": {"value": 24.4e9, "stressor": "net_tcp_loopback", "threads": 2}}}
    cap = capacity_peaks(doc)
    assert cap["disk.read_Bps"] == 3.0e9                       # reach 0.8: the probe's peak
    assert cap["net.lo.rx_Bps"] == cap["net.lo.tx_Bps"] == 24.4e9   # reach 3.9: what the host did reach
    assert cap["cpu.util"] == 1.0
    assert capacity_peaks({"host_peaks": {"disk.read_Bps": 1e9}})["disk.read_Bps"] == 1e9   # no catalog_best


def test_reach_runs_again_the_two_best_variants_per_metric(catalog):
    """The probe keeps the best of many shapes; calibration runs again each metric's two best
    plain variants (a close second can be the better one), never a paced one, never one that
    reached nothing."""
    from agentd.calibrator import reach, reach_candidates

    def entry(one, all_=None, field="bytes_per_s"):
        return {"one_thread": {field: one, "threads": 1}, "all_threads": None if all_ is None else {field: all_, "threads": 2}}
    doc = {"stressors": {
        "disk_seq_write_direct_1m_qd4": entry(2.6e9), "disk_seq_write_direct_1m_qd16": entry(2.5e9),
        "disk_seq_write_fdatasync": entry(0.9e9, 1.2e9), "disk_seq_write_direct_1m_qd4_pace75": entry(3.0e9),
        "net_tcp_loopback": entry(12e9, 24e9), "net_udp_sink": entry(0.0)}}
    names = reach_candidates(catalog, doc)
    assert {"disk_seq_write_direct_1m_qd4", "disk_seq_write_direct_1m_qd16", "net_tcp_loopback"} <= set(names)
    assert "disk_seq_write_fdatasync" not in names               # third for disk.write_Bps
    assert "disk_seq_write_direct_1m_qd4_pace75" not in names    # paced: never counts for reach
    assert "net_udp_sink" not in names                           # reached nothing
    # a repeated run of the second-best that beats the first counts
    doc["reach_runs"] = {"disk_seq_write_direct_1m_qd16": [entry(3.1e9)]}
    got, best = reach(catalog, doc, {"disk.write_Bps": 3.2e9})
    assert best["disk.write_Bps"]["stressor"] == "disk_seq_write_direct_1m_qd16"
    assert got["disk.write_Bps"] == round(3.1e9 / 3.2e9, 4)


def test_reach_pairs_compare_each_run_with_the_probe_right_after_it(catalog):
    """A host whose disk halves between two pairs: each pair's ratio is the catalog's best in
    that run over the probe right after it, so the drift cancels (best-of over best-of would
    say 0.5)."""
    from agentd.calibrator import reach_pairs

    def entry(v):
        return {"one_thread": {"bytes_per_s": v, "threads": 1}, "all_threads": None}
    # a pair holds every draw of the candidates (REACH_DRAWS runs): the best draw of any counts
    paired = [([("disk_seq_read_1m_qd16", entry(2.0e9)), ("disk_seq_read_1m_qd4", entry(1.5e9)),
                ("disk_seq_read_1m_qd16", entry(1.2e9))], {"disk.read_Bps": 2.1e9}),
              ([("disk_seq_read_1m_qd16", entry(0.9e9)), ("disk_seq_read_1m_qd4", entry(1.0e9))], {"disk.read_Bps": 1.05e9}),
              ([("disk_seq_read_1m_qd16", entry(1.4e9)), ("disk_seq_write_direct_1m_qd4_pace75", entry(9e9)),
                ("disk_seq_read_1m_qd16", entry(1.9e9))], {"disk.read_Bps": 2.0e9})]
    got = reach_pairs(catalog, paired)
    assert got["disk.read_Bps"] == [pytest.approx(2.0 / 2.1, abs=1e-4), pytest.approx(1.0 / 1.05, abs=1e-4),
                                    pytest.approx(0.95, abs=1e-4)]
    assert "disk.write_Bps" not in got          # a paced variant never counts
