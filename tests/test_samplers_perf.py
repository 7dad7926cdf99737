"""perf-based samplers: software events live, hardware/uncore paths on this VM (unsupported
with the kernel's reason), the uncore code path driven through the real syscall by a sysfs
tree whose PMU is the kernel's software PMU, and resctrl MBM on a fixture tree."""

from __future__ import annotations

import json
import math
import mmap
import os
import shutil
import struct
import time
from pathlib import Path

import pytest

from mimesys.errors import ConfigError
from mimesys.hostpaths import HostPaths
from mimesys.metrics import Availability
from agentd.perf.events import GROUP_READ_FORMAT
from agentd.perf.readformat import parse_read
from agentd.samplers import NoData, SamplerSet, SamplersConfig
from agentd.samplers.mem_bw import MemBandwidthSampler
from agentd.samplers.perf_hw import PerfHardwareSampler
from agentd.samplers.perf_sw import PerfSoftwareSampler

from conftest import needs_perf

FIX = Path(__file__).parent / "fixtures"
READS = json.loads((FIX / "perf" / "reads.json").read_text())


def hw_pmu_present() -> bool:
    return (Path("/sys/bus/event_source/devices/cpu").exists()
            or any(p.name.startswith("armv") for p in Path("/sys/bus/event_source/devices").iterdir()))


# -- software events ------------------------------------------------------------
@needs_perf
def test_perf_sw_counts_context_switches_and_page_faults_live():
    s = PerfSoftwareSampler(HostPaths())
    specs = s.probe()
    try:
        assert [m.name for m in specs] == ["perf.ctx_switches_per_s", "perf.migrations_per_s",
                                           "perf.page_faults_per_s"]
        assert all(m.available for m in specs)
        a, ta = s.read(), time.monotonic()
        for _ in range(200):
            time.sleep(0.0005)  # each sleep is at least one voluntary context switch
        buf = mmap.mmap(-1, 16 << 20)  # fresh pages (malloc may reuse faulted-in heap)
        for i in range(0, len(buf), 4096):
            buf[i] = 1
        b, tb = s.read(), time.monotonic()
    finally:
        s.close()
    out = PerfSoftwareSampler.derive(a, b, tb - ta)
    assert out["perf.ctx_switches_per_s"] * (tb - ta) >= 200
    assert out["perf.page_faults_per_s"] * (tb - ta) >= (16 << 20) // 4096 * 0.9
    assert out["perf.migrations_per_s"] >= 0


def test_perf_sw_derive_on_recorded_bytes():
    rec = READS["sw_group_cpu1"]
    r0, r1 = (parse_read(bytes.fromhex(rec[k]), GROUP_READ_FORMAT) for k in ("t0", "t1"))
    groups = (("perf.ctx_switches_per_s", "perf.migrations_per_s", "perf.page_faults_per_s"),)
    raw0 = {"groups": groups, "scale": ((1.0,) * 3,), "cpu1.g0": (r0.time_enabled, r0.time_running, *r0.values)}
    raw1 = {"groups": groups, "scale": ((1.0,) * 3,), "cpu1.g0": (r1.time_enabled, r1.time_running, *r1.values)}
    out = PerfSoftwareSampler.derive(raw0, raw1, 2.0)
    assert out["perf.ctx_switches_per_s"] == (r1.values[0] - r0.values[0]) / 2.0
    assert out["perf.page_faults_per_s"] == (r1.values[2] - r0.values[2]) / 2.0


# -- hardware events --------------------------------------------------------------
@pytest.mark.skipif(hw_pmu_present(), reason="this host has a hardware PMU")
def test_perf_hw_unsupported_on_this_vm_with_the_kernels_reason():
    s = PerfHardwareSampler(HostPaths())
    specs = s.probe()
    s.close()
    assert [m.name for m in specs] == ["perf.cycles_per_s", "perf.instructions_per_s", "llc.ref_per_s",
                                       "llc.miss_per_s"]
    for m in specs:
        assert m.availability is Availability.UNSUPPORTED
        assert m.reason.startswith("perf_event_open(") and "No such file or directory" in m.reason
    with pytest.raises(ConfigError, match=r"samplers\.perf_hw\.enabled = true, but this host cannot provide it: "
                                          r"perf_event_open\(cache-misses, cpu 0\): No such file or directory"):
        SamplerSet.from_config(SamplersConfig(enabled={"perf_hw": True}), HostPaths())


