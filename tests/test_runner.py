"""mimesys-runner as a process: event stream, absolute window grid, stopping, dying with
its parent, scratch budget and refusals. Real runner binary, real signals."""

from __future__ import annotations

import asyncio
import gc
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from mimesys.errors import RunnerError
from agentd.runner import RunnerConfig, WindowDone, WindowStarted, start_runner

from runner_helpers import make_plan, runner_or_skip

ROOT = Path(__file__).resolve().parent.parent
CPUS = tuple(range(min(2, os.cpu_count() or 1)))


@pytest.fixture(autouse=True)
def _runner():
    runner_or_skip()


@pytest.mark.serial   # window starts against the grid: another test's CPU would make them late
def test_events_follow_the_absolute_window_grid(catalog):
    K, T, W = len(CPUS), 6, 0.2
    plan = make_plan(catalog, {"cpu_fp_poly": 0.3, "cpu_int_crc32": 0.2, "cache_memcpy_l1": 0.1},
                     T=T, K=K, window_s=W, seed=3)

    async def go():
        handle = await start_runner(plan, RunnerConfig(cpus=CPUS))
        events = [ev async for ev in handle.events()]
        return handle, events

    handle, events = asyncio.run(go())
    kinds = [type(e).__name__ for e in events]
    assert kinds == ["WindowStarted", "WindowDone"] * T + ["RunnerExit"], kinds
    assert events[-1].ok, events[-1]
    Wns = int(W * 1e9)
    starts = [e for e in events if isinstance(e, WindowStarted)]
    dones = [e for e in events if isinstance(e, WindowDone)]
    for i, (s, d) in enumerate(zip(starts, dones)):
        assert (s.window, s.repetition, d.window) == (i, 0, i)
        assert s.planned_start_ns == handle.t0_ns + i * Wns          # exact grid, no accumulation
        assert (d.thread_start_ns >= d.planned_start_ns).all()       # never early
        # segments are back to back inside the thread's span (a step preempted near the window
        # end can overrun it on a busy host, so the span, not W, is the bound)
        assert (d.ran_ns.sum(axis=0) <= d.thread_end_ns - d.thread_start_ns + 1000).all()
        assert d.ran_ns.shape == (len(catalog), K) and (d.ops[d.ran_ns > 200_000] > 0).all()
    # Timing precision is bench/runner_timing.py's job (this machine is shared, so overruns
    # from preemption are expected here). What must hold under any load: a segment is never
    # cut short, unless the thread's work was clipped at its window's end.
    for d in dones:
        for k in range(K):
            clipped = d.thread_end_ns[k] >= d.planned_start_ns + Wns - 1_000_000
            short = (d.planned_ns[:, k] > 0) & (d.ran_ns[:, k] < d.planned_ns[:, k] - 1_000_000)
            assert clipped or not short.any(), (d.window, k, d.ran_ns[:, k], d.planned_ns[:, k])


def threads_doing(pid: int) -> str:
    """Each thread's state and kernel wait channel, e.g. 'R -, D folio_wait_bit' (for failure messages)."""
    out = []
    try:
        for task in sorted(Path(f"/proc/{pid}/task").iterdir()):
            state = (task / "stat").read_text().rsplit(")", 1)[1].split()[0]
            out.append(f"{state} {(task / 'wchan').read_text() or '-'}")
    except OSError:   # a thread or the process went away while being read
        pass
    return ", ".join(out)


