"""Each resource class does what it claims, measured with this machine's own counters:
per-thread CPU time (schedstat) and /proc/stat for CPU, /proc/diskstats for disk,
/sys/class/net/lo/statistics for network, the runner's resident memory for memory.

The machine these tests run on is shared (other jobs use both cores), so /proc/stat alone
cannot attribute a core's busy time to the runner. The CPU test therefore measures the
worker thread itself from outside the process (/proc/<pid>/task/<tid>/schedstat: ns on
CPU and ns spent runnable but waiting for the CPU) and requires that (a) on-CPU + waiting
time, less the overrun the runner itself reports (a step preempted across its deadline ends
late, and the thread wanted the CPU that long), is f ± 0.05 of the elapsed time: the
stressor demanded exactly its share; (b) on-CPU time is at most f + 0.05 and falls short
of f only by measured run-queue waiting; (c) /proc/stat shows the core at least f − 0.05
busy; (d) the runner's own per-thread CPU time agrees with the kernel's within 0.05.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from pathlib import Path

import numpy as np
import pytest

from agentd.runner import RunnerConfig, WindowDone, WindowStarted, start_runner

from runner_helpers import (SCRATCH, device_of, diskstats, make_plan, net_bytes, proc_stat_cpu, runner_or_skip,
                            thread_schedstat, worker_schedstat)

CPU = (os.cpu_count() or 1) - 1   # the last CPU: thread 0 of the single-thread plans
# Per-core CPU, diskstats, interface counters and window lateness: another test's work would
# land in them.
pytestmark = pytest.mark.serial


@pytest.fixture(autouse=True)
def _runner():
    runner_or_skip()


async def _run_with_probes(plan, config, probe):
    """Run `plan`; call probe(kind, event, handle) at each WindowStarted/WindowDone."""
    handle = await start_runner(plan, config)
    probe("ready", None, handle)
    async for ev in handle.events():
        if isinstance(ev, WindowStarted):
            probe("start", ev, handle)
        elif isinstance(ev, WindowDone):
            probe("done", ev, handle)
    ex = await handle.wait()
    assert ex.ok, ex
    return handle


def _interleaved_with_idle(catalog, names, fraction, window_s, read_counter, config):
    """Plan idle, names[0], idle, names[1], ..., idle on one thread; read the counter when each
    idle window's record arrives (the runner emits it at once, inside that idle window), so
    the reads before and after a stressor window bracket it whatever the event latency."""
    T = 2 * len(names) + 1
    plan = make_plan(catalog, {}, T=T, K=1, window_s=window_s)
    for i, n in enumerate(names):
        plan.compositions[2 * i + 1, catalog.index(n), 0] = fraction
    snaps = {"counter": {}, "ev": {}}

    def probe(kind, ev, handle):
        if kind == "done":
            snaps["ev"][ev.window] = ev
            if ev.window % 2 == 0:
                snaps["counter"][ev.window] = read_counter()
    snaps["notes"] = asyncio.run(_run_with_probes(plan, config, probe)).notes
    return plan, snaps


def _measure_cpu_fraction(catalog, f: float, T: int = 8, W: float = 0.25) -> dict:
    plan = make_plan(catalog, {"cpu_fp_poly": f}, T=T, K=1, window_s=W)
    marks, windows = {}, []

    # Measure from the start of window 0 to the start of window T-1 (the worker thread
    # exits after its last window, so the end mark must be taken while it still exists).
    def probe(kind, ev, handle):
        if kind == "start" and ev.window in (0, T - 1):
            marks[ev.window] = (time.monotonic_ns(), worker_schedstat(handle.pid), proc_stat_cpu(CPU))
        if kind == "done":
            windows.append(ev)
    asyncio.run(_run_with_probes(plan, RunnerConfig(cpus=(CPU,)), probe))
    (a_ns, a_sched, a_stat), (b_ns, b_sched, b_stat) = marks[0], marks[T - 1]
    elapsed = b_ns - a_ns
    # the worker is the thread that ran: largest on-CPU delta
    tid = max(b_sched, key=lambda t: b_sched[t][0] - a_sched.get(t, (0, 0))[0])
    return {
        "on_cpu": (b_sched[tid][0] - a_sched[tid][0]) / elapsed,
        "waiting": (b_sched[tid][1] - a_sched[tid][1]) / elapsed,
        "busy": (b_stat[0] - a_stat[0]) / max(1, b_stat[1] - a_stat[1]),
        "own": sum(int(w.thread_cpu_ns[0]) for w in windows[:T - 1]) / ((T - 1) * W * 1e9),
        # time the runner itself reports running past the plan (a step preempted across its
        # deadline ends late); the thread demanded the CPU for that long too
        "overrun": sum(int(w.ran_ns[:, 0].sum() - w.planned_ns[:, 0].sum()) for w in windows[:T - 1]) / elapsed,
    }


@pytest.mark.parametrize("f", [0.3, 0.7])
def test_cpu_stressor_fraction_matches_core_utilization(catalog, f):
    # Other jobs on this machine preempt the worker; a measurement in which the worker spent
    # more than 5 % of the time waiting for its CPU is repeated once and the
    # least disturbed one is judged. Every try is printed (pytest -s).
    tries = []
    for _ in range(2):
        tries.append(_measure_cpu_fraction(catalog, f))
        print(f"f={f}: " + ", ".join(f"{k} {v:.3f}" for k, v in tries[-1].items()))
        if tries[-1]["waiting"] <= 0.05:
            break
    r = min(tries, key=lambda r: r["waiting"])
    on_cpu, waiting, busy, own, overrun = r["on_cpu"], r["waiting"], r["busy"], r["own"], r["overrun"]
    msg = (f"f={f}: schedstat on-CPU {on_cpu:.3f}, run-queue wait {waiting:.3f}, runner's own thread CPU "
           f"{own:.3f}, runner-reported overrun {overrun:.3f}, /proc/stat cpu{CPU} busy {busy:.3f} "
           f"({len(tries)} tries)")
    # the stressor demanded exactly its share (plus any overrun the runner itself reports)
    assert abs(on_cpu + waiting - overrun - f) <= 0.05, msg
    assert f - 0.05 - waiting <= on_cpu <= f + 0.05, msg  # and got it, short only by measured waiting
    assert busy >= f - 0.05, msg                       # the core was at least that busy
    assert abs(own - on_cpu) <= 0.05, msg              # the runner's own accounting agrees with the kernel's


def test_idle_plan_uses_no_cpu(catalog):
    """An idle plan's runner sleeps: every thread wakes a few times per window (the window's
    start, the worker's done, the records written), never polls or spins."""
    T, W = 8, 0.25
    plan = make_plan(catalog, {}, T=T, K=1, window_s=W)
    marks = {}

    # From window 0's start to window T-2's record: an idle window's worker is done as soon as
    # it starts, so that record comes while the worker sleeps towards window T-1 and every
    # thread (the worker exits after the last window) can still be read.
    def probe(kind, ev, handle):
        if (kind, ev and ev.window) in (("start", 0), ("done", T - 2)):
            marks[kind] = (time.monotonic_ns(), thread_schedstat(handle.pid))
    asyncio.run(_run_with_probes(plan, RunnerConfig(cpus=(CPU,)), probe))
    (a_ns, a), (b_ns, b) = marks["start"], marks["done"]
    windows = (b_ns - a_ns) / (W * 1e9)
    on_cpu = {t: (b[t][0] - a.get(t, (0, 0, 0))[0]) / (b_ns - a_ns) for t in b}
    runs = {t: (b[t][2] - a.get(t, (0, 0, 0))[2]) / windows for t in b}
    msg = (f"over {windows:.1f} windows of {W} s, per thread: on-CPU share of a core "
           f"{ {t: round(v, 4) for t, v in on_cpu.items()} }, times run per window "
           f"{ {t: round(v, 1) for t, v in runs.items()} }")
    print(msg)
    # A thread that polls runs many times per window; one that spins never sleeps and holds the
    # CPU. Each wake costs a VM well under a millisecond (0.3-1.5 ms per window measured here,
    # steal and vCPU wake-up included), so under 2 % of a core: nothing a 1-s per-core sampler
    # reads above an idle host's own noise, and a fiftieth of a thread that spins.
    assert max(runs.values()) <= 4, msg
    assert sum(on_cpu.values()) < 0.02, msg


