"""Host fingerprint on the recorded VM tree, on the hand-written Intel uncore tree, and live."""

from __future__ import annotations

import json
from pathlib import Path

from agentd.fingerprint import cpuinfo_fields, host_fingerprint, parse_size, summary, with_calibration
from mimesys.hostpaths import HostPaths

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


def test_limits_read_the_cgroup_quota_and_block_throttles(tmp_path):
    """A constrained profile of a machine says what constrains it (cgroup v1 and v2 trees)."""
    from agentd.fingerprint import limits_section

    proc, sys_ = tmp_path / "proc", tmp_path / "sys"
    (proc / "self").mkdir(parents=True)
    (proc / "self" / "cgroup").write_text("7:blkio:/mimesys-b\n1:cpu,cpuacct:/mimesys-b\n0::/\n")
    cpu = sys_ / "fs/cgroup/cpu"
    (cpu / "mimesys-b").mkdir(parents=True)
    (cpu / "cpu.cfs_quota_us").write_text("-1\n")
    (cpu / "cpu.cfs_period_us").write_text("100000\n")
    (cpu / "mimesys-b" / "cpu.cfs_quota_us").write_text("120000\n")
    (cpu / "mimesys-b" / "cpu.cfs_period_us").write_text("100000\n")
    blk = sys_ / "fs/cgroup/blkio/mimesys-b"
    blk.mkdir(parents=True)
    (blk / "blkio.throttle.read_bps_device").write_text("254:0 52428800\n")
    (blk / "blkio.throttle.read_iops_device").write_text("254:0 800\n")
    lim = limits_section(HostPaths(proc, sys_))
    assert lim == {"cgroup": "v1", "cpu_quota_cpus": 1.2,
                   "block_throttles": {"254:0": {"read_Bps": 52428800, "read_iops": 800}}}

    (proc / "self" / "cgroup").write_text("0::/b\n")
    root = sys_ / "fs/cgroup"
    (root / "cgroup.controllers").write_text("cpu io\n")
    (root / "b").mkdir()
    (root / "b" / "cpu.max").write_text("50000 100000\n")
    (root / "b" / "io.max").write_text("254:0 rbps=1000 wbps=max riops=max wiops=20\n")
    lim = limits_section(HostPaths(proc, sys_))
    assert lim == {"cgroup": "v2", "cpu_quota_cpus": 0.5,
                   "block_throttles": {"254:0": {"read_Bps": 1000, "write_iops": 20}}}
    (proc / "self" / "cgroup").write_text("")
    assert limits_section(HostPaths(proc, sys_)) == {"cgroup": None, "cpu_quota_cpus": None, "block_throttles": {}}


def test_a_perf_refusal_is_not_other_hardware():
    """The same host probed by root (or the agent with CAP_PERFMON) and by a user: the user's
    "Permission denied" says nothing about the PMU, so a plan released there is not for other
    hardware; "available" vs "not supported" still is."""
    import errno

    from agentd.fingerprint import hardware_differences
    from agentd.perf.events import perf_error
    unsupported = str(perf_error(errno.ENOENT, "cpu-cycles", 0))
    denied = str(perf_error(errno.EACCES, "cpu-cycles", 0))
    seccomp = str(perf_error(errno.EPERM, "cpu-cycles", 0))
    base = {"cpu": {"model": "Intel(R) Xeon(R) Processor", "logical_cpus": 2}, "memory": {"total_B": 25 << 30}}

    def fp(hw):
        return {**base, "pmu": {"hardware_events": hw}}
    assert "Permission denied" in denied and "No such file" in unsupported
    for refused in (denied, seccomp):
        assert hardware_differences(fp(unsupported), fp(refused)) == []
        assert hardware_differences(fp(refused), fp("available")) == []
    assert hardware_differences(fp("available"), fp(unsupported)) == [
        f"pmu.hardware_events: available (plan) vs {unsupported} (here)"]
    assert hardware_differences({**fp(denied), "cpu": {"model": "other", "logical_cpus": 2}}, fp(unsupported)) == [
        "cpu.model: other (plan) vs Intel(R) Xeon(R) Processor (here)"]
