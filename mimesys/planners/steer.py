"""The forward model steering a sampler: what a diffusion model's plan is nudged and finished by.

A diffusion model proposes each window's composition by denoising; the forward model knows
what a composition does to the host. `ForwardSteer` joins them the way classifier guidance
joins a generator and a differentiable critic (Dhariwal & Nichol 2021; on the predicted clean
sample, as Chung et al. 2023 and Bansal et al. 2023 do): at each DDIM step the predicted
composition â₀ is moved down the gradient of the forward model's predicted error against the
target window,

    E(a) = Σ_n w_n ((f(a)_n − o_n) / s_n)² + λ_idle Σ a

with f the first-order model (linear in a once its contention factors are fixed at â₀: the
part that is cheap and exact to differentiate), s_n the target's own range and w_n the metrics
the inverse planner fits. The step is the inverse planner's majorized one (a Jacobi step per
stressor and thread, so one unit of `weight` never overshoots), projected back onto the valid
set, on the stressors the no-invented-activity rule allows in that window only.

After sampling, the plan is finished by the inverse planner's solve (the same objective, device
queue, rounding, dead time and CPU matching as its own plans) started from the model's plan
(`warm_start`; the time it gives stressors whose resource no metric of the target observes
handed to the compute filler first: `hand_to_filler`) with fewer steps than the inverse
planner takes from idle (60 + 2 × 30 against 150 + 2 × 60): the model, taught by that solve,
starts it near its answer. Every byte rate is then capped at the target's level plus the
host's noise (`activity.cap_to_target`: a plan may not write 1 GB/s where the target wrote
20 MB/s, busy or not), and the plan names each core's busy fraction for the runner to hold
(`core_busy_target`). With `restrict` the solve sizes only the stressors the model runs in a
window (more than `support_share` of it, over its threads; and the compute filler, which drives
nothing).

What each part is worth, through the forward model's prediction of the plans on the six real
mixes of bench/results/fidelity/taught-2026-11-28 (a proxy used to choose, not evidence; a model
trained on taught samples only, three seeds; the inverse planner 0.056 of the targets' own range
off at 1,755 windows/s on 3,000 windows here):

| finish | predicted | windows/s |
|---|---|---|
| none (the model's own plan) | 0.144 | 9,110 |
| the model's stressors, from idle, 150 + 60 steps | 0.069 | 1,852 |
| the model's stressors, from its plan, 150 + 60 | 0.066 | 1,919 |
| the model's stressors, from its plan, 60 + 30 | 0.068 | 2,635 |
| any allowed stressor, from idle, 30 + 15 | 0.084 | 2,501 |
| any allowed stressor, from its plan, 30 + 15 | 0.069 | 2,536 |
| any allowed stressor, from its plan, 60 + 30 (the default) | 0.061 | 2,072 |

On real replays the model's stressors alone fell short: sized on them the plans drove the
cores with compression and contended kernels where the inverse planner uses its filler (per-core
CPU 0.023 against 0.008; bench/results/fidelity/taught-only-2026-11-29). Finished from its own plan
a taught model still drives the cores that way (per-core 0.016 against inverse's 0.011 on six real
mixes); aligned by DDPO against the forward model first it does not (0.0068), at a resource mean
beside inverse's (0.069 and 0.072, replay spread 0.03; bench/results/fidelity/ablation-2026-11-29).

The nudge, at each DDIM step (`weight` above 0), moves a sample far less than the solve: a
taught model nudged and capped only was predicted 0.41 of the targets' own range off on six
real mixes, against 0.09 for the inverse planner; once the plan is finished it moved nothing
the prediction can see (0.070 nudged, 0.069 not, three seeds), and a nudge between the
denoiser's steps costs agents the fused sampler (planners/diffusion/). It is off by default.
With weight 0 and no finishing the model's own plan comes out (the ablation's "without
guidance" row).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import activity
from ..forward.model import ForwardModel
from .base import project_to_valid
from .inverse import InversePlanner, InverseSettings


@dataclass(frozen=True)
class SteerSettings:
    weight: float = 0.0          # share of a full majorized step per DDIM step (0: no nudge; see below)
    inner_steps: int = 2         # gradient steps per DDIM step
    finish: bool = True          # the solve from the model's plan, the magnitude cap, the held core busy
    support_share: float = 0.005  # a stressor the model runs less than this of a window (all threads) is not chosen
    # (0.02 left a taught x0-prediction model 3-7 of ~20 allowed stressors a window, predicted 0.113 of the
    # targets' own range off on six real mixes; 0.005 leaves it 9-12, predicted 0.076; inverse 0.060)
    warm_start: bool = True      # the finish's solve starts from the model's plan, not from idle
    restrict: bool = False       # the finish sizes the model's stressors only (False: any the target allows)
    iterations: int = 60         # the finish's first-pass solve steps (InverseSettings.iterations; inverse: 150)
    refine_iterations: int = 30  # ... and each later pass's (inverse: 60)

    def to_dict(self) -> dict:
        return {"weight": self.weight, "inner_steps": self.inner_steps, "finish": self.finish,
                "support_share": self.support_share, "warm_start": self.warm_start,
                "iterations": self.iterations, "refine_iterations": self.refine_iterations,
                "restrict": self.restrict}

    @classmethod
    def from_dict(cls, d: dict) -> "SteerSettings":
        # an export made before warm starts finishes as it did then: from idle, 150 + 60 steps
        return cls(weight=float(d.get("weight", 0.0)), inner_steps=int(d.get("inner_steps", 2)),
                   finish=bool(d.get("finish", True)), support_share=float(d.get("support_share", 0.005)),
                   warm_start=bool(d.get("warm_start", False)), restrict=bool(d.get("restrict", True)),
                   iterations=int(d.get("iterations", 150)), refine_iterations=int(d.get("refine_iterations", 60)))


@dataclass
class SteerTarget:
    """What the steer needs of one target, decided once from the whole trace."""

    values: np.ndarray     # [T, N] in the forward model's metric order, NaN where absent
    y: np.ndarray          # [T, N] scaled target (0 where absent)
    w: np.ndarray          # [T, N] fitted-metric weights (0 where absent)
    allowed: np.ndarray    # [T, M] stressors each window may use
    gs: np.ndarray         # [M, K, N] gains in the target's scale
    idle_s: np.ndarray     # [N] the host's idle level in the target's scale
    lam: np.ndarray        # [M, K] idle cost per unit
    inv_d: np.ndarray      # [M, K] Jacobi step sizes


class ForwardSteer:
    def __init__(self, forward: ForwardModel, settings: SteerSettings | None = None):
        self.forward = forward
        self.settings = s = settings or SteerSettings()
        self.inverse = InversePlanner(forward, InverseSettings(iterations=s.iterations,
                                                               refine_iterations=s.refine_iterations))

    def prepare(self, values: np.ndarray) -> SteerTarget:
        """values [T, N] in the forward model's metric order."""
        inv, first = self.inverse, self.forward.first
        scales = inv.rules.scales(values)
        w = inv.fit_mask(values).astype(np.float64)
        gs = first.gain / scales
        lam = np.repeat((inv.settings.idle_weight * inv.rules.cost(values))[:, None], first.K, axis=1)
        # the Gershgorin bound on each row of 2 Gᵀ diag(w) G at the trace's largest weights (as the
        # inverse planner's FISTA): a step of weight 1 never overshoots in any window
        absg = np.abs(gs).reshape(first.M * first.K, first.N) * np.sqrt(w.max(axis=0, initial=0.0))
        curv = 2.0 * (absg @ absg.sum(axis=0)) + 1e-9
        allowed = inv.rules.allowed(values) & inv.cpu.pressure_allowed(values)
        return SteerTarget(values, np.nan_to_num(values / scales, nan=0.0), w, allowed, gs,
                           first.idle / scales, lam, (1.0 / curv).reshape(first.M, first.K))

    def nudge(self, a: np.ndarray, t: int, target: SteerTarget) -> np.ndarray:
        """a [M, K] (a composition, valid) -> a moved toward window t's target."""
        s = self.settings
        if s.weight <= 0:
            return a
        first = self.forward.first
        keep = target.allowed[t][:, None]
        a = np.asarray(a, np.float64) * keep
        for _ in range(max(1, s.inner_steps)):
            e = first.effective(a[None])
            phi = first.group_scale(e)[0]                                    # [N]
            pred = target.idle_s + phi * np.einsum("mk,mkn->n", e[0], target.gs)
            r = (pred - target.y[t]) * target.w[t]                           # [N]
            grad = 2.0 * np.einsum("n,mkn->mk", r * phi, target.gs) + target.lam
            a = project_to_valid((a - s.weight * target.inv_d * grad) * keep).astype(np.float64)
        return a.astype(np.float32)

    def finish(self, compositions: np.ndarray, target: SteerTarget) -> tuple[np.ndarray, np.ndarray | None, dict]:
        """compositions [T, M, K] -> (finished compositions, core_busy_target [T, K] or None, what it did)."""
        if not self.settings.finish:
            return compositions, None, {}
        inv, first = self.inverse, self.forward.first
        values = target.values
        chosen = np.asarray(compositions, np.float64).sum(axis=2) > self.settings.support_share    # [T, M]
        filler = inv.cpu.filler(target.allowed)
        if filler is not None:
            chosen[:, filler] = True
        start = None
        if self.settings.warm_start:
            unchecked = inv.rules.cost(values) > 1.0
            start = first.effective(hand_to_filler(np.asarray(compositions, np.float64), unchecked, filler, first.own))
        a, _ = inv.solve(values, restrict=chosen if self.settings.restrict else None, start=start)
        a, capped = activity.cap_to_target(a, values, first.metric_names, first.units,
                                           np.asarray(first.idle, np.float64), inv.rules.idle_margins, first.response)
        busy = inv.core_busy_target(values) if inv.settings.hold_core_busy else None
        info = {"stressors_chosen_per_window": round(float((chosen & target.allowed).sum(axis=1).mean()), 2),
                "stressors_allowed_per_window": round(float(target.allowed.sum(axis=1).mean()), 2),
                "entries_capped": capped}
        return project_to_valid(a), busy, info


