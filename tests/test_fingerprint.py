"""Host fingerprint on the recorded VM tree, on the hand-written Intel uncore tree, and live."""

from __future__ import annotations

import json
from pathlib import Path

from agentd.fingerprint import cpuinfo_fields, host_fingerprint, parse_size, summary, with_calibration
from agentd.hostpaths import HostPaths

FIX = Path(__file__).parent / "fixtures"
VM = HostPaths(FIX / "vm/t0/proc", FIX / "vm/sys")


def test_fingerprint_of_the_recorded_vm():
    fp = host_fingerprint(VM, probe_pmu=False)
    json.dumps(fp)  # plain data: it travels in HDF5 attributes and msgpack
    c = fp["cpu"]
    assert c["vendor"] == "AuthenticAMD" and c["model"] == "AMD EPYC" and c["family"] == "25"
    assert (c["logical_cpus"], c["sockets"], c["physical_cores"], c["threads_per_core"]) == (2, 1, 2, 1)
    assert c["numa_nodes"] == 1 and c["hypervisor"] is True
    assert [(x["level"], x["type"], x["size_B"], x["shared_by_cpus"]) for x in fp["caches"]] == [
        (1, "Data", 32 << 10, 1), (1, "Instruction", 32 << 10, 1), (2, "Unified", 1 << 20, 1), (3, "Unified", 32 << 20, 2)]
    assert fp["llc_B"] == 32 << 20
    meminfo_kib = int((FIX / "vm/t0/proc/meminfo").read_text().split()[1])
    assert fp["memory"]["total_B"] == meminfo_kib * 1024
    assert fp["disks"] == [{"name": "vda", "size_B": 536870912 * 512, "rotational": True, "model": None}]
    assert fp["nics"] == [{"name": "eth0", "speed_Mbps": None, "mtu": 1400, "driver": "virtio_net"}]
    assert fp["kernel"]["release"].startswith("6.18")
    assert fp["pmu"]["hardware_events"] is None and fp["pmu"]["uncore_imc"] == 0
    assert fp["pmu"]["devices"] == ["breakpoint", "msr", "software", "tracepoint", "uprobe"]
    assert summary(fp).startswith("AMD EPYC, 1 socket(s) / 2 cores / 2 CPUs (VM), ")


def test_fingerprint_counts_uncore_pmus_of_the_intel_tree():
    fp = host_fingerprint(HostPaths(FIX / "vm/t0/proc", FIX / "intel_uncore/sys"), probe_pmu=False)
    assert fp["pmu"]["uncore_imc"] == 2 and fp["pmu"]["amd_umc"] == 0


def test_missing_sources_are_none_not_guesses(tmp_path):
    fp = host_fingerprint(HostPaths(tmp_path / "proc", tmp_path / "sys"), probe_pmu=False)
    assert fp["memory"]["total_B"] is None and fp["caches"] == [] and fp["disks"] == [] and fp["llc_B"] is None
    assert fp["cpu"]["model"] is None and fp["cpu"]["sockets"] is None
    assert "unknown CPU" in summary(fp) and "? GiB" in summary(fp)


def test_parsers():
    assert parse_size("32K") == 32768 and parse_size("2M") == 2 << 20 and parse_size("") is None
    arm = "processor\t: 0\nBogoMIPS\t: 50.00\nFeatures\t: fp asimd sve\nCPU implementer\t: 0x41\nCPU part\t: 0xd0c\n\n"
    f = cpuinfo_fields(arm)
    assert f["CPU implementer"] == "0x41" and "sve" in f["Features"]


def test_live_fingerprint_probes_the_pmu_and_merges_calibration():
    fp = with_calibration(host_fingerprint(), {"mem.bw_Bps": 1.0e10})
    assert fp["calibrated_peaks"] == {"mem.bw_Bps": 1.0e10}
    hw = fp["pmu"]["hardware_events"]
    assert hw == "available" or hw.startswith("perf_event_open(cpu-cycles, cpu ")
    assert fp["cpu"]["logical_cpus"] >= 1 and fp["memory"]["total_B"] > 0
