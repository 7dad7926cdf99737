"""Start mimesys-runner on a plan and turn its line records into events (asyncio).

    handle = await start_runner(plan, RunnerConfig(...), seed=..., repetitions=..., warmup_windows=...)
    async for event in handle.events():   # WindowStarted | WindowDone | RunnerExit
        ...
    await handle.stop()                    # SIGTERM, waits for the runner's clean exit, then SIGKILL

`start_runner` compiles the plan (agentd/schedule.py), starts the runner and returns once
the runner is set up and has fixed t0 (so a refused plan — no scratch room, no AVX2, a CPU
that cannot be pinned — raises RunnerError here with the runner's own message). Events
then arrive as the windows happen: WindowStarted at each boundary, WindowDone when every
thread has finished that window. Times are CLOCK_MONOTONIC ns, the clock of
time.monotonic_ns(). Warm-up windows are run but not reported unless
RunnerConfig.report_warmup is set (they then carry repetition -1).

The runner's stdout protocol is documented at the top of stressors/runner.c.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import AsyncIterator, Callable

import numpy as np

from mimesys.catalog import Catalog, load_catalog
from mimesys.errors import RunnerError
from mimesys.plan import Plan

from mimesys.hostpaths import online_cpus
from .schedule import CompiledSchedule, compile_plan

RUNNER_NAME = "mimesys-runner"
STOP_GRACE_S = 1.0          # after SIGTERM; the runner itself stops within ~50 ms
DEFAULT_SCRATCH_BUDGET = 2 << 30
DEFAULT_SCRATCH_DIR = "/var/tmp"


def find_runner() -> Path:
    """$MIMESYS_RUNNER, then the packaged binary, the source-tree build, the Debian path."""
    here = Path(__file__).resolve().parent
    env = os.environ.get("MIMESYS_RUNNER")
    if env:  # explicit: use it or fail, never silently run a different binary
        if Path(env).is_file() and os.access(env, os.X_OK):
            return Path(env)
        raise RunnerError(f"MIMESYS_RUNNER={env} is not an executable file")
    candidates = [
        here / "_bin" / RUNNER_NAME,
        here.parent / "stressors" / "build" / RUNNER_NAME,
        Path("/usr/lib/mimesys") / RUNNER_NAME,
    ]
    for c in candidates:
        if c.is_file() and os.access(c, os.X_OK):
            return c
    raise RunnerError(f"{RUNNER_NAME} not found (looked in {', '.join(map(str, candidates))}); "
                      f"build it with `make -C stressors` or reinstall the package")


@dataclass(frozen=True)
class RunnerConfig:
    binary: str | Path | None = None       # the mimesys-runner executable; None: find_runner()
    cpus: tuple[int, ...] | None = None    # thread k runs on cpus[k % len(cpus)]; None: online CPUs
    scratch_dir: str | Path | None = None  # None: /var/tmp (files are unlinked at creation)
    scratch_budget_bytes: int = DEFAULT_SCRATCH_BUDGET
    udp_sink: str = "127.0.0.1:9"          # HOST:PORT for net_udp_sink
    catalog_path: str | None = None        # None: the shipped catalog
    start_delay_ms: int = 30               # t0 = runner ready + this
    report_warmup: bool = False
    nice: int = 0                          # worker threads' nice value (< 0 needs CAP_SYS_NICE): a
                                           # lower value lets the plan hold its timing on a busy host
    placement: str = "pinned"              # agent.placement: "free" (threads move, no hold), "yield" (runner.c)
    setup_timeout_s: float = 300.0         # filling scratch files and big buffers takes a while
    memory_budget_bytes: int = 0           # the runner's private memory (RLIMIT_DATA); 0 = none
    memory_margin_bytes: int = 256 << 20   # MemAvailable the runner leaves to the rest of the host
    oom_score_adj: int = 1000              # under memory pressure the runner goes first
    # bytes/s per thread of each paced variant (calibrator.pace_rates); a plan that runs a
    # paced variant not in it is refused (PlanError)
    pace_Bps: dict | None = None


@dataclass(frozen=True)
class WindowStarted:
    repetition: int          # -1 for warm-up windows
    window: int              # plan window index
    start_ns: int            # when the runner observed the boundary (CLOCK_MONOTONIC)
    planned_start_ns: int    # t0 + index * W exactly
    index: int               # executed-window index (warm-up included)


@dataclass(frozen=True)
class WindowDone:
    repetition: int
    window: int
    start_ns: int            # earliest thread wake-up in this window
    end_ns: int              # latest thread end of work
    ran_ns: np.ndarray       # int64 [M, K] ns each stressor actually ran
    ops: np.ndarray          # int64 [M, K] operations completed
    bytes: np.ndarray        # int64 [M, K] bytes moved (kernel-specific meaning, see catalog)
    planned_ns: np.ndarray   # int64 [M, K] what the runner set out to run: compiled durations, a held
                             # tail as sized, IO shortened so it fits
    planned_start_ns: int
    thread_start_ns: np.ndarray  # int64 [K] each thread's wake-up
    thread_end_ns: np.ndarray    # int64 [K]
    thread_cpu_ns: np.ndarray    # int64 [K] CPU time each worker thread (and its kernels' helper
                                 # threads on its CPU) used in the window
    index: int
    held_B: int = 0          # memory the runner held resident in the window (Plan.mem_held_B)


@dataclass(frozen=True)
class RunnerExit:
    returncode: int
    status: str              # "done" | "stopped" | "error" | "killed"
    detail: str = ""
    stderr_tail: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "done"


Event = WindowStarted | WindowDone | RunnerExit


class _Records:
    """The runner's stdout protocol (stressors/runner.c): one record in, at most one event out.

    Apart from the process so the format can be read without a running runner; it also keeps
    what the runner declares about itself (t0, info, notes, its exit record)."""

    def __init__(self, M: int, K: int, report_warmup: bool):
        self.M, self.K = M, K
        self.report_warmup = report_warmup
        self.info: dict[str, str] = {}
        self.notes: dict[str, str] = {}      # stressor name → note (e.g. O_DIRECT fallback)
        self.t0_ns: int | None = None
        self.exit_status: tuple[str, str] | None = None
        self._cur: dict | None = None        # the window being assembled (None between windows)

    def parse(self, parts: list[str]) -> WindowStarted | WindowDone | None:
        """One stdout record, split into words; the event it completes, if any."""
        tag, cur = parts[0], self._cur
        M, K = self.M, self.K
        if tag == "start":
            i, rep, win, planned, observed = map(int, parts[1:6])
            self._cur = dict(ran=np.zeros((M, K), np.int64), ops=np.zeros((M, K), np.int64),
                             bytes=np.zeros((M, K), np.int64), planned=np.zeros((M, K), np.int64),
                             tstart=np.zeros(K, np.int64), tend=np.zeros(K, np.int64),
                             tcpu=np.zeros(K, np.int64))
            if rep >= 0 or self.report_warmup:
                return WindowStarted(rep, win, observed, planned, i)
        elif tag == "seg" and cur is not None:
            _, k, m, planned, ran, ops, nbytes = map(int, parts[1:8])
            cur["planned"][m, k] += planned
            cur["ran"][m, k] += ran
            cur["ops"][m, k] += ops
            cur["bytes"][m, k] += nbytes
        elif tag == "thread" and cur is not None:
            _, k, t_start, t_end, cpu = map(int, parts[1:6])
            cur["tstart"][k], cur["tend"][k], cur["tcpu"][k] = t_start, t_end, cpu
        elif tag == "done" and cur is not None:
            i, rep, win, planned, end, held = map(int, parts[1:7])
            self._cur = None
            if rep >= 0 or self.report_warmup:
                return WindowDone(rep, win, int(cur["tstart"].min()), end, cur["ran"], cur["ops"],
                                  cur["bytes"], cur["planned"], planned, cur["tstart"], cur["tend"],
                                  cur["tcpu"], i, held)
        elif tag == "ready":
            self.t0_ns = int(parts[1])
        elif tag == "info":
            self.info[parts[1]] = " ".join(parts[2:])
        elif tag == "note":
            self.notes[parts[1]] = " ".join(parts[2:])
        elif tag == "exit":
            self.exit_status = (parts[1], " ".join(parts[2:]))
        elif tag == "error":
            self.exit_status = ("error", " ".join(parts[1:]))
        return None

    def exit(self, rc: int, stderr_tail: str) -> RunnerExit:
        """How the run ended: the runner's own exit record, else what its status says."""
        if self.exit_status:
            status, detail = self.exit_status
        elif rc < 0:
            status, detail = "killed", f"killed by {signal.Signals(-rc).name}"
        else:
            status, detail = "error", f"exited with status {rc} without an exit record"
        return RunnerExit(rc, status, detail, stderr_tail)