@pytest.mark.serial   # a 50 ms bound on stopping: another test's CPU would eat it
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_stops_within_50ms(catalog, tmp_path, sig):
    """Stopped = every stressor thread has ended (the runner's main thread is all that is
    left, or nothing): within 50 ms (500 ms where a thread is still in uninterruptible disk
    wait at 50 ms: no signal reaches it before the disk answers). The process itself is gone
    soon after; how soon depends on the memory the kernel must release (768 MiB of 4 KiB pages
    takes 66 ms to unmap on this VM, 3 ms as huge pages), so that bound is 1 s."""
    plan = make_plan(catalog, {"cpu_fp_poly": 0.4, "mem_stream_triad_256M": 0.3, "disk_seq_write_fdatasync": 0.2},
                     T=200, K=len(CPUS), window_s=0.5)

    def state(pid: int) -> tuple[int, str]:
        """(threads, process state); (0, 'X') once it is gone. Read from /proc directly, not
        through asyncio's child watcher, whose wake-up latency on a busy host is not the runner's."""
        try:
            threads = len(list(Path(f"/proc/{pid}/task").iterdir()))
            return threads, Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):   # gone (reaped) while being read
            return 0, "X"

    async def go():
        handle = await start_runner(plan, RunnerConfig(cpus=CPUS, scratch_dir=tmp_path))
        await asyncio.sleep(0.8)
        assert handle.proc.returncode is None
        assert state(handle.pid)[0] > len(CPUS)    # the workers are there to be stopped
        t = time.monotonic()
        handle.proc.send_signal(sig)
        stopped = exited = None
        late = ""   # what the threads were doing at the 50 ms mark, if still running
        while time.monotonic() - t < 2 and exited is None:
            threads, st = state(handle.pid)
            now = time.monotonic() - t
            if stopped is None and (threads <= 1 or st in ("Z", "X")):
                stopped = now
            if st in ("Z", "X"):
                exited = now
            if stopped is None and not late and now > 0.05:
                late = threads_doing(handle.pid)
            time.sleep(0.0005)
        rc = await handle.proc.wait()
        ex = await handle.wait()
        return rc, stopped, exited, ex, late

    rc, stopped, exited, ex, late = asyncio.run(go())
    assert (rc, ex.status) == (4, "stopped"), ex
    took = "more than 2 s" if stopped is None else f"{stopped * 1e3:.1f} ms"
    # a thread in uninterruptible sleep (D: the fdatasync stressor waiting on writeback) takes
    # no signal until the disk answers; seen once at 170 ms on CI's shared disk. That wait is
    # the kernel's, so it gets the disk's bound; every other case must stop within 50 ms.
    bound = 0.5 if any(t.startswith("D ") for t in late.split(", ")) else 0.05
    assert stopped is not None and stopped < bound, \
        f"stressor threads took {took} to stop; at 50 ms: {late}; {ex.stderr_tail}"
    assert exited is not None and exited < 1.0, f"stopped in {took} but the process was still there after {exited} s"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.serial   # gone within 1 s of its parent: another test's CPU would eat the bound
def test_dies_with_its_parent_and_leaves_nothing(catalog, tmp_path):
    """SIGKILL the agent-like parent mid-plan: within 1 s no runner thread, no scratch file."""
    plan_path = tmp_path / "plan.h5"
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    make_plan(catalog, {"cpu_fp_poly": 0.5, "disk_seq_write_fdatasync": 0.3, "disk_rand_read_4k": 0.1},
              T=100, K=len(CPUS), window_s=0.5).write(plan_path)
    parent_code = textwrap.dedent(f"""
        import asyncio, sys
        from mimesys.plan import Plan
        from agentd.runner import RunnerConfig, start_runner
        async def main():
            h = await start_runner(Plan.read({str(plan_path)!r}),
                                   RunnerConfig(cpus={CPUS!r}, scratch_dir={str(scratch)!r}))
            print(h.pid, flush=True)
            async for ev in h.events():
                pass
        asyncio.run(main())
    """)
    parent = subprocess.Popen([sys.executable, "-c", parent_code], stdout=subprocess.PIPE, text=True,
                              cwd=ROOT)
    try:
        pid = int(parent.stdout.readline())
        time.sleep(0.5)
        fds = [os.readlink(f) for f in Path(f"/proc/{pid}/fd").iterdir()]
        assert any(str(scratch) in f and "(deleted)" in f for f in fds), fds  # scratch files in use
        assert len(list(Path(f"/proc/{pid}/task").iterdir())) >= len(CPUS) + 2
        t = time.monotonic()
        parent.kill()
        parent.wait()
        gone = False
        while time.monotonic() - t < 1.0:
            try:
                state = Path(f"/proc/{pid}/status").read_text().split("State:")[1].split()[0]
                gone = state in ("Z", "X")   # a zombie has no threads and no open files left
            except (FileNotFoundError, ProcessLookupError, IndexError):
                gone = True
            if gone:
                break
            time.sleep(0.01)
        assert gone, f"runner {pid} still alive {time.monotonic() - t:.2f} s after its parent was killed"
        assert list(scratch.iterdir()) == []
        holders = []
        for proc in Path("/proc").iterdir():
            if proc.name.isdigit():
                try:
                    holders += [proc.name for f in (proc / "fd").iterdir() if str(scratch) in os.readlink(f)]
                except OSError:
                    pass
        assert holders == [], f"processes still hold scratch files: {holders}"
    finally:
        parent.kill()
        with __import__("contextlib").suppress(Exception):
            os.kill(pid, signal.SIGKILL)


