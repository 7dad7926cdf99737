"""Core-count mapping and capacity normalization onto a target host."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mimesys.errors import ConfigError
from mimesys.metrics import Availability, MetricSpec
from mimesys.trace import Trace
from controller.importers import get
from controller.importers.base import ImportReport
from controller.mapping import HostProfile, MappingOptions, map_trace, parse_peaks

from conftest import ROOT, SHARED_TRACES


def _trace(per_core: list[list[float]], extra: dict | None = None, fp: dict | None = None) -> Trace:
    per_core = np.array(per_core, dtype=np.float32)
    names = [f"cpu.util.core{i}" for i in range(per_core.shape[1])]
    cols = [per_core]
    specs = [MetricSpec(n, "fraction") for n in names]
    for n, (unit, v) in (extra or {}).items():
        cols.append(np.array(v, dtype=np.float32)[:, None])
        specs.append(MetricSpec(n, unit))
    return Trace(np.concatenate(cols, axis=1), specs, host_fingerprint=fp or {})


def _host(cpus=2, peaks=None, schema=None):
    return HostProfile(cpus, peaks or {}, tuple(schema) if schema else None, {"cpus": cpus}, "test")


def test_preserve_total_spreads_and_caps_demand():
    # 4 source cores; window 0 demand 1.0 core -> 0.5 on each of 2 cores; window 1 demand 3.0 -> capped at 1.0
    tr = _trace([[0.25, 0.25, 0.25, 0.25], [1.0, 1.0, 0.5, 0.5]])
    rep = ImportReport()
    out = map_trace(tr, _host(2), MappingOptions("preserve-total"), rep)
    assert out.column("cpu.util.core0") == pytest.approx([0.5, 1.0])
    assert out.column("cpu.util.core1") == pytest.approx([0.5, 1.0])
    assert out.column("cpu.util") == pytest.approx([0.5, 1.0])
    assert any("capped at 2 cores in 1 windows; 1.0 core-seconds" in why for _, why in rep.scaled)


def test_busiest_keeps_the_busiest_cores_in_order():
    tr = _trace([[0.1, 0.9, 0.0, 0.5], [0.1, 0.7, 0.0, 0.6]])
    rep = ImportReport()
    out = map_trace(tr, _host(2), MappingOptions("busiest"), rep)
    assert out.column("cpu.util.core0") == pytest.approx([0.9, 0.7])   # source core 1
    assert out.column("cpu.util.core1") == pytest.approx([0.5, 0.6])   # source core 3
    assert any("[1, 3]" in src for src, _ in rep.mapped)
    assert any("0.2 core-seconds" in why for _, why in rep.dropped)   # cores 0 and 2: 0.1+0.1+0+0


def test_fewer_source_cores_than_target():
    tr = _trace([[0.8], [0.4]])
    out = map_trace(tr, _host(4), MappingOptions("busiest"))
    assert np.allclose(out.values[:, :4], [[0.8, 0, 0, 0], [0.4, 0, 0, 0]])
    out = map_trace(tr, _host(4), MappingOptions("preserve-total"))
    assert out.column("cpu.util.core3") == pytest.approx([0.2, 0.1])


def test_capacity_normalization_lands_at_the_same_fraction():
    # source peak 40 GB/s, target 10 GB/s: 20 GB/s (50 %) -> 5 GB/s (50 %)
    tr = _trace([[0.5], [0.5]], {"mem.bw_Bps": ("B/s", [20e9, 4e9]), "disk.write_Bps": ("B/s", [1e6, 9e8])})
    rep = ImportReport()
    out = map_trace(tr, _host(1, {"mem.bw_Bps": 10e9, "disk.write_Bps": 5e8}),
                    MappingOptions(source_peaks={"mem.bw_Bps": 40e9}), rep)
    assert out.column("mem.bw_Bps") == pytest.approx([5e9, 1e9])
    # no source peak for disk: kept absolute, and the report counts windows above the target's peak
    assert out.column("disk.write_Bps") == pytest.approx([1e6, 9e8])
    assert any(m == "disk.write_Bps" and "1 of 2 windows exceed" in why for m, why in rep.scaled)


def test_fractions_become_bytes_per_second_and_per_core_from_total():
    tr = Trace(np.array([[0.5, 0.25], [0.1, 0.5]], np.float32),
               [MetricSpec("cpu.util", "fraction"), MetricSpec("mem.bw_frac", "fraction")],
               host_fingerprint={"cpus": 8})
    out = map_trace(tr, _host(2, {"mem.bw_Bps": 1e10}))
    assert out.column("mem.bw_Bps") == pytest.approx([2.5e9, 5e9])
    # 0.5 of 8 cores = 4 cores of demand on a 2-core host: capped at 1 each; 0.1 x 8 = 0.8 -> 0.4 each
    assert out.column("cpu.util.core1") == pytest.approx([1.0, 0.4])


def test_target_schema_decides_columns_missing_is_nan_and_reported():
    schema = [MetricSpec("cpu.util.core0", "fraction"), MetricSpec("cpu.util", "fraction"),
              MetricSpec("llc.miss_per_s", "1/s", Availability.UNSUPPORTED, "no PMU"),
              MetricSpec("mem.bw_Bps", "B/s")]
    tr = _trace([[0.5], [0.25]], {"perf.ctx_switches_per_s": ("1/s", [10, 20]), "mem.bw_Bps": ("B/s", [1, 2])})
    rep = ImportReport()
    out = map_trace(tr, _host(1, schema=schema), MappingOptions(), rep)
    assert out.names == ["cpu.util.core0", "cpu.util", "llc.miss_per_s", "mem.bw_Bps"]
    assert np.isnan(out.column("llc.miss_per_s")).all()
    assert out.metrics[2].availability is Availability.UNSUPPORTED
    assert ("llc.miss_per_s", "not in the source trace") in rep.missing
    assert any(src == "perf.ctx_switches_per_s" for src, _ in rep.dropped)


def test_host_profile_from_saved_info_and_fingerprint(tmp_path):
    info = {"simulated": True, "max_threads": 3, "fingerprint": {"calibrated_peaks": {"disk.read_Bps": 5e8}},
            "calibration": {"peaks": {"mem.bw_Bps": 1.4e10}},
            "schema": [MetricSpec(f"cpu.util.core{i}", "fraction").to_dict() for i in range(2)]}
    p = tmp_path / "info.json"
    p.write_text(json.dumps(info))
    h = HostProfile.from_file(p)
    assert h.cpus == 2 and h.peaks == {"disk.read_Bps": 5e8, "mem.bw_Bps": 1.4e10} and h.simulated
    p.write_text(json.dumps({"cpu": {"logical_cpus": 6}, "calibrated_peaks": {"net.tx_Bps": 1e9}}))
    h = HostProfile.from_file(p)
    assert h.cpus == 6 and h.schema is None and h.peaks == {"net.tx_Bps": 1e9}
    p.write_text("[1, 2]")
    with pytest.raises(ConfigError, match="expected a JSON object"):
        HostProfile.from_file(p)


def test_parse_peaks():
    assert parse_peaks(["mem.bw_Bps=1.4e10"]) == {"mem.bw_Bps": 1.4e10}
    with pytest.raises(ConfigError, match="METRIC=VALUE"):
        parse_peaks(["mem.bw_Bps"])
    with pytest.raises(ConfigError, match="unknown core strategy"):
        MappingOptions("spread")


@pytest.mark.skipif(not SHARED_TRACES.is_dir(), reason=f"shared traces directory {SHARED_TRACES} absent")
def test_real_20_core_trace_onto_2_cores():
    tr, rep = get("tacc_stats").load(SHARED_TRACES / "stats-num_vms_1_7.txt")
    src_demand = sum(tr.column(f"cpu.util.core{i}").astype(np.float64) for i in range(20))
    out = map_trace(tr, _host(2), MappingOptions("preserve-total"), rep)
    mapped = out.column("cpu.util.core0").astype(np.float64) + out.column("cpu.util.core1")
    ok = src_demand <= 2
    assert np.allclose(mapped[ok], src_demand[ok], rtol=1e-5)      # demand preserved where it fits
    assert (mapped[~ok] == pytest.approx(2.0))                      # capped where it does not
    from controller.evaluate.report import load_level
    assert out.provenance["source_cpu_util_mean"] == pytest.approx(float(np.mean(tr.column("cpu.util"))), rel=1e-5)
    assert load_level(out) == "low"   # 12.6 % of the 20-core source, although it fills 2 cores here


def test_single_target_disk_gets_the_totals():
    schema = [MetricSpec("cpu.util.core0", "fraction"), MetricSpec("disk.write_Bps", "B/s"),
              MetricSpec("disk.vda.write_Bps", "B/s"), MetricSpec("net.eth0.rx_Bps", "B/s"), MetricSpec("net.lo.rx_Bps", "B/s")]
    tr = _trace([[0.5], [0.25]], {"disk.write_Bps": ("B/s", [1e6, 2e6]), "net.rx_Bps": ("B/s", [5.0, 6.0])})
    out = map_trace(tr, _host(1, schema=schema))
    assert out.column("disk.vda.write_Bps") == pytest.approx([1e6, 2e6])
    assert out.column("net.eth0.rx_Bps") == pytest.approx([5.0, 6.0])
    assert np.isnan(out.column("net.lo.rx_Bps")).all()   # loopback is never the NIC total


def test_memory_bytes_scale_by_installed_memory():
    tr = _trace([[0.5], [0.5]], {"mem.used_B": ("B", [64e9, 32e9])}, fp={"memory": {"total_B": 128e9}})
    host = HostProfile(1, {}, None, {"memory": {"total_B": 24e9}}, "test")
    rep = ImportReport()
    out = map_trace(tr, host, MappingOptions(), rep)
    np.testing.assert_allclose(out.column("mem.used_B"), [12e9, 6e9], rtol=1e-6)   # half of memory stays half
    assert any(n == "mem.used_B" and "target memory" in why for n, why in rep.scaled)
    rep = ImportReport()
    out = map_trace(tr, _host(1), MappingOptions(), rep)   # target memory unknown: kept, and said
    np.testing.assert_allclose(out.column("mem.used_B"), [64e9, 32e9], rtol=1e-6)
    assert ("mem.used_B", "not scaled: installed memory unknown on the target host") in rep.scaled


@pytest.mark.skipif(not SHARED_TRACES.is_dir(), reason=f"shared traces directory {SHARED_TRACES} absent")
def test_tacc_stats_records_the_source_memory_size():
    tr, _ = get("tacc_stats").load(SHARED_TRACES / "stats-num_vms_1_7.txt")
    # First record, `mem` lines of NUMA nodes 1 and 0: MemTotal 82566752 + 82341048 KB
    # = 164907800 KiB = 168,865,587,200 B.
    assert tr.host_fingerprint["memory"]["total_B"] == 168_865_587_200