def test_perf_hw_derive_scales_multiplexed_groups():
    groups = (("perf.cycles_per_s", "perf.instructions_per_s"),)
    # cpu0 counted the whole window; cpu1 only half of it (multiplexed with another user).
    prev = {"groups": groups, "scale": ((1.0, 1.0),), "cpu0.g0": (0, 0, 0, 0), "cpu1.g0": (0, 0, 0, 0)}
    cur = {"groups": groups, "scale": ((1.0, 1.0),), "cpu0.g0": (10**9, 10**9, 3 * 10**9, 6 * 10**9),
           "cpu1.g0": (10**9, 5 * 10**8, 10**9, 10**9)}
    out = PerfHardwareSampler.derive(prev, cur, 1.0)
    assert out["perf.cycles_per_s"] == pytest.approx(3e9 + 2e9)
    assert out["perf.instructions_per_s"] == pytest.approx(6e9 + 2e9)
    # A CPU whose group never ran in the window makes the sum unknown (NaN), not short.
    cur["cpu1.g0"] = (10**9, 0, 0, 0)
    assert "perf.cycles_per_s" not in PerfHardwareSampler.derive(prev, cur, 1.0)


# -- memory bandwidth ---------------------------------------------------------------
@pytest.mark.skipif(Path("/sys/fs/resctrl/mon_data").exists(), reason="this host has resctrl")
def test_mem_bw_unsupported_on_this_vm_names_every_source():
    s = MemBandwidthSampler(HostPaths())
    specs = s.probe()
    s.close()
    assert [m.name for m in specs] == ["mem.bw_Bps", "mem.bw_read_Bps", "mem.bw_write_Bps"]
    r = specs[0].reason
    assert not specs[0].available
    assert "no uncore_imc PMU in /sys/bus/event_source/devices" in r
    assert "no amd_umc PMU" in r and "resctrl not mounted at /sys/fs/resctrl" in r


def test_mem_bw_intel_fixture_resolves_events_then_the_kernel_refuses_them_here():
    """The hand-written Skylake-SP tree resolves, then perf_event_open(type 14) fails on this
    VM: the reason is the kernel's, naming the PMU event and CPU."""
    s = MemBandwidthSampler(HostPaths(FIX / "vm/t0/proc", FIX / "intel_uncore/sys"), MemBandwidthSampler.Options("imc"))
    specs = s.probe()
    s.close()
    if specs[0].available:
        pytest.skip("this host has a PMU with type 14 that accepted the encoding")
    assert specs[0].reason.startswith("perf_event_open(uncore_imc_0/cas_count_read/, cpu 0): ")


def test_mem_bw_amd_fixtures(tmp_path):
    s = MemBandwidthSampler(HostPaths(FIX / "vm/t0/proc", FIX / "amd_umc/sys"), MemBandwidthSampler.Options("umc"))
    specs = s.probe()
    s.close()
    assert specs[0].available or "amd_umc_0/umc_cas_cmd.rd/" in specs[0].reason
    (tmp_path / "bus/event_source/devices/amd_df").mkdir(parents=True)
    s = MemBandwidthSampler(HostPaths(tmp_path, tmp_path), MemBandwidthSampler.Options("umc"))
    assert "amd_df is present, but its DRAM events are family-specific" in s.probe()[0].reason


def test_mem_bw_imc_derive_on_group_read_bytes():
    """Two IMC channels × two sockets, read-format bytes built from the documented layout:
    156 250 000 CAS reads in 1 s on one channel = 10 GB/s at 64 B per CAS."""
    def group_bytes(te, tr, rd, wr, ids=(1, 2)):
        return struct.pack("=7Q", 2, te, tr, rd, ids[0], wr, ids[1])

    groups = (("mem.bw_read_Bps", "mem.bw_write_Bps"),) * 2
    scale = ((64.0, 64.0),) * 2
    prev, cur = {"groups": groups, "scale": scale}, {"groups": groups, "scale": scale}
    for j in (0, 1):
        for cpu in (0, 18):
            r0 = parse_read(group_bytes(0, 0, 0, 0), GROUP_READ_FORMAT)
            busy = (j, cpu) == (0, 0)
            r1 = parse_read(group_bytes(10**9, 10**9, 156_250_000 if busy else 0, 15_625_000 if busy else 0),
                            GROUP_READ_FORMAT)
            prev[f"cpu{cpu}.g{j}"] = (r0.time_enabled, r0.time_running, *r0.values)
            cur[f"cpu{cpu}.g{j}"] = (r1.time_enabled, r1.time_running, *r1.values)
    out = MemBandwidthSampler.derive(prev, cur, 1.0)
    assert out["mem.bw_read_Bps"] == pytest.approx(10e9)
    assert out["mem.bw_write_Bps"] == pytest.approx(1e9)
    assert out["mem.bw_Bps"] == pytest.approx(11e9)


