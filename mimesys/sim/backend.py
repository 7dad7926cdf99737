"""SimBackend: the simulated host behind the same Backend interface as the real one.

Every window comes from mimesys.sim.model (pure); this class only keeps the host state
between runs, paces windows and labels everything simulated (BackendInfo.simulated, the
fingerprint's "simulated": true, and therefore the trace's `simulated` flag).

Pacing: `speedup` > 0 paces windows at window_s / speedup of wall time on absolute
deadlines; `speedup` = 0 (the default) computes windows as fast as the event loop allows,
yielding to it after every window so a cancel lands within one window.

The agent builds it with `SimBackend.from_config(config)` (agentd/backend_registry.py). The agent's
config has no simulator table, so the simulator's own knobs come from the environment:
MIMESYS_SIM_CPUS (default: len(agent.cpus) or 4), MIMESYS_SIM_SEED (0),
MIMESYS_SIM_SPEEDUP (0 = unpaced), MIMESYS_SIM_NOISE (0.02), MIMESYS_SIM_PMU (1).
"""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import AsyncIterator

import numpy as np

from ..backend import Backend, BackendInfo, ExecutedWindow, MonitorSample, RunOptions
from ..catalog import Catalog, load_catalog
from ..errors import ConfigError
from ..metrics import MetricSpec
from ..plan import Plan
from .model import SimModel, SimParams, idle_decay


@dataclass(frozen=True)
class SimConfig:
    n_cpus: int = 4
    seed: int = 0
    speedup: float = 0.0          # 0 = unpaced; 1 = real time; 10 = ten windows per window_s
    noise: float = 0.02
    pmu: bool = True
    catalog: Path | None = None   # None = the shipped catalog

    def __post_init__(self):
        if self.speedup < 0:
            raise ConfigError(f"sim speedup must be >= 0 (0 = unpaced), got {self.speedup}")
        if not 1 <= self.n_cpus <= 4096:
            raise ConfigError(f"sim n_cpus must be in 1..4096, got {self.n_cpus}")

    @classmethod
    def from_env(cls, env=None, *, default_cpus: int = 4, catalog: Path | None = None) -> "SimConfig":
        env = os.environ if env is None else env

        def get(name, conv, default):
            raw = env.get(name)
            if raw is None or raw == "":
                return default
            try:
                return conv(raw)
            except ValueError:
                raise ConfigError(f"environment {name}={raw!r}: expected {conv.__name__}") from None
        pmu = get("MIMESYS_SIM_PMU", str, "1").lower() not in ("0", "false", "no")
        return cls(n_cpus=get("MIMESYS_SIM_CPUS", int, default_cpus), seed=get("MIMESYS_SIM_SEED", int, 0),
                   speedup=get("MIMESYS_SIM_SPEEDUP", float, 0.0), noise=get("MIMESYS_SIM_NOISE", float, 0.02),
                   pmu=pmu, catalog=catalog)


class SimBackend(Backend):
    def __init__(self, config: SimConfig | None = None, catalog: Catalog | None = None):
        self.config = config or SimConfig()
        self.catalog = catalog or load_catalog(self.config.catalog)
        self.model = SimModel.from_catalog(self.catalog, SimParams(n_cpus=self.config.n_cpus,
                                                                   noise=self.config.noise, pmu=self.config.pmu))
        self._state = self.model.idle_state()
        self._runs = 0
        self._last_values: np.ndarray | None = None
        self._running = False

    @classmethod
    def from_config(cls, config) -> "SimBackend":
        cpus = getattr(config.agent, "cpus", None)
        return cls(SimConfig.from_env(default_cpus=len(cpus) if cpus else 4,
                                      catalog=getattr(config.agent, "catalog", None)))

    @property
    def max_threads(self) -> int:
        """Plans may use this many threads: the simulated host's CPUs, not this machine's."""
        return self.config.n_cpus

    def info(self) -> BackendInfo:
        p = self.model.params
        fp = p.fingerprint()
        fp["catalog_hash"] = self.catalog.hash
        return BackendInfo(name="sim", simulated=True, fingerprint=fp, calibration=p.calibration())

    def metric_schema(self) -> list[MetricSpec]:
        return self.model.schema()

    async def execute(self, plan: Plan, options: RunOptions) -> AsyncIterator[ExecutedWindow]:
        plan.validate(self.catalog, max_threads=self.config.n_cpus)
        run_seed = options.seed if options.seed is not None else plan.seed
        rng = np.random.default_rng([self.config.seed, int(run_seed) & 0xFFFFFFFF, self._runs])
        self._runs += 1
        comps = np.asarray(plan.compositions, dtype=np.float64)
        held = np.zeros(plan.T) if plan.mem_held_B is None else np.asarray(plan.mem_held_B, np.float64)
        window_s = float(plan.window_s)
        pace_ns = int(window_s / self.config.speedup * 1e9) if self.config.speedup > 0 else 0
        state = idle_decay(self._state, 1.0)
        self._running = True
        try:
            for _ in range(options.warmup_windows):
                _, state = self.model.step(comps[0], state, rng, window_s, held[0])
            deadline = time.monotonic_ns()
            for rep in range(options.repetitions):
                for t in range(plan.T):
                    start_ns = time.monotonic_ns()
                    values, state = self.model.step(comps[t], state, rng, window_s, held[t])
                    self._state = state
                    if pace_ns:
                        deadline += pace_ns
                        await asyncio.sleep(max(0.0, (deadline - time.monotonic_ns()) / 1e9))
                    else:
                        await asyncio.sleep(0)
                    self._last_values = values
                    yield ExecutedWindow(repetition=rep, window=t, start_ns=start_ns, values=values)
        finally:
            self._state = state
            self._running = False

    async def monitor(self, interval_s: float = 1.0) -> AsyncIterator[MonitorSample]:
        rng = np.random.default_rng([self.config.seed, 0x6D6F6E])
        idle = np.zeros((self.model.M, self.config.n_cpus))
        period = interval_s / self.config.speedup if self.config.speedup > 0 else interval_s
        while True:
            await asyncio.sleep(period)
            if self._running and self._last_values is not None:
                values = self._last_values
            else:
                values, _ = self.model.step(idle, idle_decay(self._state, 1.0), rng)
            yield MonitorSample(timestamp_ns=time.time_ns(), values=values)

    async def close(self) -> None:
        self._running = False