def test_refusals_are_clear(catalog, tmp_path):
    disk = make_plan(catalog, {"disk_seq_read_direct": 0.5}, T=2, K=1, window_s=0.1)
    with pytest.raises(RunnerError, match=r"scratch space, over --scratch-budget 1 MiB"):
        asyncio.run(start_runner(disk, RunnerConfig(cpus=(0,), scratch_dir=tmp_path, scratch_budget_bytes=1 << 20)))
    with pytest.raises(RunnerError, match=r"not a directory"):
        asyncio.run(start_runner(disk, RunnerConfig(cpus=(0,), scratch_dir=tmp_path / "nope")))
    cpu = make_plan(catalog, {"cpu_fp_poly": 0.5}, T=2, K=1, window_s=0.1)
    with pytest.raises(RunnerError, match=r"cannot pin to CPU 4000"):
        asyncio.run(start_runner(cpu, RunnerConfig(cpus=(4000,))))


def refused_without_unhandled_errors(catalog, runner_script: str, tmp_path, match: str, **config) -> None:
    """start_runner with `runner_script` as the runner raises RunnerError matching `match`, and
    the event loop is left with no unhandled exception (Debian 12's Python 3.11.2 logs an
    unretrieved one as "Future exception was never retrieved", a traceback on stderr)."""
    runner = tmp_path / "runner.sh"
    runner.write_text(runner_script)
    runner.chmod(0o755)
    plan = make_plan(catalog, {"cpu_fp_poly": 0.5}, T=4000, K=1, window_s=0.1)   # > a pipe's 64 KiB
    unhandled = []

    async def go():
        asyncio.get_running_loop().set_exception_handler(lambda loop, context: unhandled.append(context))
        with pytest.raises(RunnerError, match=match):
            await start_runner(plan, RunnerConfig(cpus=(0,), binary=str(runner), **config), catalog=catalog)
        await asyncio.sleep(0.1)
        gc.collect()        # an unretrieved exception is reported when its future is collected
        await asyncio.sleep(0)

    asyncio.run(go())
    assert not unhandled, [c.get("message") for c in unhandled]


def test_a_runner_that_stops_reading_its_schedule_is_a_clear_refusal(catalog, tmp_path):
    """A runner that exits part way through reading the schedule breaks the pipe while the agent
    still has bytes to write: the runner's refusal, not an error of the agent's own. Found by
    tests/test_replay_fuzz.py on Debian 12's Python (a traceback on replay's stderr)."""
    refused_without_unhandled_errors(catalog, "#!/bin/sh\nhead -c 1000 >/dev/null\nexit 1\n", tmp_path,
                                     r"exited with status 1")


def test_a_runner_that_never_reads_its_schedule_times_out(catalog, tmp_path):
    t0 = time.monotonic()
    refused_without_unhandled_errors(catalog, "#!/bin/sh\nexec sleep 60\n", tmp_path,
                                     r"did not read its schedule within 0.5 s", setup_timeout_s=0.5)
    assert time.monotonic() - t0 < 10