def _setup_failure(ex: RunnerExit | None) -> str:
    """Why a runner that exited before it was ready did so: its own reason, else its status."""
    if ex and ex.detail:
        return f"{RUNNER_NAME} refused the plan: {ex.detail}"
    return (f"{RUNNER_NAME} exited during setup (status {ex.returncode if ex else '?'})"
            + (f": {ex.stderr_tail}" if ex and ex.stderr_tail else ""))


class RunnerHandle:
    """A running mimesys-runner: its process, from set-up to exit. Create with start_runner()."""

    def __init__(self, proc: asyncio.subprocess.Process, schedule: CompiledSchedule, catalog: Catalog,
                 config: RunnerConfig):
        self.proc = proc
        self.schedule = schedule
        self.catalog = catalog
        self.config = config
        self.window_ns = schedule.window_ns
        self._records = _Records(schedule.M, schedule.K, config.report_warmup)
        self.info = self._records.info
        self.notes = self._records.notes
        self._queue: asyncio.Queue = asyncio.Queue()
        self._stderr: deque[str] = deque(maxlen=20)
        self._ready = asyncio.get_running_loop().create_future()
        self._exit: RunnerExit | None = None
        self._reader = asyncio.create_task(self._read_stdout())
        self._err_reader = asyncio.create_task(self._read_stderr())

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def t0_ns(self) -> int | None:
        return self._records.t0_ns

    @property
    def exit(self) -> RunnerExit | None:
        return self._exit

    async def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        async for raw in self.proc.stderr:
            self._stderr.append(raw.decode(errors="replace").rstrip())

    async def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        try:
            async for raw in self.proc.stdout:
                parts = raw.decode(errors="replace").split()
                if not parts:
                    continue
                try:
                    ev = self._records.parse(parts)
                except (ValueError, IndexError):
                    # never let one unreadable record stop the stream (the runner would block)
                    self._stderr.append(f"unreadable runner record: {raw[:200]!r}")
                    continue
                if ev is not None:
                    self._queue.put_nowait(ev)
                if self._records.t0_ns is not None and not self._ready.done():
                    self._ready.set_result(None)
        finally:
            rc = await self.proc.wait()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._err_reader, 1.0)
            self._exit = self._records.exit(rc, "\n".join(self._stderr))
            if not self._ready.done():
                self._ready.set_result(None)
            self._queue.put_nowait(self._exit)
            self._queue.put_nowait(None)

    async def wait_ready(self, timeout: float) -> None:
        try:
            await asyncio.wait_for(asyncio.shield(self._ready), timeout)
        except asyncio.TimeoutError:
            await self.stop()
            raise RunnerError(f"{RUNNER_NAME} did not finish setting up within {timeout:.0f} s") from None
        if self.t0_ns is None:
            await self._reader
            raise RunnerError(_setup_failure(self._exit))

    async def events(self) -> AsyncIterator[Event]:
        """WindowStarted / WindowDone as they happen, then exactly one RunnerExit."""
        while True:
            ev = await self._queue.get()
            if ev is None:
                return
            yield ev

    async def wait(self) -> RunnerExit:
        await asyncio.shield(self._reader)
        assert self._exit is not None
        return self._exit

    async def stop(self) -> RunnerExit:
        """SIGTERM; the runner stops its threads within ~50 ms and exits. SIGKILL after
        STOP_GRACE_S if it has not (scratch files are unlinked at creation either way)."""
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(asyncio.shield(self._reader), STOP_GRACE_S)
            except asyncio.TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    self.proc.kill()
        return await self.wait()


