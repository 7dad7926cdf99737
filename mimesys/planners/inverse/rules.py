"""What a target lets a plan use and how the fit weighs it: the metrics fitted, each stressor's
cost, and the stressors each window may use (no invented activity). Decided from the whole
target before any window is solved; the inverse planner and the diffusion sampler's steering
(planners/steer.py) both read them."""

from __future__ import annotations

import numpy as np

from ... import activity
from .. import memory
from ...forward.contention import CLASS_GROUP
from ...forward.model import ForwardModel
from ...metrics import is_duplicated_breakdown
from .segments import catalog_kernels
from .solver import target_scales


def fitted_metrics(names: list[str], units: list[str]) -> np.ndarray:
    """[N] weights: 1 for metrics the planner fits, 0 for gauges, duplicated breakdowns and
    derived signals (checks, not targets: see `is_derived`)."""
    present = set(names)
    return np.array([0.0 if unit == "B" or is_duplicated_breakdown(name, present) or is_derived(name) else 1.0
                     for name, unit in zip(names, units)])


def is_derived(name: str) -> bool:
    """A signal that follows from causes the plan fits directly: the disk's busy fraction and IO
    pressure (from the IOs it issues), CPU and memory pressure. Fitting them invites the wrong
    operation — disk reads to raise a busy fraction a burst of writes had made."""
    return name.startswith("psi.") or (name.startswith("disk.") and name.endswith(".busy")) or name == "disk.busy"


class TargetRules:
    def __init__(self, model: ForwardModel, unobserved_cost: float):
        self.model = model
        first = model.first
        names = first.metric_names
        self.unobserved_cost = unobserved_cost
        self.weights = fitted_metrics(names, first.units)
        kernels = catalog_kernels(first.catalog_names)
        self.idle_margins = activity.idle_margins(names, first.units, first.noise)
        self.thresholds = first.idle + self.idle_margins
        self.drives = activity.stressor_drives(kernels, response=first.response, names=names, margins=self.idle_margins)
        self.drives_any = np.logical_or.reduce(list(self.drives.values()))   # [M]: drives some resource
        self.delayed_any = np.logical_or.reduce(list(activity.stressor_delays(kernels).values()))
        # What a unit of each stressor costs beyond its fit: the same for all, except that a stressor
        # driving a resource no metric observes (memory bandwidth without a PMU) costs more — its
        # contention cannot be checked against the target, so it is not used to fill in CPU time.
        self.base_cost = 1.0 + unobserved_cost * first.unobserved()

    def scales(self, values: np.ndarray) -> np.ndarray:
        """[N] each metric's scale in the fit (solver.target_scales)."""
        return target_scales(self.model, self.idle_margins, values)

    def fit_mask(self, values: np.ndarray, core_metrics: list[int]) -> np.ndarray:
        """float32 [T, N]: each metric's weight in the fit where the target has it, 0 elsewhere;
        host-wide CPU left out where the target has its cores (`core_metrics`: they say it, one by one)."""
        first = self.model.first
        weights = self.weights.copy()
        if any(np.isfinite(values[:, n]).any() for n in core_metrics) and "cpu.util" in first.metric_names:
            weights[first.metric_names.index("cpu.util")] = 0.0
        return ((np.isfinite(values) & (weights > 0)) * weights).astype(np.float32)

    def cost(self, values: np.ndarray) -> np.ndarray:
        """[M] what a unit of each stressor costs beyond its fit: 1, or 1 + unobserved_cost for a
        stressor whose resource no metric of the model observes or the target does not measure."""
        first = self.model.first
        if not first.classes:
            return self.base_cost
        in_target = np.isfinite(values).any(axis=0) & (self.weights > 0)
        measured = {g for g, idx in first.groups.items() if in_target[idx].any()}
        unmeasured = np.array([CLASS_GROUP.get(c) in first.groups and CLASS_GROUP[c] not in measured
                               for c in first.classes])
        return np.where(unmeasured, 1.0 + self.unobserved_cost, self.base_cost)

    def allowed(self, values: np.ndarray) -> np.ndarray:
        """[T, M] bool: the stressors a plan for this target may use in each window.
        - No invented activity (mimesys/activity.py): a stressor that drives a resource (disk
          reads, disk writes, loopback, NIC) is left out of every window where the target left
          that resource idle.
        - A stressor whose effect lands in later windows (the page-cache writer: the kernel's
          writeback, 5-35 s later and in bursts) is never used: this planner places each
          window's work in that window. Measured on a real database mix: 0.31 of a window of it
          was predicted (from its solo profile) to write 120 MB/s there; the replay wrote 25-50,
          and the writeback's kworker put 95 % of a core where the plan had none.
        - A stressor whose buffer is held for the whole run (memory footprint) and whose work no
          metric observes is left out unless the target held that much memory above the host's
          idle: it would only add memory held and traffic nobody can check.
        - Buffers may not add memory the target did not hold: a stressor whose buffers are
          held only in the windows that run it (a thread's IO buffers, a churned region:
          memory.window_scoped) is left out of each window where they are more than the target
          held there over the host's idle level, plus the idle noise; one whose buffers are held
          for the whole run (a working set), of every window when they are more than
          that in the target's leanest windows (its 2nd percentile). Measured: disk variants at
          depth 16-32 held 82 MiB through a sort's idle windows while the runner kept every
          buffer from setup to the end."""
        first = self.model.first
        T = values.shape[0]
        idle = activity.idle_windows(values, first.metric_names, self.thresholds)
        ok = activity.allowed(idle, self.drives, T, first.M) & ~self.delayed_any[None, :]
        if first.footprint is None:
            return ok
        n = first.memory_metric()
        excess, room, room_t = 0.0, np.inf, np.full(T, np.inf)
        if n is not None and np.isfinite(values[:, n]).any():
            excess = max(0.0, float(np.nanmedian(values[:, n])) - float(first.idle[n]))
            idle, noise, _ = memory.idle_level(values[:, n], first)
            room = max(0.0, memory.least_of(values[:, n]) - idle) + noise
            room_t = np.maximum(0.0, np.nan_to_num(values[:, n] - idle, nan=np.inf)) + noise
        scoped = memory.window_scoped(self.model.catalog_hash, first.catalog_names)
        if scoped is None:
            scoped = np.zeros(first.M, bool)
        too_big = np.where(scoped[None, :], first.footprint[None, :] > room_t[:, None], (first.footprint > room)[None, :])
        return ok & ~(first.unobserved() & (first.footprint > excess))[None, :] & ~too_big
