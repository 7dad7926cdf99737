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
(`segments.merge_equivalents`), a window's disk IO is put on one thread
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
target, `rules.py` which metrics are fitted and which stressors a target allows; this module
the settings and the planner that puts them together.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ...errors import ValidationError
from ..base import check_target, project_to_valid, target_matrix
from ...plan import Plan
from ...trace import Trace
from ...forward.model import ForwardModel, load_forward_model
from .cpu import CoreMatch
from .rules import TargetRules
from .segments import Segments, equivalence_classes, quanta
from .solver import Solver


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


class InversePlanner:
    """The forward model inverted, behind the Generator protocol (planners/base.py)."""

    name = "inverse"

    def __init__(self, model: ForwardModel | Path | str, settings: InverseSettings | None = None):
        self.model = model if isinstance(model, ForwardModel) else load_forward_model(model)
        self.model_dir = None if isinstance(model, ForwardModel) else str(model)
        self.settings = s = settings or InverseSettings()
        if s.first_order_only:
            self.name = "inverse-first-order"
        self.rules = rules = TargetRules(self.model, s.unobserved_cost)
        drives = np.stack([rules.drives[r] for r in sorted(rules.drives)] + [rules.delayed_any], axis=1)
        equivalents = equivalence_classes(self.model, rules.weights > 0, rules.base_cost, drives,
                                          s.equivalence_tolerance)
        self.cpu = CoreMatch(self.model.first, rules.drives_any, s.cpu_tolerance)
        self.segments = Segments(self.model, rules.drives_any, equivalents, quanta(self.model, s.min_segment_s),
                                 s.cpu_tolerance)
        self.solver = Solver(self.model, s, self.cpu, self.segments)

    def generate(self, trace: Trace, *, seed: int = 0, progress=None) -> Plan:
        model, weights = self.model, self.rules.weights
        check_target(trace, model.window_s, "the forward model's")
        values, report = target_matrix(trace, model.metric_names)
        mask = np.isfinite(values) & (weights > 0)
        if not mask.any():
            raise ValidationError(f"the trace has none of the forward model's fitted metrics "
                                  f"({', '.join(n for n, w in zip(model.metric_names, weights) if w > 0)})")
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
        stressors each window may use: `rules`; `restrict` [T, M] narrows those); the plan is then solved
        chunk by chunk (settings.chunk_windows windows, or as many as keep a chunk's arrays near
        chunk_cells entries: 4096 windows for 43 stressors on 2 threads): the working set is a
        chunk's, not T × M × K arrays several times over (gigabytes at /v1/generate's window
        cap), and `progress(done, T)` after each chunk lets the caller stop it. `start` [T, M, K]:
        effective shares to start from (zeros otherwise), e.g. a learned generator's plan."""
        allowed = self.rules.allowed(values) & self.cpu.pressure_allowed(values)
        if restrict is not None:
            allowed &= restrict
        return self.solver.solve(values, self.rules.scales(values), self.fit_mask(values), allowed,
                                 self.rules.cost(values), progress, start)

    def fit_mask(self, values: np.ndarray) -> np.ndarray:
        """float32 [T, N]: the fit's weights (TargetRules.fit_mask) with this planner's cores."""
        return self.rules.fit_mask(values, [n for n, _ in self.cpu.cores])

    def core_busy_target(self, values: np.ndarray) -> np.ndarray | None:
        """float32 [T, K]: the target's busy fraction of each plan thread's core (CoreMatch.busy_target)."""
        return self.cpu.busy_target(values)
