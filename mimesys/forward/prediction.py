"""Burst statistics of a plan's trace on a host, predicted without running it.

    trace = predicted_trace(fm, plan)            # the forward model's trace of the plan
    stats = predict_bursts(fm, plan)             # resource -> mimesys.bursts.BurstStats

Thresholds are relative to the model's full scale per metric (1 for fractions, else the host's
capacity as the solo profile and calibration measured it): the same peaks `model_peaks` gives
to the measured side when the prediction is scored (controller/forward_fit/burst_score.py).
"""

from __future__ import annotations

import numpy as np

from .. import bursts
from ..errors import ValidationError
from ..metrics import MetricSpec
from ..trace import Trace


def model_peaks(fm) -> dict[str, float]:
    """metric -> the peak its burst threshold is relative to, on the model's host."""
    return {n: float(s) for n, s, frac in zip(fm.metric_names, fm.scales, fm.first.fraction) if not frac}


def check_plan(fm, plan, where: str = "plan") -> None:
    if plan.catalog_hash != fm.catalog_hash:
        raise ValidationError(f"{where}: catalog {plan.catalog_hash} differs from the forward model's {fm.catalog_hash}")
    if plan.K != fm.threads:
        raise ValidationError(f"{where}: {plan.K} threads, the forward model has {fm.threads}")


def with_held(first, x: np.ndarray, held_B: np.ndarray | None) -> np.ndarray:
    """Predictions x [T, N] of a plan's windows with the memory it holds in each (Plan.mem_held_B)
    added to used memory: the runner's held pages are anonymous memory, used one for one."""
    n = first.memory_metric()
    if held_B is None or n is None:
        return x
    x = np.array(x, np.float64)
    x[:, n] += np.asarray(held_B, np.float64)[:len(x)]   # not capped at the profile's most: it held none
    return x


def predicted_trace(fm, plan, *, first_order_only: bool = False, provenance: dict | None = None) -> Trace:
    """The trace the forward model predicts for `plan` (window by window, each conditioned on
    the previous composition); the ensemble's mean spread goes to the provenance."""
    check_plan(fm, plan)
    pred, std = fm.predict_plan(plan.compositions, first_order_only=first_order_only)
    pred = with_held(fm.first, pred, plan.mem_held_B)
    metrics = [MetricSpec(n, u, source="forward-model") for n, u in zip(fm.metric_names, fm.first.units)]
    prov = {"predicted": True, "first_order_only": bool(first_order_only),
            "mean_std_scaled": {n: float(s) for n, s in zip(fm.metric_names, (std / fm.scales).mean(axis=0))}}
    return Trace(pred.astype(np.float32), metrics, window_s=plan.window_s, host_fingerprint=fm.host_fingerprint,
                 provenance={**prov, **(provenance or {})}, simulated=fm.simulated)


def predict_bursts(fm, plan, *, first_order_only: bool = False) -> dict[str, bursts.BurstStats]:
    tr = predicted_trace(fm, plan, first_order_only=first_order_only)
    return bursts.trace_burst_stats(tr, peaks=model_peaks(fm))
