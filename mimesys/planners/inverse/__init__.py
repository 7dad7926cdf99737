"""The `inverse` planner: the plan whose predicted trace is closest to the target.

For a target o_{1:T} it solves, for all windows at once,

    min_a  Σ_t Σ_n w_n ((f(a_t, a_{t−1})_n − o_{t,n}) / s_n)²       fit on the metrics the target has
         + λ_idle · Σ a                                             prefer doing nothing extra
         + Σ_t λ_change · steady_t · ‖a_t − a_{t−1}‖²              hold still where the target does

    subject to a ≥ 0 and each thread's column Σ_m a[m, k] ≤ 1,

with s_n the metric's full scale and steady_t = exp(−mean |o_t − o_{t−1}| / s / 0.02). The
first-order model is linear in a once its contention factors φ are fixed, so the inner
problem is a box-and-simplex constrained least squares, solved for every window together by
accelerated projected gradient (FISTA, Beck & Teboulle 2009) with an exact projection of
each thread's column. An outer loop re-linearizes: φ and the learned correction
c(a_t, a_{t−1}) are evaluated at the current plan and the targets shifted by c (a fixed
point, m3's "approximate model + correction" used backwards). Activity the target does not
show costs exactly what the model predicts it adds to those metrics: a disk stressor on a
target with an idle disk is penalized by its own predicted disk traffic.

What a replay is judged by is the mean over metrics of each metric's RMS distance (DTW,
controller/evaluate), not one pooled sum of squares: a pooled sum lets a plan buy a little
on a metric it already misses by a lot (migrations, say) with loopback traffic or disk reads
the target never had, which a per-metric score counts in full. So the metric weights w_n are
re-weighted between outer passes by 1 / max(RMS_n, floor) (iteratively re-weighted least
squares for Σ_n RMS_n; floor = 0.02 of full scale, about the run-to-run noise of a real host),
normalized to mean 1.

Metrics left out of the fit: byte gauges (memory held, page cache: set by what is allocated
over the whole run, not by the window), per-device and per-interface breakdowns whose
host-wide total is also in the model (counted once), and every metric the target lacks. A
stressor whose resource the target does not measure at all (network stressors for a trace
without network metrics) costs what an unobserved one does: the plan would add contention
nobody asked for and nobody can check.

The solve is in effective shares: what a segment moves at its stressor's rate, after the
dead time each segment of an IO stressor spends filling and draining its queue (the agent's
calibration measures it; FirstOrder.effective). After the solve, in this order: stressors the
model cannot tell apart are merged into one segment per window and thread
(`Segments.merge_equivalents`), a window's disk IO is put on one thread
(`Segments.one_device_queue`: the device serves one queue at a time), entries shorter than a
stressor can run as planned are dropped or raised (`Segments.round_to_quanta`), each segment
is lengthened by its dead time (`Segments.pad_dead_time`), and each core is brought to the
target's busy fraction from the plan's columns (`CoreMatch.match`). The plan also names that
fraction per thread and window (`core_busy_target`), and the runner holds it: what a disk
stressor costs its core follows how fast the device answers that second, which no model of
the host knows in advance (on real replays ±0.03-0.05 of a core in single windows).

The package, by room: `fista.py` the inner solve and its projection, `solver.py` the chunked
solve around it (scales, change term, outer passes, re-weighting), `segments.py` the steps
from effective shares to segments the runner runs, `cpu.py` CPU first and the per-core busy
target; this module the settings, which metrics are fitted and which stressors a target
allows, and the planner that puts them together.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ... import activity
from ...errors import ValidationError
from ..base import check_target, project_to_valid, target_matrix
from ...metrics import is_duplicated_breakdown
from ...plan import Plan
from ...trace import Trace
from ...forward.firstorder import CLASS_GROUP
from ...forward.model import ForwardModel, load_forward_model
from .cpu import CoreMatch
from .segments import Segments, catalog_kernels, equivalence_classes, quanta
from .solver import Solver, target_scales


@dataclass(frozen=True)
class InverseSettings:
    outer: int = 3               # re-linearizations (φ and the correction at the current plan)
    iterations: int = 150        # projected-gradient steps of the first outer pass
    refine_iterations: int = 60  # ... and of each later one (warm-started at the previous plan)
    idle_weight: float = 2e-3    # λ_idle
    unobserved_cost: float = 4.0  # λ_idle × this for stressors whose resource no metric observes
    change_weight: float = 0.05  # λ_change
    steady_tolerance: float = 0.02
    rms_reweight: bool = True    # per-metric weights 1 / max(RMS_n, rms_floor) between outer passes
    rms_floor: float = 0.02
    first_order_only: bool = False
    chunk_windows: int | None = None   # windows solved at once (None: chunk_cells / (M·K), 256-4096):
    chunk_cells: int = 4_000_000       # bounds the working set and the time between progress calls
    min_segment_s: float = 0.005  # a stressor runs at least this long in a window, or not at all
    cpu_first: bool = True       # per-core CPU matched first (a compute filler or a scaled column)
    # |predicted − target| core busy fraction left alone: below single's whole per-core error on
    # real replays (~0.007); 0.01 left 0.0042 mean |target − prediction| on five real mixes, 0.003
    # leaves 0.0028 (the filler's 5 ms quantum rounds a few windows up by that much)
    cpu_tolerance: float = 0.003
    # the plan names each thread's core busy fraction (the target's) and the runner holds it by
    # sizing the thread's compute: an IO stressor's CPU follows how fast the device answers
    hold_core_busy: bool = True
    equivalence_tolerance: float = 0.03   # stressors whose effects differ by less are one (merge_equivalents; 0: off)


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



class InversePlanner:
    """The forward model inverted, behind the Generator protocol (planners/base.py)."""

    name = "inverse"

    def __init__(self, model: ForwardModel | Path | str, settings: InverseSettings | None = None):
        self.model = model if isinstance(model, ForwardModel) else load_forward_model(model)
        self.model_dir = None if isinstance(model, ForwardModel) else str(model)
        self.settings = s = settings or InverseSettings()
        if s.first_order_only:
            self.name = "inverse-first-order"
        first = self.model.first
        names = first.metric_names
        self.weights = fitted_metrics(names, first.units)
        kernels = catalog_kernels(first.catalog_names)
        self.idle_margins = activity.idle_margins(names, first.units, first.noise)
        self._thresholds = first.idle + self.idle_margins
        self._drives = activity.stressor_drives(kernels, response=first.response, names=names,
                                                margins=self.idle_margins)
        drives_any = np.logical_or.reduce(list(self._drives.values()))   # [M]: drives some resource
        self._delayed_any = np.logical_or.reduce(list(activity.stressor_delays(kernels).values()))
        # What a unit of each stressor costs beyond its fit: the same for all, except that a stressor
        # driving a resource no metric observes (memory bandwidth without a PMU) costs more — its
        # contention cannot be checked against the target, so it is not used to fill in CPU time.
        self._cost = 1.0 + s.unobserved_cost * first.unobserved()
        drives = np.stack([self._drives[r] for r in sorted(self._drives)] + [self._delayed_any], axis=1)
        equivalents = equivalence_classes(self.model, self.weights > 0, self._cost, drives, s.equivalence_tolerance)
        self.cpu = CoreMatch(first, drives_any, s.cpu_tolerance)
        self.segments = Segments(self.model, drives_any, equivalents, quanta(self.model, s.min_segment_s),
                                 s.cpu_tolerance)
        self.solver = Solver(self.model, s, self.cpu, self.segments)

    def generate(self, trace: Trace, *, seed: int = 0, progress=None) -> Plan:
        model = self.model
        check_target(trace, model.window_s, "the forward model's")
        values, report = target_matrix(trace, model.metric_names)
        mask = np.isfinite(values) & (self.weights > 0)
        if not mask.any():
            raise ValidationError(f"the trace has none of the forward model's fitted metrics "
                                  f"({', '.join(n for n, w in zip(model.metric_names, self.weights) if w > 0)})")
        a, info = self.solve(values, progress=progress)
        prov = {"generator": self.name, "forward_model": self.model_dir,
                "forward_model_provenance": model.provenance, "corrected": model.has_correction
                and not self.settings.first_order_only, "settings": self.settings.__dict__,
                "fitted_metrics": [n for n, u in zip(model.metric_names, mask.any(axis=0)) if u],
                "predicted_rms_error": info["rms"], "seed": int(seed), "trace_windows": trace.T,
                "trace_provenance": trace.provenance, "trace_simulated": bool(trace.simulated),
                "model_simulated": bool(model.simulated), "absent_in_trace": report["absent_in_trace"]}
        return Plan(project_to_valid(a), list(model.catalog_names), model.catalog_hash, window_s=model.window_s,
                    seed=int(seed), provenance=prov, host_fingerprint=dict(model.host_fingerprint),
                    core_busy_target=self.core_busy_target(values) if self.settings.hold_core_busy else None
                    ).validate()

    def solve(self, values: np.ndarray, progress=None, restrict: np.ndarray | None = None,
              start: np.ndarray | None = None) -> tuple[np.ndarray, dict]:
        """Target values [T, N] (NaN = not in the target) -> compositions [T, M, K] float32, info.

        What needs the whole target is decided once (each metric's scale, the weights, which
        stressors each window may use; `restrict` [T, M] narrows those); the plan is then solved
        chunk by chunk (settings.chunk_windows windows, or as many as keep a chunk's arrays near
        chunk_cells entries: 4096 windows for 43 stressors on 2 threads): the working set is a
        chunk's, not T × M × K arrays several times over (gigabytes at /v1/generate's window
        cap), and `progress(done, T)` after each chunk lets the caller stop it. `start` [T, M, K]:
        effective shares to start from (zeros otherwise), e.g. a learned generator's plan."""
        allowed = self.allowed(values)
        if restrict is not None:
            allowed &= restrict
        return self.solver.solve(values, self.target_scales(values), self.fit_mask(values), allowed,
                                 self.cost(values), progress, start)

    def core_busy_target(self, values: np.ndarray) -> np.ndarray | None:
        """float32 [T, K]: the target's busy fraction of each plan thread's core (CoreMatch.busy_target)."""
        return self.cpu.busy_target(values)

    def cpu_filler(self, allowed: np.ndarray) -> int | None:
        """The compute kernel that fills CPU time with nothing else (CoreMatch.filler)."""
        return self.cpu.filler(allowed)

    def target_scales(self, values: np.ndarray) -> np.ndarray:
        """[N] each metric's scale in the fit (solver.target_scales)."""
        return target_scales(self.model, self.idle_margins, values)

    def fit_mask(self, values: np.ndarray) -> np.ndarray:
        """float32 [T, N]: each metric's weight in the fit where the target has it, 0 elsewhere;
        host-wide CPU left out where the target has its cores (they say it, one by one)."""
        first = self.model.first
        weights = self.weights.copy()
        if any(np.isfinite(values[:, n]).any() for n, _ in self.cpu.cores) and "cpu.util" in first.metric_names:
            weights[first.metric_names.index("cpu.util")] = 0.0
        return ((np.isfinite(values) & (weights > 0)) * weights).astype(np.float32)

    def cost(self, values: np.ndarray) -> np.ndarray:
        """[M] what a unit of each stressor costs beyond its fit: 1, or 1 + unobserved_cost for a
        stressor whose resource no metric of the model observes or the target does not measure."""
        first = self.model.first
        if not first.classes:
            return self._cost
        in_target = np.isfinite(values).any(axis=0) & (self.weights > 0)
        measured = {g for g, idx in first.groups.items() if in_target[idx].any()}
        unmeasured = np.array([CLASS_GROUP.get(c) in first.groups and CLASS_GROUP[c] not in measured
                               for c in first.classes])
        return np.where(unmeasured, 1.0 + self.settings.unobserved_cost, self._cost)

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
          idle: it would only add memory held and traffic nobody can check."""
        first = self.model.first
        T = values.shape[0]
        idle = activity.idle_windows(values, first.metric_names, self._thresholds)
        ok = activity.allowed(idle, self._drives, T, first.M) & ~self._delayed_any[None, :]
        if first.footprint is None:
            return ok
        n = first.memory_metric()
        excess = 0.0
        if n is not None and np.isfinite(values[:, n]).any():
            excess = max(0.0, float(np.nanmedian(values[:, n])) - float(first.idle[n]))
        return ok & ~(first.unobserved() & (first.footprint > excess))[None, :]
