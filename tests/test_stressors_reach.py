"""The kernels added for catalog reach (issue 13) move what they claim, measured outside the
runner where the kernel keeps a counter: voluntary context switches and run-queue waiting
(/proc/<pid>/task/*/{status,schedstat}), minor page faults (/proc/<pid>/stat), device
bytes and IOs (/proc/diskstats), page-cache residency (mincore), loopback bytes; and a paced
variant holds its rate steady per 100 ms window within ±10 %."""

from __future__ import annotations

import asyncio
import ctypes
import os
from pathlib import Path

import numpy as np
import pytest

from mimesys.errors import PlanError
from agentd.runner import RunnerConfig, WindowDone, start_runner
from agentd.schedule import compile_plan

from runner_helpers import SCRATCH, device_of, make_plan, net_bytes, runner_or_skip

CPU = (os.cpu_count() or 1) - 1
# Device, loopback and per-thread counters, paced rates and the host's peaks: another test's
# IO or CPU would land in them.
pytestmark = pytest.mark.serial


@pytest.fixture(autouse=True)
def _runner():
    runner_or_skip()


def _task_sum(pid: int) -> dict:
    """Summed over the runner's threads: voluntary/involuntary switches, run-queue wait ns."""
    out = {"vol": 0, "invol": 0, "wait_ns": 0, "cpu_ns": 0}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            status = (task / "status").read_text()
            on_cpu, wait, _ = map(int, (task / "schedstat").read_text().split())
        except (OSError, ValueError):
            continue
        out["vol"] += int(status.split("voluntary_ctxt_switches:")[1].split()[0])
        out["invol"] += int(status.split("nonvoluntary_ctxt_switches:")[1].split()[0])
        out["wait_ns"] += wait
        out["cpu_ns"] += on_cpu
    return out


def _minflt(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[7])


def _diskstats_full(dev: str) -> dict:
    for line in Path("/proc/diskstats").read_text().splitlines():
        f = line.split()
        if f[2] == dev:
            return {"r_ios": int(f[3]), "r_B": int(f[5]) * 512, "w_ios": int(f[7]), "w_B": int(f[9]) * 512}
    raise KeyError(dev)