def test_refuses_when_the_disk_lacks_room(catalog, tmp_path):
    small = tmp_path / "small"
    small.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(small)],
                      capture_output=True).returncode != 0:
        pytest.skip("cannot mount a small tmpfs here (needs root)")
    try:
        plan = make_plan(catalog, {"disk_seq_read_direct": 0.5}, T=2, K=1, window_s=0.1)
        with pytest.raises(RunnerError, match=r"has 64 MiB free; disk stressors need 64 MiB plus 256 MiB margin"):
            asyncio.run(start_runner(plan, RunnerConfig(cpus=(0,), scratch_dir=small)))
        assert list(small.iterdir()) == []
    finally:
        subprocess.run(["umount", str(small)])


def test_bad_schedule_bytes_are_rejected_by_the_runner():
    runner = runner_or_skip()
    p = subprocess.run([str(runner), "--schedule", "-"], input=b"MIMSCHD4" + b"\x04\x00\x00\x00" + b"\x00" * 10,
                       capture_output=True)
    assert p.returncode == 2
    assert b"truncated schedule" in p.stdout
    p = subprocess.run([str(runner), "--schedule", "-"], input=b"MIMSCHD3" + b"\x03\x00\x00\x00" + b"\x00" * 60,
                       capture_output=True)
    assert p.returncode == 2 and b"bad magic" in p.stdout          # a version-3 schedule is not read as 4


def test_a_hold_or_tail_out_of_range_is_refused(catalog):
    """The thread record's tail count and core busy hold are checked like every other field."""
    import struct
    import numpy as np
    from agentd.schedule import compile_plan
    runner = runner_or_skip()
    plan = make_plan(catalog, {"disk_rand_read_4k": 0.3, "cpu_int_crc32": 0.2}, T=1, K=1, window_s=0.1)
    plan.core_busy_target = np.full((1, 1), 0.5, np.float32)
    data = bytearray(compile_plan(plan, catalog).data)
    pos = _thread_window_at(data, len(catalog))
    assert struct.unpack_from("<HHI", data, pos) == (2, 1, 500_000)
    for patch, message in (((2, 3, 500_000), b"tail of 3 segments > 2 segments"),
                           ((2, 1, 1_000_001), b"core busy to hold 1000001 ppm > 1000000")):
        bad = bytearray(data)
        struct.pack_into("<HHI", bad, pos, *patch)
        p = subprocess.run([str(runner), "--schedule", "-"], input=bytes(bad), capture_output=True)
        assert p.returncode == 2 and message in p.stdout, p.stdout


def _thread_window_at(data: bytes, n_stressors: int) -> int:
    """Offset of window 0's first thread record in a compiled schedule (header, stressor table,
    repetition, window index and memory held before it)."""
    import struct
    pos = 64
    for _ in range(3 * n_stressors):                  # the stressor table: name, kernel, params
        pos += 2 + struct.unpack_from("<H", data, pos)[0]
    return pos + 16


def test_segment_durations_that_wrap_past_2_64_are_refused(catalog):
    """Issue 41, finding 10: the runner summed the segments and then compared the sum with the
    window, so 2^64-1 ns + 2 ns wrapped to 1 ns and passed; the runner then ran a segment of
    585 years."""
    import struct
    from agentd.schedule import compile_plan
    runner = runner_or_skip()
    plan = make_plan(catalog, {"cpu_fp_poly": 0.3, "cpu_int_crc32": 0.2}, T=1, K=1, window_s=0.1)
    data = bytearray(compile_plan(plan, catalog).data)
    pos = _thread_window_at(data, len(catalog))
    assert struct.unpack_from("<HH", data, pos) == (2, 0)
    struct.pack_into("<Q", data, pos + 8 + 2, 2**64 - 1)        # segment 0: (stressor <H, duration <Q)
    struct.pack_into("<Q", data, pos + 8 + 10 + 2, 2)           # segment 1
    p = subprocess.run([str(runner), "--schedule", "-"], input=bytes(data), capture_output=True, timeout=10)
    assert p.returncode == 2 and b"segments sum to more than the window 100000000 ns" in p.stdout, p.stdout