@pytest.mark.parametrize("name", ["sched_futex_pingpong", "cpu_contend_2x"])
def test_helper_threads_count_in_the_worker_cpu_time(catalog, name):
    """A kernel whose helper threads share the worker's CPU (futex partner, contending
    spinners) keeps that core busy for the whole segment: the runner's per-window CPU time
    counts the helpers too, as a compute kernel's would (the forward model takes a
    stressor's own-core share from it; the worker alone showed half). Compute and helper
    windows alternate on one thread, so both see the same neighbours on a shared host."""
    T, W = 10, 0.2
    plan = make_plan(catalog, {}, T=T, K=1, window_s=W)
    for i in range(T):
        plan.compositions[i, catalog.index("cpu_fp_poly" if i % 2 == 0 else name), 0] = 0.5
    windows = []

    def probe(kind, ev, handle):
        if kind == "done":
            windows.append(ev)
    asyncio.run(_run_with_probes(plan, RunnerConfig(cpus=(CPU,)), probe))
    share = {i % 2: [] for i in range(2)}
    for w in windows:
        share[w.window % 2].append(int(w.thread_cpu_ns[0]) / max(1, int(w.ran_ns[:, 0].sum())))
    compute, helped = float(np.mean(share[0])), float(np.mean(share[1]))
    # the worker alone would show about half of the compute kernel's share
    assert helped > 0.8 * compute, f"{name}: CPU per ns run {helped:.3f}, compute kernel {compute:.3f}"
    assert helped < 1.1, f"{name}: CPU per ns run {helped:.3f} > 1 (a helper counted twice?)"


