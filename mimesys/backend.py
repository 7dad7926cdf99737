"""Execution backends: what turns a validated plan into executed, measured windows.

Two implementations share this interface, so the API, the CLI and the controller never
care which one runs:

- `host` (agentd/host_backend.py): mimesys-runner executes the plan on this host's CPUs
  and the samplers measure the host at the runner's window boundaries.
- `sim` (mimesys/sim/): a simulated host, labelled as such in /v1/info and in every
  trace it produces (`simulated=True`); for fast tests and controller load tests only.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, AsyncIterator

import numpy as np

from .metrics import MetricSpec

if TYPE_CHECKING:
    from .plan import Plan
from .plan import Plan


@dataclass(frozen=True)
class RunOptions:
    repetitions: int = 1       # the whole plan is executed this many times back to back
    warmup_windows: int = 0    # windows of the first composition run before window 0, not reported
    record: bool = True        # keep the trace on disk under the state dir
    seed: int | None = None    # overrides plan.seed for segment order


@dataclass
class ExecutedWindow:
    """One plan window as executed and measured."""

    repetition: int
    window: int
    start_ns: int              # CLOCK_MONOTONIC start of the window (runner's clock)
    values: np.ndarray         # float32 [N], in metric_schema() order, NaN = not measured
    ran_ns: np.ndarray | None = None   # int64 [M, K] nanoseconds each stressor actually ran (None for sim)
    ops: np.ndarray | None = None      # int64 [M, K] operations completed
    # int64 [M, K] what the runner set out to run: the compiled durations, a held compute tail
    # as the runner sized it (agentd/schedule.py, "The hold"); None for sim
    planned_ns: np.ndarray | None = None
    bytes: np.ndarray | None = None          # int64 [M, K] bytes moved (the runner's count; None for sim)
    thread_cpu_ns: np.ndarray | None = None  # int64 [K] CPU time of each worker thread (None for sim)


@dataclass
class MonitorSample:
    timestamp_ns: int          # CLOCK_REALTIME, for recording production traces
    values: np.ndarray         # float32 [N]


@dataclass
class BackendInfo:
    name: str
    simulated: bool
    fingerprint: dict
    calibration: dict = field(default_factory=dict)


class Backend(abc.ABC):
    """Owns the host's execution resources. One run at a time (enforced by the caller)."""

    @abc.abstractmethod
    def info(self) -> BackendInfo: ...

    @abc.abstractmethod
    def metric_schema(self) -> list[MetricSpec]:
        """Ordered metrics with availability; the column order of every ExecutedWindow.values."""

    @abc.abstractmethod
    def execute(self, plan: Plan, options: RunOptions) -> AsyncIterator[ExecutedWindow]:
        """Run a validated plan; yield each window as soon as it is measured. Cancelling the
        iteration (or the task consuming it) stops execution within 50 ms and cleans up."""

    def check_plan(self, plan: Plan) -> None:
        """Raise PlanError if this backend cannot run a valid plan (e.g. a paced variant
        without the calibration that sets its rate). Called before a run is accepted."""

    def serving_on(self, ports) -> None:
        """The agent listens on these TCP ports: what it measures leaves its own connections out."""

    @abc.abstractmethod
    def monitor(self, interval_s: float = 1.0) -> AsyncIterator[MonitorSample]:
        """Live host telemetry at interval_s, independent of runs."""

    async def close(self) -> None:
        """Release everything (perf fds, runner processes, scratch)."""
