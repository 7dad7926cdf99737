"""The perf_event binding: ABI layout, the read-format parser on recorded bytes, typed errors,
counter groups through the real syscall (software events work on this VM), and sysfs PMU
resolution on hand-written Intel/AMD uncore trees."""

from __future__ import annotations

import ctypes
import errno
import json
import math
import mmap
import os
import struct
import time
from pathlib import Path

import pytest

from mimesys.hostpaths import HostPaths
from agentd.perf import abi
from agentd.perf.events import (GROUP_READ_FORMAT, HW_CPU_CYCLES, SW_CONTEXT_SWITCHES, SW_CPU_MIGRATIONS,
                                SW_PAGE_FAULTS, CounterGroup, EventSpec, PerfEventError, PerfPermissionError,
                                PerfUnsupportedError, perf_error, probe_event)
from agentd.perf.pmu import (PmuFormatError, encode, list_pmus, load_pmu, parse_format, parse_terms, place_bits,
                             resolve_event)
from agentd.perf.readformat import ReadFormatError, parse_read, read_size, scaled_delta

from conftest import needs_perf

FIX = Path(__file__).parent / "fixtures"
READS = json.loads((FIX / "perf" / "reads.json").read_text())
INTEL = HostPaths(FIX / "vm" / "t0" / "proc", FIX / "intel_uncore" / "sys")
AMD = HostPaths(FIX / "vm" / "t0" / "proc", FIX / "amd_umc" / "sys")




# -- ABI ----------------------------------------------------------------------
def test_attr_layout_matches_the_uapi_header():
    assert ctypes.sizeof(abi.perf_event_attr) == 136
    offsets = {name: getattr(abi.perf_event_attr, name).offset for name, _ in abi.perf_event_attr._fields_}
    assert offsets["config"] == 8 and offsets["read_format"] == 32 and offsets["flags"] == 40
    assert offsets["config1"] == 56 and offsets["config2"] == 64 and offsets["config3"] == 128


def test_syscall_and_ioctl_numbers_per_architecture():
    assert abi.syscall_nr("x86_64") == 298 and abi.syscall_nr("aarch64") == 241 and abi.syscall_nr("riscv64") == 241
    with pytest.raises(OSError, match="unknown for architecture 'vax'"):
        abi.syscall_nr("vax")
    assert abi._ioc("read", ord("$"), 7, 8, "x86_64") == 0x80082407     # PERF_EVENT_IOC_ID
    assert abi._ioc("read", ord("$"), 7, 8, "ppc64le") == 0x40082407    # powerpc direction bits
    assert abi._ioc("none", ord("$"), 0, 0, "x86_64") == 0x2400         # PERF_EVENT_IOC_ENABLE


# -- read format: recorded bytes ---------------------------------------------
def test_parse_recorded_group_read_bytes():
    rec = READS["sw_group_cpu1"]
    assert rec["read_format"] == GROUP_READ_FORMAT
    r0, r1 = (parse_read(bytes.fromhex(rec[k]), rec["read_format"]) for k in ("t0", "t1"))
    assert r0.ids == r1.ids == tuple(rec["ids"])
    assert len(r1.values) == 3
    # Read 1 s apart: time_enabled advanced by ~1 s, software events always run.
    assert 0.9e9 < r1.time_enabled - r0.time_enabled < 1.5e9
    assert r1.time_running == r1.time_enabled
    assert all(b >= a for a, b in zip(r0.values, r1.values))
    assert r1.values[0] > r0.values[0]  # some context switches happened on cpu 1 in a second


def test_parse_recorded_single_read_bytes():
    rec = READS["cpu_clock_single"]
    r = parse_read(bytes.fromhex(rec["t0"]), rec["read_format"])
    assert len(r.values) == 1 and r.ids == ()
    assert r.time_enabled >= r.time_running > 0
    assert 0.1e9 < r.values[0] < 1e9  # cpu-clock counts nanoseconds: ~0.2 s