def _resident_scratch(pid: int) -> int:
    """Bytes of the runner's unlinked scratch files that are in the page cache, by mincore(2)
    over each file reopened through /proc/<pid>/fd: the variant's own pages, whatever the rest
    of the host does to the cache meanwhile."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
    page, total = os.sysconf("SC_PAGE_SIZE"), 0
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        target = os.readlink(fd)
        if not (target.startswith(str(SCRATCH)) and target.endswith("(deleted)")):
            continue
        f = os.open(fd, os.O_RDONLY)
        try:
            size = os.fstat(f).st_size
            if size == 0:
                continue
            addr = libc.mmap(None, size, 1, 1, f, 0)        # PROT_READ, MAP_SHARED
            assert addr not in (None, ctypes.c_void_p(-1).value), os.strerror(ctypes.get_errno())
            vec = ctypes.create_string_buffer((size + page - 1) // page)
            try:
                assert libc.mincore(addr, size, vec) == 0, os.strerror(ctypes.get_errno())
            finally:
                libc.munmap(addr, size)
            total += sum(b & 1 for b in vec.raw) * page
        finally:
            os.close(f)
    return total


def _bracketed(catalog, names, fraction, window_s, probe, config, **kw):
    """Plan idle, names[0], idle, names[1], ..., idle on one thread; probe(pid) when each
    idle window's record arrives (inside that idle window), so consecutive probes bracket
    one stressor window. A last idle window keeps the threads alive for the last probe.
    Returns (probes by idle window, WindowDone by window, notes)."""
    plan = make_plan(catalog, {}, T=2 * len(names) + 2, K=1, window_s=window_s)
    for i, n in enumerate(names):
        plan.compositions[2 * i + 1, catalog.index(n), 0] = fraction
    probes, events = {}, {}

    async def go():
        handle = await start_runner(plan, config, **kw)
        async for ev in handle.events():
            if isinstance(ev, WindowDone):
                events[ev.window] = ev
                if ev.window % 2 == 0 and ev.window <= 2 * len(names):
                    probes[ev.window] = probe(handle.pid)
        ex = await handle.wait()
        assert ex.ok, ex
        return handle.notes
    notes = asyncio.run(go())
    return probes, events, notes


def test_futex_pingpong_switches_twice_per_round_trip(catalog):
    m = catalog.index("sched_futex_pingpong")
    probes, ev, _ = _bracketed(catalog, ["sched_futex_pingpong"], 0.8, 0.5, _task_sum, RunnerConfig(cpus=(CPU,)))
    trips = int(ev[1].ops[m, 0])
    switches = sum(probes[2][k] - probes[0][k] for k in ("vol", "invol"))
    assert trips / 0.4 > 10_000, f"only {trips / 0.4:.0f} round trips/s"
    # two switches per round trip: each side runs until it waits (voluntary) or until the
    # wake-up it sent preempts it (involuntary: the woken side was waiting longer)
    assert 1.8 * trips <= switches <= 2.2 * trips + 50, f"{switches} context switches for {trips} round trips"


def test_cpu_contend_puts_two_threads_on_the_cpu(catalog):
    m = catalog.index("cpu_contend_2x")
    probes, ev, _ = _bracketed(catalog, ["cpu_contend_2x"], 0.8, 0.5, _task_sum, RunnerConfig(cpus=(CPU,)))
    ran = ev[1].ran_ns[m, 0]
    d = {k: probes[2][k] - probes[0][k] for k in probes[0]}
    assert ev[1].ops[m, 0] > 0
    # two runnable threads on one CPU: each waits about as long as the other runs, so the
    # process's run-queue waiting is about the segment's length (one CPU's worth)
    assert d["wait_ns"] >= 0.6 * ran, f"run-queue wait {d['wait_ns'] / 1e6:.0f} ms in a {ran / 1e6:.0f} ms segment"
    assert d["invol"] >= 10, f"only {d['invol']} involuntary switches"
    # still one CPU: the helper spins only inside the segment
    assert d["cpu_ns"] <= 1.1 * ran + 20e6, f"{d['cpu_ns'] / 1e6:.0f} ms CPU for a {ran / 1e6:.0f} ms segment"


def test_page_fault_churn_faults_once_per_op(catalog):
    m = catalog.index("mem_page_fault_churn")
    probes, ev, _ = _bracketed(catalog, ["mem_page_fault_churn"], 0.8, 0.5, _minflt, RunnerConfig(cpus=(CPU,)))
    ops = int(ev[1].ops[m, 0])
    faults = probes[2] - probes[0]
    assert ops / 0.4 > 50_000, f"only {ops / 0.4:.0f} faults/s"
    assert ev[1].bytes[m, 0] == 4096 * ops
    assert 0.95 * ops <= faults <= 1.05 * ops + 200, f"{faults} minor faults for {ops} reported"


def test_queue_depth_disk_kernels_reach_the_device(catalog):
    dev = device_of(SCRATCH)
    names = ["disk_seq_write_direct_1m_qd4", "disk_rand_write_4k_qd64", "disk_seq_read_1m_qd4",
             "disk_rand_read_4k_qd64", "disk_rand_read_4k", "disk_seq_write_direct_1m_sync2",
             "disk_seq_read_1m_sync2"]
    probes, ev, notes = _bracketed(catalog, names, 0.8, 0.5, lambda pid: _diskstats_full(dev),
                                   RunnerConfig(cpus=(CPU,), scratch_dir=SCRATCH))
    if any("O_DIRECT refused" in notes.get(n, "") for n in names):
        pytest.skip(f"O_DIRECT refused under {SCRATCH}: {notes}")
    assert not any("queue depth" in notes.get(n, "") for n in names), notes   # io_uring works here
    iops = {}
    for i, n in enumerate(names):
        m = catalog.index(n)
        d = {k: probes[2 * i + 2][k] - probes[2 * i][k] for k in probes[0]}
        ops, nbytes = int(ev[2 * i + 1].ops[m, 0]), int(ev[2 * i + 1].bytes[m, 0])
        assert ops > 0, n
        kind = "w" if "write" in n else "r"
        # O_DIRECT: every byte and every IO reaches the device (others add, never take away)
        assert d[f"{kind}_B"] >= 0.95 * nbytes, f"{n}: device moved {d[f'{kind}_B']} B, runner {nbytes} B"
        if "4k" in n:
            assert d[f"{kind}_ios"] >= 0.95 * ops, f"{n}: device {d[f'{kind}_ios']} IOs, runner {ops}"
        iops[n] = ops
    # 64 in flight beat one at a time on the same file size and block size
    assert iops["disk_rand_read_4k_qd64"] >= 1.5 * iops["disk_rand_read_4k"], iops


def test_synchronous_submitters_run_a_helper_per_plan_thread_and_count_its_work(catalog):
    """`threads = 2`: each plan thread's worker and one helper on its CPU keep a synchronous
    O_DIRECT write in flight each; the window reports both (whole 1 MiB writes; the device
    moving them is test_queue_depth_disk_kernels_reach_the_device), the segment ends on
    time, and the helper exists only for the variant's threads."""
    name = "disk_seq_write_direct_1m_sync2"
    m = catalog.index(name)
    plan = make_plan(catalog, {name: 0.5}, T=4, K=1, window_s=0.25)
    seen = {}

    async def go():
        handle = await start_runner(plan, RunnerConfig(cpus=(CPU,), scratch_dir=SCRATCH))
        seen["tasks"] = len(list(Path(f"/proc/{handle.pid}/task").iterdir()))
        windows = [ev async for ev in handle.events() if isinstance(ev, WindowDone)]
        assert (await handle.wait()).ok
        return windows, handle.notes
    windows, notes = asyncio.run(go())
    if "O_DIRECT refused" in notes.get(name, ""):
        pytest.skip(f"O_DIRECT refused under {SCRATCH}: {notes}")
    plain = make_plan(catalog, {"disk_seq_write_direct_1m_qd4": 0.5}, T=1, K=1, window_s=0.25)

    async def count_plain():
        handle = await start_runner(plain, RunnerConfig(cpus=(CPU,), scratch_dir=SCRATCH))
        n = len(list(Path(f"/proc/{handle.pid}/task").iterdir()))
        async for _ in handle.events():
            pass
        await handle.wait()
        return n
    baseline = asyncio.run(count_plain())
    assert seen["tasks"] == baseline + 1, f"{seen['tasks']} threads with {name}, {baseline} without"
    # A 125-ms segment of 1 MiB synchronous writes may see none complete in one window when the
    # shared VM's disk stalls (CI, 2026-12-07: one window of four had 0): counted over the run.
    assert sum(int(w.ops[m, 0]) for w in windows) >= len(windows), [int(w.ops[m, 0]) for w in windows]
    for w in windows:
        assert w.bytes[m, 0] == w.ops[m, 0] * (1 << 20)
        assert w.ran_ns[m, 0] - w.planned_ns[m, 0] < 25e6, f"segment overran by {(w.ran_ns[m, 0] - w.planned_ns[m, 0]) / 1e6} ms"