def test_every_cpu_and_cache_stressor_does_work(catalog):
    names = [s.name for s in catalog.stressors if s.resource_class in ("cpu", "cache")]
    T = len(names)
    a = np.zeros((T, len(catalog), 1), np.float32)
    for t, n in enumerate(names):
        a[t, catalog.index(n), 0] = 0.5
    from mimesys.plan import Plan
    plan = Plan.from_catalog(a, catalog, window_s=0.1)
    windows = []
    handle = asyncio.run(_run_with_probes(plan, RunnerConfig(cpus=(CPU,)),
                                          lambda k, e, h: k == "done" and windows.append(e)))
    llc = handle.info["cache"].split("llc=")[1]
    index = sorted(Path("/sys/devices/system/cpu/cpu0/cache").glob("index*"))[-1]
    size = (index / "size").read_text().strip()
    assert int(llc) == int(size[:-1]) << {"K": 10, "M": 20}[size[-1]]   # LLC read from the host
    for t, n in enumerate(names):
        m = catalog.index(n)
        w = windows[t]
        assert w.ops[m, 0] > 0 and w.ran_ns[m, 0] > 0.02e9, n
        assert (w.ops[:, 0] > 0).sum() == 1, n   # nothing else ran


def test_memory_stressors_touch_their_footprint(catalog):
    """Resident memory grows by each big buffer, and reported bytes follow the kernels'
    per-op definitions (24 B per triad element, one 64 B line per random update)."""
    plan = make_plan(catalog, {}, T=3, K=1, window_s=0.4)
    names = ["mem_stream_triad_256M", "mem_random_1G", "mem_hashmap_512M"]
    for t, n in enumerate(names):
        plan.compositions[t, catalog.index(n), 0] = 0.6
    rss = {}

    def probe(kind, ev, handle):
        if kind == "ready":
            status = Path(f"/proc/{handle.pid}/status").read_text()
            rss["kib"] = int(status.split("VmRSS:")[1].split()[0])
        if kind == "done":
            rss.setdefault("windows", []).append(ev)
    asyncio.run(_run_with_probes(plan, RunnerConfig(cpus=(CPU,)), probe))
    footprint = (256 << 20) + (1 << 30) + (512 << 20)
    assert rss["kib"] * 1024 >= 0.95 * footprint, f"RSS {rss['kib'] >> 10} MiB < footprint {footprint >> 20} MiB"
    w_triad, w_rand, w_hash = rss["windows"]
    m = catalog.index("mem_stream_triad_256M")
    assert w_triad.bytes[m, 0] == 24 * w_triad.ops[m, 0]
    assert w_triad.bytes[m, 0] >= 256 << 20, "triad did not sweep its 256 MiB once in 0.24 s"
    m = catalog.index("mem_random_1G")
    assert w_rand.bytes[m, 0] == 64 * w_rand.ops[m, 0] and w_rand.ops[m, 0] > 1e4
    m = catalog.index("mem_hashmap_512M")
    assert w_hash.ops[m, 0] > 1e4 and w_hash.bytes[m, 0] >= 64 * w_hash.ops[m, 0] // 8


