"""The real host: mimesys-runner executes the plan, the host samplers measure it.

Alignment. The samplers are read at every window boundary the runner reports
(WindowStarted), so window t's values are derive(sample at start of t, sample at start
of t+1): window t of the trace measures exactly window t of the plan, not a 1 Hz grid
that drifts against it. The last window ends with a sample taken when the runner reports
it done (the runner's threads finish a window at its boundary, idle time included). How
late each boundary sample was (our read time minus the runner's observed boundary, or the
planned end for the last window) is kept per run in `boundary_lag_ns` and shown in
/v1/info ("alignment"): typically < 1 ms here, tens of ms when the host is saturated.

Warm-up windows run before window 0 and are not reported by the runner (if it is asked to
report them, repetition -1, they are sampled but not yielded).

Monitoring (/v1/monitor, `record`) reads the same SamplerSet on its own absolute 1 Hz
grid; both paths use the samplers' one pure derive.

Threading. The SamplerSet is probed, read and closed on one dedicated thread, never on the
event loop's: pyroute2's synchronous netlink API (the net sampler) runs an asyncio loop of
its own and fails inside a running one, and reads (~0.6 ms here) then never stall the
loop that serves hundreds of WebSocket clients.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import shutil
import statistics
import time
from pathlib import Path
from typing import AsyncIterator

import numpy as np

from mimesys.backend import Backend, BackendInfo, ExecutedWindow, MonitorSample, RunOptions
from mimesys.calibration import capacity_peaks, read as read_calibration
from mimesys.catalog import Catalog, load_catalog
from mimesys.errors import PlanError, RunnerError, ValidationError
from mimesys.metrics import MetricSpec
from mimesys.plan import Plan

from .calibrator import pace_rates
from .fingerprint import host_fingerprint, with_calibration
from .hostlock import DEFAULT_LOCK, host_run_lock
from mimesys.hostpaths import HostPaths
from .schedule import paces_for

log = logging.getLogger(__name__)


def clear_scratch(scratch_dir: Path) -> int:
    """Remove everything inside scratch_dir (left by an agent that was killed); returns the
    number of entries removed. The directory itself is kept (it may be a StateDirectory)."""
    scratch_dir.mkdir(parents=True, exist_ok=True)
    removed = 0
    for entry in scratch_dir.iterdir():
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)
        removed += 1
    return removed


class HostBackend(Backend):
    def __init__(self, *, cpus: tuple[int, ...], scratch_dir: Path, scratch_budget_bytes: int,
                 catalog: Catalog, samplers, runner_binary: Path | None = None, state_dir: Path | None = None,
                 hostpaths: HostPaths | None = None, run_lock: Path = DEFAULT_LOCK,
                 sampler_thread: concurrent.futures.ThreadPoolExecutor | None = None,
                 memory_budget_bytes: int = 0, memory_margin_bytes: int = 256 << 20):
        self.cpus = tuple(cpus)
        self.memory_budget_bytes = int(memory_budget_bytes)
        self.memory_margin_bytes = int(memory_margin_bytes)
        self.max_threads = len(self.cpus)
        self.scratch_dir = Path(scratch_dir)
        self.scratch_budget_bytes = int(scratch_budget_bytes)
        self.catalog = catalog
        self.samplers = samplers
        self._thread = sampler_thread or concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="samplers")
        self.runner_binary = runner_binary
        self.state_dir = state_dir
        self.run_lock = Path(run_lock)
        self.hp = hostpaths or HostPaths.from_env()
        self._schema = samplers.schema()
        self._fingerprint: dict | None = None
        self._calibration_warned = ""
        self._calibration_doc: dict | None = None   # use_calibration's, over the state's file
        self.boundary_lag_ns: list[int] = []   # last run: how late each boundary sample was

    @classmethod
    def from_config(cls, config) -> "HostBackend":
        from .runner import default_memory_budget
        from .samplers import SamplerSet
        hp = HostPaths.from_env()
        thread = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="samplers")
        try:
            samplers = thread.submit(SamplerSet.from_config, config.samplers, hp).result()
        except BaseException:
            thread.shutdown()
            raise
        try:
            return cls(cpus=config.agent.resolved_cpus(), scratch_dir=config.agent.scratch_dir,
                       scratch_budget_bytes=config.agent.scratch_budget_mib << 20,
                       memory_budget_bytes=(config.agent.memory_budget_mib << 20) or default_memory_budget(),
                       memory_margin_bytes=config.agent.memory_margin_mib << 20,
                       catalog=load_catalog(config.agent.catalog), samplers=samplers,
                       runner_binary=config.agent.runner, state_dir=config.agent.state_dir, hostpaths=hp,
                       run_lock=config.agent.run_lock, sampler_thread=thread)
        except BaseException:
            thread.submit(samplers.close).result()
            thread.shutdown()
            raise

    def serving_on(self, ports) -> None:
        self._thread.submit(self.samplers.serving_on, ports).result()   # the thread that reads them

    # -- description ---------------------------------------------------------------
    def info(self) -> BackendInfo:
        calibration = self._calibration()
        if self._fingerprint is None:
            # Probed once (it opens a hardware perf event to learn whether the PMU works).
            self._fingerprint = host_fingerprint(self.hp)
        # capacity: the independent host peaks where calibration probed them
        fp = with_calibration(self._fingerprint, capacity_peaks(calibration)) if calibration else dict(self._fingerprint)
        fp["agent_cpus"] = list(self.cpus)   # the CPUs plans may use on this agent (plan threads)
        return BackendInfo(name="host", simulated=False, fingerprint=fp, calibration=calibration)

    def metric_schema(self) -> list[MetricSpec]:
        return list(self._schema)

    def sampler_states(self) -> dict:
        return self.samplers.states()

    def alignment_stats(self) -> dict:
        """How late the boundary samples of the last run were, after the runner's boundary."""
        if not self.boundary_lag_ns:
            return {}
        lags = sorted(self.boundary_lag_ns)
        return {"boundary_samples": len(lags), "lag_median_ms": round(statistics.median(lags) / 1e6, 3),
                "lag_p99_ms": round(lags[min(len(lags) - 1, int(0.99 * len(lags)))] / 1e6, 3),
                "lag_max_ms": round(lags[-1] / 1e6, 3)}

    def pace_rates(self) -> dict[str, float]:
        """Per-thread bytes/s of the paced variants, from this host's calibration."""
        return pace_rates(self.catalog, self._calibration())

    def check_plan(self, plan: Plan) -> None:
        paces_for(plan, self.catalog, self.pace_rates())
        held = plan.held_max_B
        if self.memory_budget_bytes and held > self.memory_budget_bytes:
            t = int(np.argmax(plan.mem_held_B))
            raise PlanError(f"plan holds {held / 2**20:.0f} MiB of memory in window {t}, over this agent's memory "
                            f"budget of {self.memory_budget_bytes >> 20} MiB (agent.memory_budget_mib)")

    def use_calibration(self, doc: dict) -> None:
        """Run with this calibration instead of the state's file: `calibrate` records the solo
        profile with the calibration it has just measured, wherever that was written."""
        self._calibration_doc = doc

    def _calibration(self) -> dict:
        """state_dir/calibration.json as written by `mimesys-agent calibrate`; {} when absent."""
        if self._calibration_doc is not None:
            return self._calibration_doc
        if self.state_dir is None:
            return {}
        path = Path(self.state_dir) / "calibration.json"
        if not path.exists():
            return {}
        try:
            return read_calibration(path)
        except ValidationError as e:
            if self._calibration_warned != str(e):
                log.warning("ignoring calibration: %s", e)
                self._calibration_warned = str(e)
            return {}

    async def read(self):
        """One RawSample, read on the sampler thread."""
        return await asyncio.get_running_loop().run_in_executor(self._thread, self.samplers.read)

    # -- execution -----------------------------------------------------------------
    async def execute(self, plan: Plan, options: RunOptions) -> AsyncIterator[ExecutedWindow]:
        from .runner import RunnerConfig

        plan.validate(self.catalog, max_threads=self.max_threads)
        cfg = RunnerConfig(binary=self.runner_binary,
                           cpus=self.cpus, scratch_dir=str(self.scratch_dir),
                           scratch_budget_bytes=self.scratch_budget_bytes,
                           memory_budget_bytes=self.memory_budget_bytes, memory_margin_bytes=self.memory_margin_bytes,
                           catalog_path=str(self.catalog.path) if self.catalog.path else None,
                           pace_Bps=self.pace_rates())
        self.boundary_lag_ns = []
        with host_run_lock(self.run_lock, owner=f"agent state {self.state_dir}"):
            # aclosing: the runner is stopped (the inner generator's finally) before the lock goes
            async with contextlib.aclosing(self._execute_locked(plan, options, cfg)) as windows:
                async for w in windows:
                    yield w

    async def _execute_locked(self, plan: Plan, options: RunOptions, cfg) -> AsyncIterator[ExecutedWindow]:
        from .runner import RunnerExit, WindowDone, WindowStarted, start_runner

        handle = await start_runner(plan, cfg, seed=options.seed if options.seed is not None else plan.seed,
                                    repetitions=options.repetitions, warmup_windows=options.warmup_windows,
                                    catalog=self.catalog)
        last = (options.repetitions - 1, plan.T - 1)
        window_ns = int(round(plan.window_s * 1e9))
        derive = self.samplers.derive
        open_window = None          # (repetition, window, start_ns, start RawSample) of the window running now
        measured: dict[tuple[int, int], tuple[int, np.ndarray]] = {}   # values awaiting their WindowDone
        done: dict[tuple[int, int], WindowDone] = {}                     # WindowDone awaiting values
        try:
            async for ev in handle.events():
                if isinstance(ev, WindowStarted):
                    # The boundary: this sample ends the previous window and starts this one.
                    raw = await self.read()
                    self.boundary_lag_ns.append(raw.monotonic_ns - ev.start_ns)
                    if open_window is not None:
                        rep, win, start_ns, start_raw = open_window
                        measured[(rep, win)] = (start_ns, derive(start_raw, raw))
                    open_window = (ev.repetition, ev.window, ev.start_ns, raw)
                elif isinstance(ev, WindowDone):
                    key = (ev.repetition, ev.window)
                    if key == last and open_window is not None and open_window[:2] == key:
                        # Nothing starts after the last window: its end sample is taken now.
                        raw = await self.read()
                        # Against the window's planned end (end_ns is the last *work*, which
                        # may be long before the boundary when the window ends idle).
                        self.boundary_lag_ns.append(raw.monotonic_ns - (ev.planned_start_ns + window_ns))
                        rep, win, start_ns, start_raw = open_window
                        measured[key] = (start_ns, derive(start_raw, raw))
                        open_window = None
                    done[key] = ev
                elif isinstance(ev, RunnerExit):
                    if not ev.ok:
                        raise RunnerError(f"mimesys-runner {ev.status}: {ev.detail}"
                                          + (f" ({ev.stderr_tail})" if ev.stderr_tail else ""))
                for key in sorted(set(measured) & set(done)):
                    start_ns, values = measured.pop(key)
                    d = done.pop(key)
                    if key[0] < 0:
                        continue  # warm-up window (only if the runner reports them): not part of the trace
                    yield ExecutedWindow(repetition=key[0], window=key[1], start_ns=start_ns, values=values,
                                         ran_ns=np.asarray(d.ran_ns, np.int64), ops=np.asarray(d.ops, np.int64),
                                         planned_ns=np.asarray(d.planned_ns, np.int64),
                                         bytes=np.asarray(d.bytes, np.int64),
                                         thread_cpu_ns=np.asarray(d.thread_cpu_ns, np.int64))
        finally:
            if handle.exit is None:
                await handle.stop()

    async def monitor(self, interval_s: float = 1.0) -> AsyncIterator[MonitorSample]:
        """One sample per interval on an absolute grid (lateness never accumulates)."""
        period = int(interval_s * 1e9)
        prev = await self.read()
        due = prev.monotonic_ns + period
        while True:
            await asyncio.sleep(max(0, due - time.monotonic_ns()) / 1e9)
            cur = await self.read()
            values = self.samplers.derive(prev, cur)
            yield MonitorSample(timestamp_ns=time.time_ns(), values=values)
            prev = cur
            due += period
            now = time.monotonic_ns()
            if due <= now:  # suspended or starved for a whole interval: skip, do not burst
                due = now + period - (now - due) % period

    async def close(self) -> None:
        if self._thread is not None:
            await asyncio.get_running_loop().run_in_executor(self._thread, self.samplers.close)
            self._thread.shutdown()
            self._thread = None