def _rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise KeyError("VmRSS")


def test_stream_copy_counts_like_stream_over_a_resident_256_mib(catalog):
    m = catalog.index("mem_stream_copy_256M")
    probes, ev, _ = _bracketed(catalog, ["mem_stream_copy_256M"], 0.8, 0.5, _rss, RunnerConfig(cpus=(CPU,)))
    ops, nbytes = int(ev[1].ops[m, 0]), int(ev[1].bytes[m, 0])
    assert nbytes == 16 * ops           # STREAM's count: one 8-byte read, one 8-byte write
    assert nbytes / 0.4 > 1e9, f"only {nbytes / 0.4 / 1e9:.2f} GB/s"
    # both 128 MiB arrays are resident (allocated and touched before the first window): the copy
    # runs from memory, not from a cache
    assert probes[2] >= 256 << 20, f"runner RSS {probes[2] >> 20} MiB"


def test_pagecache_rw_stays_in_the_page_cache(catalog):
    dev = device_of(SCRATCH)
    m = catalog.index("disk_pagecache_rw")
    # 0.8 s of the stressor: the 128 MiB file is written whole even when the VM is slow (0.4 s
    # moved 121 MiB once in CI's Debian stage)
    probes, ev, _ = _bracketed(catalog, ["disk_pagecache_rw"], 0.8, 1.0,
                               lambda pid: (_resident_scratch(pid), _diskstats_full(dev)),
                               RunnerConfig(cpus=(CPU,), scratch_dir=SCRATCH))
    nbytes = int(ev[1].bytes[m, 0])
    (_, d0), (r1, d1) = probes[0], probes[2]
    assert nbytes >= 128 << 20, f"only {nbytes >> 20} MiB moved"
    # the variant's own file (128 MiB) is in the page cache (its pages, not the host's Cached:
    # total, which other work shrinks meanwhile: it grew only 92 MiB once in CI); its re-reads
    # did not go to the device
    assert r1 >= 120 << 20, f"{r1 >> 20} MiB of the scratch file resident"
    assert d1["r_B"] - d0["r_B"] < 0.05 * nbytes, f"device read {(d1['r_B'] - d0['r_B']) >> 20} MiB"


