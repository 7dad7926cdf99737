"""The real host: mimesys-runner executes the plan, the host samplers measure it.

Alignment. The samplers are read at every window boundary the runner reports, so window t
of the trace measures exactly window t of the plan (window_alignment.py); how late each
boundary sample was is kept per run in `boundary_lag_ns` and shown in /v1/info ("alignment").
The calibration the host runs with is host_calibration.py's.

Monitoring (/v1/monitor, `record`) reads the same SamplerSet on its own absolute 1 Hz
grid, and every read is on the samplers' own thread (sampler_thread.py).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import shutil
from pathlib import Path
from typing import AsyncIterator

import numpy as np

from mimesys.backend import Backend, BackendInfo, ExecutedWindow, MonitorSample, RunOptions
from mimesys.calibration import capacity_peaks
from mimesys.catalog import Catalog, load_catalog
from mimesys.errors import PlanError
from mimesys.metrics import MetricSpec
from mimesys.hostpaths import HostPaths
from mimesys.plan import Plan

from .calibrator import pace_rates
from .fingerprint import host_fingerprint, with_calibration
from .host_calibration import HostCalibration
from .host_run import run_on_host
from .hostlock import DEFAULT_LOCK
from .sampler_thread import SamplerThread
from .schedule import paces_for
from .window_alignment import lag_stats



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
                 memory_budget_bytes: int = 0, memory_margin_bytes: int = 256 << 20, placement: str = "pinned"):
        self.cpus = tuple(cpus)
        self.placement = placement
        self.memory_budget_bytes = int(memory_budget_bytes)
        self.memory_margin_bytes = int(memory_margin_bytes)
        self.max_threads = len(self.cpus)
        self.scratch_dir = Path(scratch_dir)
        self.scratch_budget_bytes = int(scratch_budget_bytes)
        self.catalog = catalog
        self.samplers = samplers
        self.sampling = SamplerThread(samplers, sampler_thread)
        self.runner_binary = runner_binary
        self.state_dir = state_dir
        self.run_lock = Path(run_lock)
        self.hp = hostpaths or HostPaths.from_env()
        self._schema = samplers.schema()
        self._fingerprint: dict | None = None
        self.calibration = HostCalibration(state_dir)
        self.boundary_lag_ns: list[int] = []   # last run: how late each boundary sample was

    @classmethod
    def from_config(cls, config) -> "HostBackend":
        from .runner import default_memory_budget
        hp = HostPaths.from_env()
        sampling = SamplerThread.probe(config.samplers, hp)
        try:
            return cls(cpus=config.agent.resolved_cpus(), scratch_dir=config.agent.scratch_dir,
                       scratch_budget_bytes=config.agent.scratch_budget_mib << 20,
                       memory_budget_bytes=(config.agent.memory_budget_mib << 20) or default_memory_budget(),
                       memory_margin_bytes=config.agent.memory_margin_mib << 20,
                       catalog=load_catalog(config.agent.catalog), samplers=sampling.samplers,
                       runner_binary=config.agent.runner, state_dir=config.agent.state_dir, hostpaths=hp,
                       run_lock=config.agent.run_lock, sampler_thread=sampling.thread,
                       placement=config.agent.placement)
        except BaseException:
            sampling.close_now()
            raise

    def serving_on(self, ports) -> None:
        self.sampling.serving_on(ports)

    # -- description ---------------------------------------------------------------
    def info(self) -> BackendInfo:
        calibration = self.calibration.current()
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
        return lag_stats(self.boundary_lag_ns)

    def pace_rates(self) -> dict[str, float]:
        """Per-thread bytes/s of the paced variants, from this host's calibration."""
        return pace_rates(self.catalog, self.calibration.current())

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
        self.calibration.use(doc)

    # -- execution -----------------------------------------------------------------
    async def execute(self, plan: Plan, options: RunOptions) -> AsyncIterator[ExecutedWindow]:
        plan.validate(self.catalog, max_threads=self.max_threads)
        async with contextlib.aclosing(run_on_host(self, plan, options)) as windows:
            async for w in windows:
                yield w

    def monitor(self, interval_s: float = 1.0) -> AsyncIterator[MonitorSample]:
        """One sample per interval on an absolute grid (lateness never accumulates)."""
        return self.sampling.monitor(interval_s)

    async def close(self) -> None:
        await self.sampling.close()