def default_memory_budget(meminfo: str = "/proc/meminfo") -> int:
    """Half of MemTotal: what agent.memory_budget_mib = 0 means."""
    try:
        with open(meminfo) as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024 // 2
    except (OSError, ValueError, IndexError):
        pass
    return 0


def plan_uses_disk(plan: Plan, catalog: Catalog) -> bool:
    disk = catalog.by_class("disk")
    return bool(disk) and bool((plan.compositions[:, disk, :] > 0).any())


async def _send_schedule(stdin: asyncio.StreamWriter, data: bytes) -> None:
    """Write the schedule and close the pipe. A runner that exits before reading it all breaks
    the pipe: that is its refusal, which its exit record or status says, so it is not an error here."""
    # The pipe's end is retrieved however it comes (written, broken, or after a timeout cancels
    # this): Python before 3.11.5 (Debian 12's 3.11.2) logs an unretrieved broken pipe as "Future
    # exception was never retrieved", and a cancelled wait on it makes asyncio's own callback fail.
    closed = asyncio.ensure_future(stdin.wait_closed())
    closed.add_done_callback(lambda f: f.cancelled() or f.exception())
    try:
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            stdin.write(data)
            await stdin.drain()
    finally:
        stdin.close()
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        await asyncio.shield(closed)