@pytest.mark.parametrize("name,rate,counter", [
    ("net_tcp_loopback_pace50", 400e6, "lo"),
    ("disk_seq_write_direct_1m_qd4_pace50", 300e6, "disk"),
    ("mem_stream_triad_256M_pace25", 1.5e9, None),
])
def test_paced_variant_is_steady_per_100ms(catalog, name, rate, counter):
    """Ten full 100 ms windows of a paced variant: each window's bytes within ±10 % of the
    pace (one may lose more to hypervisor steal), and the device/interface counters agree with the runner over the whole run."""
    m = catalog.index(name)
    T = 10
    plan = make_plan(catalog, {name: 1.0}, T=T, K=1, window_s=0.1)
    dev = device_of(SCRATCH) if counter == "disk" else None
    read = {"lo": lambda: net_bytes("lo")[1], "disk": lambda: _diskstats_full(dev)["w_B"],
            None: lambda: 0}[counter]
    wins = []

    async def go():
        handle = await start_runner(plan, RunnerConfig(cpus=(CPU,), scratch_dir=SCRATCH, pace_Bps={name: rate}))
        c0 = read()
        async for ev in handle.events():
            if isinstance(ev, WindowDone):
                wins.append(ev)
        c1 = read()
        assert (await handle.wait()).ok
        return c1 - c0
    moved = asyncio.run(go())
    per = np.array([w.bytes[m, 0] / (w.ran_ns[m, 0] / 1e9) for w in wins]) / rate
    shown = f"{name}: per-100 ms rates / pace = {np.round(per, 3)}"
    # the pacer never runs ahead of the pace by more than one operation (IOs in flight count
    # as started: CI measured 4 MiB windows of 1.119 when they did not); on a shared VM the hypervisor can take a core for
    # part of one 100 ms window (CI measured one window of ten at 0.87 once) and the virtio disk
    # can stall a write for tens of ms (CI: one window of ten at 0.38, the nine others
    # 1.013-1.018), so one window may fall short, and the rest hold ±10 %
    assert np.all(per <= 1.10), shown
    assert np.sum(np.abs(per - 1) > 0.10) <= 1, shown
    assert abs(np.median(per) - 1) <= 0.03, shown
    total = sum(int(w.bytes[m, 0]) for w in wins)
    if counter:
        assert moved >= 0.95 * total, f"{name}: {counter} moved {moved} B, runner {total} B"


def test_paced_variant_without_calibration_is_refused(catalog):
    plan = make_plan(catalog, {"disk_seq_read_1m_qd4_pace75": 0.5}, T=1, K=1, window_s=0.1)
    with pytest.raises(PlanError, match="no calibration of disk_seq_read_1m_qd4.*mimesys-agent calibrate"):
        compile_plan(plan, catalog)
    with pytest.raises(PlanError, match="disk_seq_read_1m_qd4_pace75"):
        compile_plan(plan, catalog, pace_Bps={"net_tcp_loopback_pace50": 1e6})
    # with a rate, the runner gets it as the variant's pace_Bps parameter; unused ones get none
    sched = compile_plan(plan, catalog, pace_Bps={"disk_seq_read_1m_qd4_pace75": 123456.7,
                                                  "net_tcp_loopback_pace50": 1e6})
    text = sched.data.decode("latin-1")
    assert "pace_Bps=123457" in text and text.count("pace_Bps=") == 1
    # a plan without paced variants needs no calibration
    compile_plan(make_plan(catalog, {"disk_seq_read_1m_qd4": 0.5}, T=1, K=1, window_s=0.1), catalog)