def soft_pmu_tree(root: Path) -> HostPaths:
    """A sysfs tree with an 'uncore_imc_0' whose type is the kernel's software PMU (1):
    cas_count_read = page-faults (config 2), cas_count_write = context-switches (config 3),
    Intel's scale and unit. It drives the whole uncore path through the real syscall."""
    p = root / "sys/bus/event_source/devices/uncore_imc_0"
    (p / "format").mkdir(parents=True)
    (p / "events").mkdir()
    (p / "type").write_text("1\n")
    (p / "cpumask").write_text("0\n")
    (p / "format/event").write_text("config:0-7\n")
    (p / "format/umask").write_text("config:8-15\n")
    for name, ev in (("cas_count_read", "event=0x02,umask=0x00"), ("cas_count_write", "event=0x03")):
        (p / "events" / name).write_text(ev + "\n")
        (p / "events" / f"{name}.scale").write_text("6.103515625e-5\n")
        (p / "events" / f"{name}.unit").write_text("MiB\n")
    return HostPaths(FIX / "vm/t0/proc", root / "sys")


@needs_perf
def test_mem_bw_uncore_path_end_to_end_through_the_syscall(tmp_path):
    s = MemBandwidthSampler(soft_pmu_tree(tmp_path))
    specs = s.probe()
    try:
        assert all(m.available for m in specs), specs
        assert s.source == "imc"
        os.sched_setaffinity(0, {0})
        a, ta = s.read(), time.monotonic()
        buf = mmap.mmap(-1, 16 << 20)  # fresh pages (malloc may reuse faulted-in heap)
        for i in range(0, len(buf), 4096):
            buf[i] = 1
        b, tb = s.read(), time.monotonic()
    finally:
        os.sched_setaffinity(0, set(range(os.cpu_count() or 1)))
        s.close()
    out = MemBandwidthSampler.derive(a, b, tb - ta)
    faults = out["mem.bw_read_Bps"] * (tb - ta) / 64.0  # 64 B "per CAS" = per page fault here
    assert faults >= (16 << 20) // 4096 * 0.9
    assert out["mem.bw_Bps"] == pytest.approx(out["mem.bw_read_Bps"] + out["mem.bw_write_Bps"])


def test_mem_bw_resctrl_mbm_on_a_fixture_tree(tmp_path):
    mon = tmp_path / "sys/fs/resctrl/mon_data"
    for d in ("mon_L3_00", "mon_L3_01"):
        (mon / d).mkdir(parents=True)
        (mon / d / "mbm_total_bytes").write_text("1000\n")
    s = MemBandwidthSampler(HostPaths(tmp_path / "proc", tmp_path / "sys"))
    specs = {m.name: m for m in s.probe()}
    assert s.source == "resctrl" and specs["mem.bw_Bps"].available
    assert specs["mem.bw_read_Bps"].reason == "resctrl MBM counts total bytes only (no read/write split)"
    a = s.read()
    (mon / "mon_L3_00/mbm_total_bytes").write_text(str(1000 + 3 * 10**9) + "\n")
    (mon / "mon_L3_01/mbm_total_bytes").write_text(str(1000 + 10**9) + "\n")
    b = s.read()
    assert MemBandwidthSampler.derive(a, b, 2.0) == {"mem.bw_Bps": 2e9}
    (mon / "mon_L3_01/mbm_total_bytes").write_text("Unavailable\n")
    with pytest.raises(NoData, match="Unavailable"):
        s.read()
    s.close()