async def start_runner(plan: Plan, config: RunnerConfig = RunnerConfig(), *, seed: int | None = None,
                       repetitions: int = 1, warmup_windows: int = 0,
                       catalog: Catalog | None = None) -> RunnerHandle:
    """Compile `plan`, start the runner, wait until it has set up; raise RunnerError if refused."""
    catalog = catalog or load_catalog(config.catalog_path)
    # Compiling is proportional to windows x threads: a worker thread, never the event loop.
    schedule = await asyncio.to_thread(compile_plan, plan, catalog, seed=seed, repetitions=repetitions,
                                       warmup_windows=warmup_windows, pace_Bps=config.pace_Bps)
    runner = Path(config.binary) if config.binary else find_runner()
    scratch = config.scratch_dir
    if scratch is None and plan_uses_disk(plan, catalog):
        scratch = DEFAULT_SCRATCH_DIR
    cpus = config.cpus or tuple(online_cpus())
    # The schedule goes in on stdin: no file to clean up, whatever happens to this process.
    args = [str(runner), "--schedule", "-", "--cpus", ",".join(map(str, cpus)),
            "--scratch-budget", str(int(config.scratch_budget_bytes)), "--udp-sink", config.udp_sink,
            "--start-delay-ms", str(int(config.start_delay_ms))]
    if scratch:
        args += ["--scratch-dir", str(scratch)]
    if config.nice:
        args += ["--nice", str(int(config.nice))]
    if config.placement != "pinned":
        args += ["--placement", config.placement]
    args += ["--memory-margin", str(int(config.memory_margin_bytes)), "--oom-score-adj", str(int(config.oom_score_adj))]
    if config.memory_budget_bytes:
        args += ["--memory-budget", str(int(config.memory_budget_bytes))]
    try:
        proc = await asyncio.create_subprocess_exec(*args, stdin=asyncio.subprocess.PIPE,
                                                    stdout=asyncio.subprocess.PIPE,
                                                    stderr=asyncio.subprocess.PIPE)
    except OSError as e:
        raise RunnerError(f"cannot start {runner}: {e}") from e
    handle = RunnerHandle(proc, schedule, catalog, config)
    try:
        assert proc.stdin is not None
        try:
            await asyncio.wait_for(_send_schedule(proc.stdin, schedule.data), config.setup_timeout_s)
        except asyncio.TimeoutError:
            raise RunnerError(f"{runner} did not read its schedule within {config.setup_timeout_s:g} s") from None
        await handle.wait_ready(config.setup_timeout_s)
    except BaseException:
        if proc.returncode is None:
            await handle.stop()
        raise
    return handle


@dataclass
class RunnerRecord:
    """Every event of one runner run, collected (not controller.fleet.RunResult: an agent's trace)."""

    windows: list[WindowDone] = field(default_factory=list)
    starts: list[WindowStarted] = field(default_factory=list)
    exit: RunnerExit | None = None
    t0_ns: int | None = None
    notes: dict = field(default_factory=dict)
    info: dict = field(default_factory=dict)


async def run_to_completion(plan: Plan, config: RunnerConfig = RunnerConfig(), *,
                            on_window: Callable[[WindowDone], None] | None = None, **kw) -> RunnerRecord:
    """Run a plan start to end and collect every event (`mimesys-agent run-plan`); `on_window`
    is called after each window. kw: start_runner's (seed, repetitions, warmup_windows)."""
    handle = await start_runner(plan, config, **kw)
    result = RunnerRecord(t0_ns=handle.t0_ns, notes=handle.notes, info=handle.info)
    try:
        async for ev in handle.events():
            if isinstance(ev, WindowDone):
                result.windows.append(ev)
                if on_window is not None:
                    on_window(ev)
            elif isinstance(ev, WindowStarted):
                result.starts.append(ev)
            else:
                result.exit = ev
    finally:
        if handle.exit is None:
            await handle.stop()
            result.exit = handle.exit
    return result