@pytest.mark.parametrize("edit,msg", [
    ('pace = { base = "nope", fraction = 0.5 }', "pace base 'nope' is not a stressor listed before it"),
    ('pace = { base = "a", fraction = 1.5 }', r"pace fraction 1.5 must be a number in \(0, 1\)"),
    ('pace = { base = "a", fraction = 0.5, x = 1 }', "pace must be"),
])
def test_catalog_rejects_bad_pace(tmp_path, edit, msg):
    from mimesys.catalog import load_catalog
    from mimesys.errors import CatalogError
    p = tmp_path / "c.toml"
    p.write_text('[[stressor]]\nname = "a"\nkernel = "k"\nclass = "disk"\ndescription = "d"\n'
                 'params = { x = 1 }\n\n[[stressor]]\nname = "b"\nkernel = "k"\nclass = "disk"\n'
                 f'description = "d"\nparams = {{ x = 1 }}\n{edit}\n')
    with pytest.raises(CatalogError, match=msg):
        load_catalog(p)
    p.write_text(p.read_text().replace("params = { x = 1 }\n" + edit, "params = { x = 2 }\n" + edit.replace("nope", "a").replace("1.5", "0.5").replace(", x = 1", "")))
    with pytest.raises(CatalogError, match="kernel and params must equal"):
        load_catalog(p)


def test_paced_variants_share_their_base_scratch_file(catalog):
    """A base and its paced variants run the same kernel on the same file: the budget counts
    it once (128 MiB here, not 4 × 128 MiB) and the runner says so in scratch_bytes."""
    base = "disk_seq_write_direct_1m_qd4"
    names = [base] + [f"{base}_pace{p}" for p in (25, 50, 75)]
    plan = make_plan(catalog, {n: 0.2 for n in names}, T=1, K=1, window_s=0.1)

    async def go():
        handle = await start_runner(plan, RunnerConfig(cpus=(CPU,), scratch_dir=SCRATCH, scratch_budget_bytes=200 << 20,
                                                       pace_Bps={n: 1e8 for n in names[1:]}))
        async for _ in handle.events():
            pass
        assert (await handle.wait()).ok
        return handle.info
    info = asyncio.run(go())
    assert int(info["scratch_bytes"]) == 128 << 20, info


def test_queue_depth_readers_of_one_file_size_share_it():
    """disk_seq_read_1m_qd16 and disk_seq_read_1m_qd32 read one 32 MiB file (disk_aio.c shares
    a queue-depth kernel's file by size): the budget counts it once, so a plan with every disk
    variant still fits the default 1 GiB budget."""
    from mimesys.catalog import load_catalog
    catalog = load_catalog()
    names = ["disk_seq_read_1m_qd16", "disk_seq_read_1m_qd32"]
    plan = make_plan(catalog, {n: 0.2 for n in names}, T=1, K=1, window_s=0.1)

    async def go():
        handle = await start_runner(plan, RunnerConfig(cpus=(CPU,), scratch_dir=SCRATCH, scratch_budget_bytes=40 << 20))
        async for _ in handle.events():
            pass
        assert (await handle.wait()).ok
        return handle.info
    info = asyncio.run(go())
    assert int(info["scratch_bytes"]) == 32 << 20, info


def test_memory_probe_screens_four_shapes_and_confirms_the_best_two():
    """`--probe mem`: every shape screened (the streaming-store copy among them on x86-64: glibc's
    memcpy of 128 MiB stayed 1.5x below it on the development VM), the two best run again, and
    the peak is the best of those second runs, not of the screening."""
    import platform
    import subprocess
    r = subprocess.run([str(runner_or_skip()), "--probe", "mem", "--probe-seconds", "0.2"], capture_output=True,
                       text=True, timeout=60, env={**os.environ, "MIMESYS_PROBE_VERBOSE": "1"})
    assert r.returncode == 0, r.stderr
    shapes = [ln.split(None, 4) for ln in r.stderr.splitlines() if ln.startswith("shape mem.bw_Bps")]
    again = [ln.split(None, 4) for ln in r.stderr.splitlines() if ln.startswith("again mem.bw_Bps")]
    names = {f[4].split(" ", 1)[1] for f in shapes}
    assert {"memcpy", "copy loop", "read sum"} <= names and len(shapes) == 4, r.stderr
    if platform.machine() == "x86_64":
        assert "streaming-store copy" in names
        assert float(next(f[2] for f in shapes if f[4].endswith("streaming-store copy"))) > 1e9
    assert len(again) == 2
    peak = float(r.stdout.split()[2])
    assert peak == pytest.approx(max(float(f[2]) for f in again), rel=1e-6)
    # the two run again are the two best of the screening
    top2 = sorted(shapes, key=lambda f: -float(f[2]))[:2]
    assert {f[4] for f in again} == {f[4] for f in top2}