def _whole_disk(path: Path) -> str | None:
    """MAJ:MIN of the whole disk holding `path` (a partition's parent), or None."""
    st = os.stat(path)
    sysdev = Path(f"/sys/dev/block/{os.major(st.st_dev)}:{os.minor(st.st_dev)}")
    if not sysdev.exists():
        return None
    disk = sysdev.resolve().parent if (sysdev / "partition").exists() else sysdev.resolve()
    return (disk / "dev").read_text().strip()


def test_a_stalled_disk_does_not_hold_the_thread_past_its_segment(catalog):
    """The queue-depth kernels wait for their IOs in flight only up to the segment's end: a
    device that holds them (here a block throttle of 2 MB/s on 1 MiB direct writes, 4 in
    flight: each IO waits about half a second) leaves them in flight, and the thread moves
    on to its next segment on time. An unbounded drain held it about 2 s per segment."""
    blkio = Path("/sys/fs/cgroup/blkio")
    if os.geteuid() != 0 or not (blkio / "blkio.throttle.write_bps_device").exists():
        pytest.skip("needs root and the cgroup-v1 block throttle (/sys/fs/cgroup/blkio)")
    scratch = SCRATCH
    disk = _whole_disk(scratch)
    if disk is None:
        pytest.skip(f"{scratch} is not on a block device")
    group = blkio / f"mimesys-test-stall-{os.getpid()}"
    group.mkdir()
    W, T = 0.25, 6
    plan = make_plan(catalog, {}, T=T, K=1, window_s=W)
    plan.compositions[:, catalog.index("disk_seq_write_direct_1m_qd4"), 0] = 0.4
    plan.compositions[:, catalog.index("cpu_fp_poly"), 0] = 0.4
    windows = []

    def probe(kind, ev, handle):
        if kind == "ready":   # set up (scratch file filled) before the throttle applies
            (group / "cgroup.procs").write_text(str(handle.pid))
            (group / "blkio.throttle.write_bps_device").write_text(f"{disk} {2_000_000}")
        if kind == "done":
            windows.append(ev)
    try:
        asyncio.run(_run_with_probes(plan, RunnerConfig(cpus=(CPU,), scratch_dir=scratch, start_delay_ms=300),
                                     probe))
    finally:
        with contextlib.suppress(OSError):
            (group / "blkio.throttle.write_bps_device").write_text(f"{disk} 0")
        group.rmdir()
    w = catalog.index("disk_seq_write_direct_1m_qd4")
    over = [(int(e.ran_ns[w, 0]) - int(e.planned_ns[w, 0])) / 1e6 for e in windows]
    written = sum(int(e.bytes[w, 0]) for e in windows)
    assert written < 8 << 20, f"the throttle did not hold the writes ({written >> 20} MiB in {T * W} s)"
    assert max(over) < 25.0, f"disk segments overran by {over} ms"
    lateness = [(int(e.thread_start_ns[0]) - e.planned_start_ns) / 1e6 for e in windows]
    assert max(lateness) < 25.0, f"windows started late by {lateness} ms"


def test_disk_stressors_move_diskstats(catalog):
    scratch = SCRATCH
    dev = device_of(scratch)
    names = ["disk_seq_read_direct", "disk_rand_read_4k", "disk_readahead", "disk_seq_write_fdatasync",
             "disk_fallocate_punch"]
    for attempt in range(2):
        plan, snaps = _interleaved_with_idle(catalog, names, 0.8, 0.5, lambda: diskstats(dev),
                                             RunnerConfig(cpus=(CPU,), scratch_dir=scratch))
        # A shared VM's disk can stall for most of a window (CI: one 128 KiB read in 0.8 s, its
        # counter not yet moved): too few operations to compare anything, so measure once more.
        ops = [int(snaps["ev"][2 * i + 1].ops[catalog.index(n), 0]) for i, n in enumerate(names)]
        if min(ops) >= 8:
            break
    direct_ok = "disk_seq_read_direct" not in snaps["notes"]
    for i, n in enumerate(names):
        m = catalog.index(n)
        ev = snaps["ev"][2 * i + 1]
        (r0, w0), (r1, w1) = snaps["counter"][2 * i], snaps["counter"][2 * i + 2]
        reported = int(ev.bytes[m, 0])
        assert ev.ops[m, 0] > 0, n
        if n == "disk_seq_write_fdatasync":
            # buffered writes reach the device at each fdatasync (every 2 MiB); allow the unsynced tail
            assert w1 - w0 >= 0.5 * reported, f"{n}: device wrote {w1 - w0} B, runner wrote {reported} B"
        elif n == "disk_fallocate_punch":
            assert w1 - w0 > 0, f"{n}: fdatasync after fallocate wrote nothing to {dev}"
        else:
            # O_DIRECT reads and DONTNEED'd buffered reads both have to come from the device
            want = 0.8 if direct_ok or n == "disk_readahead" else 0.5
            assert r1 - r0 >= want * reported, f"{n}: device read {r1 - r0} B, runner read {reported} B"