def test_parse_all_read_format_combinations():
    for rf in range(32):
        n = 3 if rf & abi.PERF_FORMAT_GROUP else 1
        words = list(range(100, 100 + read_size(rf, n) // 8))
        if rf & abi.PERF_FORMAT_GROUP:
            words[0] = n
        r = parse_read(struct.pack(f"={len(words)}Q", *words), rf)
        assert len(r.values) == n
        assert (r.time_enabled is not None) == bool(rf & abi.PERF_FORMAT_TOTAL_TIME_ENABLED)
        assert (r.time_running is not None) == bool(rf & abi.PERF_FORMAT_TOTAL_TIME_RUNNING)
        assert len(r.ids) == (n if rf & abi.PERF_FORMAT_ID else 0)
        assert len(r.lost) == (n if rf & abi.PERF_FORMAT_LOST else 0)


def test_parse_rejects_truncated_bytes():
    rec = READS["sw_group_cpu1"]
    data = bytes.fromhex(rec["t1"])
    with pytest.raises(ReadFormatError, match="expected 72 bytes, got 64"):
        parse_read(data[:-8], rec["read_format"])
    with pytest.raises(ReadFormatError, match="not a whole number"):
        parse_read(data[:-3], rec["read_format"])


def test_multiplexing_scale_uses_window_deltas():
    # Counted 25 % of a 1 s window: 1000 events seen -> 4000 estimated.
    assert scaled_delta(5000, 6000, 10**9, 2 * 10**9, 10**8, 10**8 + 250_000_000) == pytest.approx(4000)
    assert scaled_delta(0, 10, 0, 100, 0, 100) == 10.0   # never multiplexed: exact
    assert math.isnan(scaled_delta(0, 0, 0, 100, 50, 50))  # did not run at all in the window: unknown, not 0
    assert math.isnan(scaled_delta(10, 5, 0, 100, 0, 100))  # counter went backwards


# -- errors --------------------------------------------------------------------
def test_errno_becomes_typed_error_with_hint(tmp_path):
    (tmp_path / "sys/kernel").mkdir(parents=True)
    (tmp_path / "sys/kernel/perf_event_paranoid").write_text("3\n")
    e = perf_error(errno.EACCES, "cpu-cycles", 2, tmp_path)
    assert isinstance(e, PerfPermissionError)
    assert str(e) == ("perf_event_open(cpu-cycles, cpu 2): Permission denied — kernel.perf_event_paranoid is 3; "
                      "system-wide counting needs CAP_PERFMON (or CAP_SYS_ADMIN) or paranoid <= 0")
    assert "seccomp" not in str(e)
    assert "SystemCallFilter= must allow perf_event_open, which is in @debug" in str(perf_error(errno.EPERM, "x", 0))
    for err in (errno.ENOENT, errno.EOPNOTSUPP):
        e = perf_error(err, "instructions", 0)
        assert isinstance(e, PerfUnsupportedError) and "not supported by this CPU/VM" in str(e)
    assert "LimitNOFILE" in str(perf_error(errno.EMFILE, "x", 0))


def test_hardware_event_on_this_host_fails_with_the_kernels_reason_or_counts():
    try:
        probe_event(HW_CPU_CYCLES, cpu=0)
    except PerfUnsupportedError as e:  # this VM: no PMU -> ENOENT
        assert e.errno in (errno.ENOENT, errno.EOPNOTSUPP, errno.ENODEV)
        assert os.strerror(e.errno) in str(e) and "cpu-cycles" in str(e)
    # (on a host with a PMU the open simply succeeds)


def test_bad_cpu_is_a_typed_error():
    with pytest.raises(PerfEventError) as e:
        probe_event(SW_CONTEXT_SWITCHES, cpu=4096)
    assert e.value.cpu == 4096 and e.value.errno in (errno.EINVAL, errno.ENODEV)


# -- counter groups through the real syscall ------------------------------------
@needs_perf
def test_counter_group_counts_page_faults_we_cause():
    os.sched_setaffinity(0, {0})
    try:
        with CounterGroup([SW_CONTEXT_SWITCHES, SW_CPU_MIGRATIONS, SW_PAGE_FAULTS], cpu=0) as g:
            a = g.read()
            # A fresh anonymous mapping, not bytearray: after earlier tests freed big buffers, malloc
            # may serve a bytearray from heap pages already faulted in, and nothing faults.
            buf = mmap.mmap(-1, 32 << 20)  # one fault per 4 KiB page touched
            for i in range(0, len(buf), 4096):
                buf[i] = 1
            b = g.read()
        assert g.fds == []  # closed on exit
    finally:
        os.sched_setaffinity(0, set(range(os.cpu_count() or 1)))
    assert len(a.ids) == 3 and a.ids == b.ids
    faults = scaled_delta(a.values[2], b.values[2], a.time_enabled, b.time_enabled, a.time_running, b.time_running)
    assert faults >= (32 << 20) // 4096 * 0.9  # the kernel may map a few pages ahead (fault-around)


@needs_perf
def test_counter_group_open_failure_closes_what_it_opened():
    before = len(os.listdir("/proc/self/fd"))
    with pytest.raises(PerfEventError):
        CounterGroup([SW_CONTEXT_SWITCHES, EventSpec("bogus", abi.PERF_TYPE_SOFTWARE, 999)], cpu=0).open()
    assert len(os.listdir("/proc/self/fd")) == before


# -- sysfs PMUs: hand-written Intel and AMD trees -----------------------------
def test_format_and_terms_parsing():
    assert parse_format("config:0-7,21\n") == ("config", [(0, 7), (21, 21)])
    assert parse_format("config1:0-31") == ("config1", [(0, 31)])
    assert place_bits(0x1FF, [(0, 7), (21, 21)]) == 0xFF | (1 << 21)
    with pytest.raises(PmuFormatError, match="does not fit"):
        place_bits(0x100, [(0, 7)])
    assert parse_terms("event=0x04,umask=0x03,edge") == [("event", 4), ("umask", 3), ("edge", 1)]
    with pytest.raises(PmuFormatError, match="cannot parse"):
        parse_format("bits 0 to 7", "format/event")


def test_intel_uncore_imc_cas_counts_resolve_to_the_documented_encoding():
    assert list_pmus(INTEL, "uncore_imc") == ["uncore_imc_0", "uncore_imc_1"]
    pmu = load_pmu(INTEL, "uncore_imc_1")
    assert pmu.type == 15 and pmu.cpus == (0, 18)
    rd = resolve_event(INTEL, pmu, "cas_count_read")
    wr = resolve_event(INTEL, pmu, "cas_count_write")
    assert (rd.spec.type, rd.spec.config) == (15, 0x0304)
    assert wr.spec.config == 0x0C04
    assert rd.bytes_per_count == pytest.approx(64.0) and wr.bytes_per_count == pytest.approx(64.0)


def test_amd_umc_cas_commands_encode_from_format_fields():
    pmu = load_pmu(AMD, "amd_umc_0")
    assert encode(pmu, {"event": 0x0A, "rdwrmask": 1}, "rd").config == 0x10A
    assert encode(pmu, {"event": 0x0A, "rdwrmask": 2}, "wr").config == 0x20A
    with pytest.raises(PmuFormatError, match="no format field 'umask'"):
        encode(pmu, {"umask": 1}, "x")


# -- fuzz: kernel-byte parsers fail only with their own error ------------------------
from hypothesis import given, settings, strategies as st


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200), st.integers(0, 31))
def test_parse_read_never_raises_anything_but_readformaterror(data, rf):
    try:
        r = parse_read(data, rf)
    except ReadFormatError:
        return
    assert len(data) == read_size(rf, len(r.values) if rf & abi.PERF_FORMAT_GROUP else 1)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300), st.one_of(st.none(), st.integers(0, 2**32 - 1)))
def test_netlink_stats_parser_never_raises_anything_unexpected(data, seq):
    from agentd.samplers.net import parse_stats_dump
    try:
        out, done = parse_stats_dump(data, seq)
    except (ValueError, OSError):
        return
    assert all(len(v) == 4 for v in out.values())