def test_an_allocation_refused_by_the_memory_budget_is_an_error_line(catalog):
    """Issue 41, finding 10: allocation results were not checked. 65535 segments in one
    thread-window make each worker's result ring 64 x 65535 x 40 B (~170 MB), over a 1 MiB
    budget: a clear refusal, not a write through NULL."""
    import struct
    from agentd.schedule import compile_plan
    runner = runner_or_skip()
    plan = make_plan(catalog, {"cpu_int_crc32": 0.2}, T=1, K=1, window_s=0.1)
    data = bytes(compile_plan(plan, catalog).data)
    pos = _thread_window_at(data, len(catalog))
    n = 65535
    crc = catalog.index("cpu_int_crc32")
    segs = struct.pack("<HQ", crc, 20_000_000) + struct.pack("<HQ", crc, 0) * (n - 1)
    bad = data[:pos] + struct.pack("<HHI", n, 0, 0xFFFFFFFF) + segs
    p = subprocess.run([str(runner), "--schedule", "-", "--cpus", "0", "--memory-budget", str(1 << 20)],
                       input=bad, capture_output=True, timeout=10)
    assert p.returncode == 3 and b"error out of memory for a worker's" in p.stdout, (p.returncode, p.stdout[-300:])


def test_unused_big_buffers_are_never_allocated(catalog):
    """mem_random_1G is in the catalog; a plan that does not use it must not pay for it."""
    plan = make_plan(catalog, {"cpu_fp_poly": 0.5}, T=3, K=1, window_s=0.2)

    async def go():
        handle = await start_runner(plan, RunnerConfig(cpus=(0,)))
        status = Path(f"/proc/{handle.pid}/status").read_text()
        await handle.wait()
        return status

    status = asyncio.run(go())
    rss_kib = int(status.split("VmRSS:")[1].split()[0])
    assert rss_kib < 64 * 1024, f"runner RSS {rss_kib} KiB for a CPU-only plan"


def test_find_runner_honours_the_environment(tmp_path, monkeypatch):
    from agentd.runner import find_runner
    fake = tmp_path / "r"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    monkeypatch.setenv("MIMESYS_RUNNER", str(fake))
    assert find_runner() == fake
    monkeypatch.setenv("MIMESYS_RUNNER", str(tmp_path / "missing"))
    with pytest.raises(RunnerError, match="MIMESYS_RUNNER"):
        find_runner()


def test_warmup_and_repetitions_are_executed_in_order(catalog):
    plan = make_plan(catalog, {"cpu_int_crc32": 0.5}, T=2, K=1, window_s=0.1)

    async def go(report_warmup):
        handle = await start_runner(plan, RunnerConfig(cpus=(0,), report_warmup=report_warmup),
                                    repetitions=2, warmup_windows=1)
        return handle, [ev async for ev in handle.events() if isinstance(ev, WindowDone)]

    handle, shown = asyncio.run(go(True))
    assert [(d.repetition, d.window, d.index) for d in shown] == [(-1, 0, 0), (0, 0, 1), (0, 1, 2), (1, 0, 3), (1, 1, 4)]
    assert all(d.ops[0, 0] > 0 for d in shown)                  # the warm-up window did run
    assert shown[-1].planned_start_ns == handle.t0_ns + 4 * 100_000_000
    _, hidden = asyncio.run(go(False))
    assert [(d.repetition, d.window) for d in hidden] == [(0, 0), (0, 1), (1, 0), (1, 1)]