def test_network_stressors_move_interface_counters(catalog):
    names = ["net_tcp_loopback", "net_udp_sink", "net_tcp_loopback_256k"]
    plan, snaps = _interleaved_with_idle(catalog, names, 0.7, 0.4, lambda: net_bytes("lo"),
                                         RunnerConfig(cpus=(CPU,), udp_sink="127.0.0.1:9"))
    # what TCP may still hold in socket buffers when the window closes (not yet on lo)
    in_flight = int(Path("/proc/sys/net/ipv4/tcp_wmem").read_text().split()[2]) + \
        int(Path("/proc/sys/net/ipv4/tcp_rmem").read_text().split()[2])
    for i, n in enumerate(names):
        m = catalog.index(n)
        reported = int(snaps["ev"][2 * i + 1].bytes[m, 0])
        (rx0, tx0), (rx1, tx1) = snaps["counter"][2 * i], snaps["counter"][2 * i + 2]
        assert reported > 1 << 20, f"{n}: only {reported} B sent"
        # every payload byte crosses lo (plus headers and whatever else uses lo)
        slack = in_flight if n.startswith("net_tcp_loopback") else 0
        assert tx1 - tx0 >= reported - slack, f"{n}: lo tx moved {tx1 - tx0} B, runner sent {reported} B"
        assert rx1 - rx0 >= reported - slack, f"{n}: lo rx moved {rx1 - rx0} B, runner sent {reported} B"


def _lo_packets() -> int:
    return int(Path("/sys/class/net/lo/statistics/tx_packets").read_text())


def test_request_sized_loopback_sends_many_packets_few_bytes(catalog):
    """net_tcp_rpc_128 (TCP_NODELAY, 128-byte sends) is the catalog's way to make loopback
    packets without loopback bytes, as a key-value server does: every send leaves as its own
    packet (TCP_NODELAY sees to it; on loopback the same thread's drain also acks each at once,
    so Nagle has nothing to hold back). lo's counter is host-wide: other traffic can only add
    packets, so the lower bound holds on a busy host too."""
    n = "net_tcp_rpc_128"
    plan, snaps = _interleaved_with_idle(catalog, [n], 0.7, 0.4, _lo_packets, RunnerConfig(cpus=(CPU,)))
    sends = int(snaps["ev"][1].bytes[catalog.index(n), 0]) // 128
    packets = snaps["counter"][2] - snaps["counter"][0]
    assert sends > 10_000, f"{n}: only {sends} sends in 0.28 s"
    assert packets >= 0.9 * sends, f"{n}: {packets} packets on lo for {sends} sends of 128 B (coalesced?)"


def test_every_composition_of_the_catalog_fits_the_default_scratch_budget(catalog, tmp_path):
    """A campaign may put every disk stressor in one plan; an agent with the default
    agent.scratch_budget_mib must not refuse it. The runner's own accounting says what the
    whole catalog needs (it refuses before writing anything when over budget)."""
    import re

    from agentd.config import AgentSection
    from mimesys.plan import Plan
    from agentd.runner import RunnerError
    runner_or_skip()
    M = len(catalog.stressors)
    a = np.zeros((M, M, 2), np.float32)
    for m in range(M):
        a[m, m, :] = 0.5
    plan = Plan.from_catalog(a, catalog, seed=0, window_s=0.05)
    pace = {catalog.stressors[i].name: 1e6 for i in catalog.paced()}

    async def need() -> int:
        try:
            h = await start_runner(plan, RunnerConfig(cpus=(0,), scratch_dir=tmp_path, scratch_budget_bytes=1,
                                                      pace_Bps=pace), seed=0)
        except RunnerError as e:
            found = re.search(r"need (\d+) MiB of scratch space", str(e))
            assert found, str(e)
            return int(found.group(1))
        await h.stop()
        raise AssertionError("a 1-byte scratch budget was accepted")
    mib = asyncio.run(need())
    assert 0 < mib <= AgentSection.scratch_budget_mib, \
        f"the catalog needs {mib} MiB of scratch, over the default budget {AgentSection.scratch_budget_mib} MiB"