def test_mem_bw_bad_source_option_is_a_config_error():
    with pytest.raises(ConfigError, match=r"samplers\.mem_bw: source 'dram' is not one of auto, imc, umc, resctrl"):
        SamplersConfig.from_dict({"mem_bw": {"source": "dram"}})


# -- contention probe ------------------------------------------------------------------
@pytest.mark.serial   # cache against DRAM latency: another test's memory traffic evicts the cache
def test_mem_latency_probe_is_off_by_default_and_sees_dram_beyond_llc():
    from agentd.samplers.probe_mem_latency import MemLatencyProbe, random_cycle
    assert "probe.mem_latency_ns" not in [m.name for m in SamplerSet.from_config(None, HostPaths()).schema()]
    nxt = random_cycle(1000, 3)
    seen, i = set(), 0
    for _ in range(1000):  # one cycle through every slot
        seen.add(i)
        i = int(nxt[i])
    assert i == 0 and len(seen) == 1000
    nxt = random_cycle(800, 3, 8)               # one slot per 64-byte line: a cycle through the 100 lines
    seen, i = set(), 0
    for _ in range(100):
        seen.add(i)
        i = int(nxt[i])
    assert i == 0 and seen == set(range(0, 800, 8))

    def median_latency(mib):
        p = MemLatencyProbe(HostPaths(), MemLatencyProbe.Options(buffer_mib=mib, loads_per_tick=2000))
        assert p.probe()[0].available
        vals = sorted(MemLatencyProbe.derive({}, p.read(), 1.0)["probe.mem_latency_ns"] for _ in range(9))
        p.close()
        return vals[4]

    # The last-level cache differs by machine (32 MiB on one VM of this kind, 480 MiB on
    # another): the DRAM case is 2× whatever this host has.
    llc = MemLatencyProbe(HostPaths(), MemLatencyProbe.Options()).llc_bytes() or (32 << 20)
    cache_resident = median_latency(1)               # 1 MiB fits any LLC
    dram = median_latency(max(64, 2 * llc >> 20))    # twice the LLC
    assert dram > cache_resident + 30, (dram, cache_resident, llc >> 20)


@needs_perf
def test_live_set_with_perf_replays_identically_from_msgpack():
    """Record = raw samples through the wire format; replay = the same derive."""
    import msgpack
    import numpy as np
    from agentd.samplers import RawSample, derive_values
    with SamplerSet.from_config(None, HostPaths()) as s:
        a = s.read()
        time.sleep(0.2)
        b = s.read()
        live = s.derive(a, b)
        schema = s.schema()
    names = [m.name for m in schema]
    assert not math.isnan(live[names.index("perf.ctx_switches_per_s")])
    a2, b2 = (RawSample.from_dict(msgpack.unpackb(msgpack.packb(x.to_dict()), raw=False)) for x in (a, b))
    assert np.array_equal(derive_values(schema, a2, b2), live, equal_nan=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to drop to an unprivileged user")
def test_unprivileged_system_wide_perf_is_permission_denied_with_the_paranoid_hint():
    """The same sampler run as 'nobody': the kernel refuses system-wide counting (unless
    perf_event_paranoid <= 0) and the metric says so, with the kernel's words."""
    import subprocess
    import sys
    paranoid = int(Path("/proc/sys/kernel/perf_event_paranoid").read_text())
    if paranoid <= 0:
        pytest.skip("perf_event_paranoid <= 0 lets everyone count system-wide")
    code = ("import os\n"  # import first: the interpreter's files may not be readable by nobody
            "from agentd.samplers.perf_sw import PerfSoftwareSampler\n"
            "from mimesys.hostpaths import HostPaths\n"
            "s = PerfSoftwareSampler(HostPaths())\n"
            "os.setgroups([]); os.setgid(65534); os.setuid(65534)\n"
            "m = s.probe()[0]\n"
            "print(m.availability.value); print(m.reason)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         cwd=Path(__file__).resolve().parent.parent)
    assert out.returncode == 0, out.stderr
    state, reason = out.stdout.strip().split("\n", 1)
    assert state == "permission_denied"
    assert reason.startswith("perf_event_open(context-switches, cpu 0): Permission denied")  # EACCES
    assert f"kernel.perf_event_paranoid is {paranoid}" in reason