def test_the_runner_repeats_the_plan_and_draws_each_repetitions_order(catalog):
    """The schedule stores the plan windows once; the runner runs them `repetitions` times, in
    the stored order for repetition 0 and in an order of its own (from the seed) for every later
    one: durations repeat, orders differ, and the same seed gives the same orders."""
    from agentd.schedule import compile_plan, decode_schedule
    runner = runner_or_skip()
    names = ["cpu_int_crc32", "cpu_fp_poly", "cpu_simd_dist_128", "cache_memcpy_l1"]
    plan = make_plan(catalog, {n: 0.2 for n in names}, T=1, K=1, window_s=0.01)
    sched = compile_plan(plan, catalog, repetitions=30, seed=5)
    _, _, stored = decode_schedule(sched.data)

    def orders():
        p = subprocess.run([str(runner), "--schedule", "-", "--cpus", "0"], input=sched.data, capture_output=True,
                           timeout=60)
        assert p.returncode == 0, p.stderr
        runs, durations = {}, {}
        for line in p.stdout.decode().splitlines():
            f = line.split()
            if f[0] == "seg":
                runs.setdefault(int(f[1]), []).append(int(f[3]))
                durations.setdefault(int(f[1]), {})[int(f[3])] = int(f[4])
        return runs, durations
    runs, durations = orders()
    assert len(runs) == 30
    assert runs[0] == [m for m, _ in stored[0].segments[0]]              # repetition 0: as stored
    assert len({tuple(o) for o in runs.values()}) >= 8                   # 24 orders of 4, 30 repetitions
    assert all(d == durations[0] for d in durations.values())            # durations repeat exactly
    assert orders()[0] == runs                                           # deterministic from the seed


@pytest.mark.parametrize("placement", ["pinned", "free"])
def test_placement_pins_each_worker_or_lets_it_run_on_every_cpu(catalog, placement):
    """agent.placement: pinned workers may run on their own CPU only; free ones on every CPU of
    --cpus (the scheduler places them, as it places an application's threads), with no hold."""
    if len(CPUS) < 2:
        pytest.skip("needs two CPUs")
    plan = make_plan(catalog, {"cpu_fp_poly": 0.2}, T=3, K=2, window_s=0.1)

    async def go():
        handle = await start_runner(plan, RunnerConfig(cpus=CPUS, placement=placement))
        allowed = {}
        async for ev in handle.events():
            if isinstance(ev, WindowStarted) and not allowed:
                for task in Path(f"/proc/{handle.pid}/task").iterdir():
                    if int(task.name) != handle.pid:
                        status = (task / "status").read_text()
                        allowed[int(task.name)] = status.split("Cpus_allowed_list:")[1].split()[0]
        return allowed, dict(handle.info)

    allowed, infos = asyncio.run(go())
    every = ",".join(map(str, CPUS)) if len(CPUS) > 2 else f"{CPUS[0]}-{CPUS[-1]}"
    if placement == "pinned":
        # the two workers, one on each CPU (the runner's printer thread is not pinned)
        assert set(map(str, CPUS)) <= set(allowed.values()), allowed
        assert infos["hold"] == "proc-stat"
    else:
        assert set(allowed.values()) == {every}, allowed
        assert infos["hold"].startswith("off")


def test_an_unknown_placement_is_refused(catalog, tmp_path):
    from agentd.config import load_config
    from mimesys.errors import ConfigError
    bad = tmp_path / "agent.toml"
    bad.write_text('[agent]\nplacement = "spread"\n')
    with pytest.raises(ConfigError, match=r"agent.placement = 'spread'; expected one of pinned, free, yield"):
        load_config(bad)
    out = subprocess.run([str(runner_or_skip()), "--schedule", "-", "--placement", "spread"], capture_output=True,
                         text=True, stdin=subprocess.DEVNULL)
    assert out.returncode == 2 and "--placement spread: expected pinned, free or yield" in out.stderr