def hand_to_filler(a: np.ndarray, unchecked: np.ndarray, filler: int | None, own: np.ndarray) -> np.ndarray:
    """a [T, M, K] with the time of the `unchecked` stressors [M] (a resource no metric of the
    target observes: the memory hierarchy without a PMU) given to the compute filler, at the same
    busy share of the thread's core: the warm start the finish solves from.

    Nothing in the target can confirm such a stressor, so the model's choice of one is a guess
    that the solve keeps (it moves only what the fit sees), and a neighbour feels it: on four real
    memory mixes a base model's own plans spent 0.12-0.26 of each thread's time in memory-bandwidth
    stressors (inverse's ≤ 0.015), and a colocated PostgreSQL lost 18 % of its throughput next to
    them against 6 % next to inverse's (bench/results/colocation-floor); finished from a DDPO-aligned
    model's plans without this hand-off, 0.03-0.08 of each thread's time stayed in cache stressors
    where inverse's plans had none. The solve may still use them, at their cost, where the fit
    asks for it, as the inverse planner does from idle."""
    if filler is None or not unchecked.any():
        return a
    a = a.copy()
    moved = np.einsum("tmk,m->tk", a[:, unchecked, :], own[unchecked]) / max(float(own[filler]), 1e-9)
    a[:, unchecked, :] = 0.0
    a[:, filler, :] += moved
    return a