@pytest.mark.serial   # a process of its own keeps CPU 0 busy; another test's would count as one
def test_yield_leaves_a_cpu_another_process_keeps_busy_and_stays_on_its_own_alone(catalog):
    """agent.placement = "yield": a worker whose CPU another process keeps busy (here a spinning
    process pinned to it) leaves it for the rest of the window and gets the compute it planned
    from the CPU the plan leaves idle; pinned, it shares its CPU and gets about half. Alone on the
    host the same plan stays pinned (its per-core split and hold intact)."""
    if len(CPUS) < 2:
        pytest.skip("needs two CPUs")
    T, W = 6, 0.25
    plan = make_plan(catalog, {"cpu_fp_poly": 0.8}, T=T, K=1, window_s=W)   # one thread, on CPUS[0]

    def run(placement):
        async def go():
            handle = await start_runner(plan, RunnerConfig(cpus=CPUS, placement=placement))
            dones = [ev for ev in [ev async for ev in handle.events()] if isinstance(ev, WindowDone)]
            return dones, dict(handle.info)
        dones, info = asyncio.run(go())
        assert len(dones) == T
        return np.array([d.thread_cpu_ns[0] for d in dones]) / (0.8 * W * 1e9), info

    alone, info = run("yield")
    yielded = int(info["yielded"].split()[0])
    # alone it stays pinned in most windows; the shared VM's other sessions still wake on its CPU
    # now and then (ci-local once: 2 of 6), which is what yield is for
    assert info["yielded"].endswith(f"of {T} thread-windows") and yielded <= T // 2, info
    assert info["hold"] == "proc-stat"
    spin = subprocess.Popen([sys.executable, "-c", f"import os\nos.sched_setaffinity(0, {{{CPUS[0]}}})\nwhile True: pass"])
    try:
        time.sleep(0.2)
        pinned, _ = run("pinned")
        moved, info = run("yield")
    finally:
        spin.kill()
        spin.wait()
    assert int(info["yielded"].split()[0]) >= T - 1, info
    # the compute each window planned, as CPU time of the worker (the first window may start late)
    assert np.median(moved) >= 0.85, moved
    assert np.median(pinned) <= 0.7, pinned
    assert np.median(alone) >= 0.85, alone


def _yielded_alone(plan, bound: int) -> tuple[int, int]:
    """(thread-windows a yield replay of `plan` left its CPU in, thread-windows), alone on the host:
    the first of two tries within `bound`, else the second. The shared VM's other work now and then
    keeps a CPU for a few ms in one try (bench/yield_alone.py: 0-6 of 16, mean 1); a rule that
    counts what it should not moves the workers in every try (16 of 16 before d6af550)."""
    async def go():
        handle = await start_runner(plan, RunnerConfig(cpus=CPUS, placement="yield"))
        dones = [ev for ev in [ev async for ev in handle.events()] if isinstance(ev, WindowDone)]
        return dones, dict(handle.info)
    for _ in range(2):
        dones, info = asyncio.run(go())
        assert len(dones) == plan.T
        yielded, of, total, _ = info["yielded"].split()
        assert of == "of", info
        if int(yielded) <= bound:
            break
    return int(yielded), int(total)


@pytest.mark.serial   # counts the windows a worker leaves its CPU: another test's CPU would make it leave
def test_yield_does_not_leave_a_cpu_its_own_helper_thread_shares(catalog):
    """cpu_contend_2x keeps a second thread of its own runnable on the worker's CPU: the worker
    waits on the run queue about half the time, which is the plan, not a neighbour. Alone on the
    host, yield keeps it pinned (before, it left its CPU in every window, and the replays of plans
    with such kernels lost their per-core split)."""
    if len(CPUS) < 2:
        pytest.skip("needs two CPUs")
    T = 6
    yielded, total = _yielded_alone(make_plan(catalog, {"cpu_contend_2x": 0.8}, T=T, K=1, window_s=0.25), T // 2)
    # as alone above: the shared VM's other sessions may still wake on its CPU now and then
    assert total == T and yielded <= T // 2, (yielded, total)


@pytest.mark.serial   # counts the windows a worker leaves its CPU: another test's CPU would make it leave
def test_yield_does_not_leave_a_cpu_for_the_runners_own_memory_growth(catalog):
    """The runner's main thread grows the memory held at each window's start, touching every new
    page (here 160 MiB a window): with a worker on every CPU it runs beside one of them, which then
    waits on the run queue for the runner itself. Alone on the host, yield keeps the workers pinned
    (before, all 16 thread-windows yielded)."""
    if len(CPUS) < 2:
        pytest.skip("needs two CPUs")
    T = 8
    plan = make_plan(catalog, {"cpu_fp_poly": 0.8}, T=T, K=len(CPUS), window_s=0.25)
    plan.mem_held_B = np.arange(1, T + 1, dtype=np.float64) * (160 << 20)
    yielded, total = _yielded_alone(plan, T // 2)
    assert total == T * len(CPUS) and yielded <= T // 2, (yielded, total)
