"""The inverse planner's solve: the target's scales and the change term decided once from the
whole target, then the windows solved chunk by chunk — outer passes that re-linearize the model
(φ and the learned correction at the current plan) around FISTA, the metric weights re-weighted
between them, and the post-solve steps (segments.py, cpu.py) on each chunk's result."""

from __future__ import annotations

import warnings

import numpy as np

from ...forward.model import ForwardModel
from .cpu import CoreMatch
from .fista import fista
from .segments import Segments

# Full-scale floors for the target's own range (its noise): a busy fraction moves by a few
# per cent on an idle core; other rates by a small share of what the host can do.
FRACTION_SCALE_FLOOR = 0.05
RATE_SCALE_FLOOR = 0.01


def target_scales(model: ForwardModel, margins: np.ndarray, values: np.ndarray) -> np.ndarray:
    """[N] each metric's scale in the fit: the target's own range (p99 over its windows less
    the lower of its p1 and the host's idle level), floored by the host's noise — errors are
    weighed as a person reading the overlay weighs them, not against the device's capacity,
    so a little traffic where the target had none costs in full. margins [N]: the idle margins
    of the metrics that say a resource is busy (NaN for the rest)."""
    first = model.first
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)   # a metric the target lacks: all NaN
        hi = np.nanpercentile(values, 99, axis=0)
        lo = np.nanpercentile(values, 1, axis=0)
    span = np.nan_to_num(hi - np.minimum(lo, first.idle), nan=0.0)
    floor = np.where(first.fraction, FRACTION_SCALE_FLOOR, RATE_SCALE_FLOOR * model.scales)
    floor = np.where(np.isfinite(margins), margins, floor)   # cause metrics: the idle margin
    return np.maximum(span, np.maximum(floor, 1e-12))


def change_weights(y: np.ndarray, mask: np.ndarray, change_weight: float, steady_tolerance: float) -> np.ndarray:
    """float32 [T]: λ_change · steady_t, which couples window t with t−1; steady_t =
    exp(−mean |y_t − y_{t−1}| / steady_tolerance) over the metrics the target has (y [T, N]
    scaled), 0 for the first window."""
    diff = np.abs(np.diff(y, axis=0, prepend=y[:1])) * (mask > 0)
    nobs = np.maximum((mask > 0).sum(axis=1), 1)
    steady = np.exp(-diff.sum(axis=1) / nobs / steady_tolerance)
    del diff
    steady[0] = 0.0
    return (change_weight * steady).astype(np.float32)


class Solver:
    """The chunked solve of one target, its post-solve steps included."""

    def __init__(self, model: ForwardModel, settings, cpu: CoreMatch, segments: Segments):
        self.model, self.settings = model, settings      # settings: InverseSettings
        self.cpu, self.segments = cpu, segments
        first = model.first
        # the cores' busy fractions and host-wide CPU, their mean (FirstOrder.derive): never
        # through the correction (CoreMatch.match says why)
        self.core_metrics = [n for n, _ in cpu.cores] + \
            ([int(first.host_cpu[0])] if first.host_cpu is not None else [])

    def solve(self, values: np.ndarray, scales: np.ndarray, mask: np.ndarray, allowed: np.ndarray,
              cost: np.ndarray, progress=None, init: np.ndarray | None = None) -> tuple[np.ndarray, dict]:
        """Target values [T, N] with each metric's scale [N], fit weights [T, N], the stressors each
        window may use [T, M] and their cost [M] -> compositions [T, M, K] float32, info. Each
        chunk starts from the last window of the one before, which its change term and correction
        see as the previous window; `progress(done, T)` after each chunk lets the caller stop it.
        init [T, M, K]: effective shares the first pass starts from (zeros when None)."""
        first, s = self.model.first, self.settings
        T = values.shape[0]
        y = np.nan_to_num(values / scales, nan=0.0).astype(np.float32)
        lam_c = change_weights(y, mask, s.change_weight, s.steady_tolerance)
        G = first.gain / scales                                   # [M, K, N] in the target's scale
        a = np.zeros((T, first.M, first.K), np.float32)
        err_sq, n_obs = 0.0, 0
        chunk = chunk_windows(s, first.M, first.K)
        for start in range(0, T, chunk):
            end = min(T, start + chunk)
            prev0 = a[start - 1:start] if start > 0 else np.zeros_like(a[:1])
            a[start:end], e, n = self._solve_chunk(values[start:end], y[start:end], mask[start:end], lam_c[start:end],
                                                   prev0, start > 0, allowed[start:end], cost, G, scales,
                                                   None if init is None else init[start:end])
            err_sq, n_obs = err_sq + e, n_obs + n
            if progress is not None:
                progress(end, T)
        return a, {"rms": float(np.sqrt(err_sq / max(n_obs, 1)))}

    def _solve_chunk(self, values, y, mask, lam_c, prev0, fixed_left, allowed, cost, G, scales, init=None):
        """One chunk's windows -> (compositions [C, M, K] float32, sum of squared scaled errors of
        its prediction, observed cells). prev0 [1, M, K]: the window before the chunk (idle before
        the plan's first); `fixed_left`: the change term holds the chunk's first window to it."""
        model, s = self.model, self.settings
        first = model.first
        C = y.shape[0]
        idle_s = (first.idle / scales).astype(np.float32)
        a = np.zeros((C, first.M, first.K)) if init is None else \
            np.asarray(init, np.float64) * allowed[:, :, None]
        corr = np.zeros((C, first.N), np.float32)
        use_corr = model.has_correction and not s.first_order_only
        observed = mask > 0
        reweight = np.ones(first.N, np.float32)
        passes = max(1, s.outer)
        left = prev0[0] if fixed_left else None
        # only the stressors some window may use enter the solve (the rest stay 0)
        use = np.flatnonzero(allowed.any(axis=0))
        for i in range(passes):
            # the solve is in effective shares (what moves bytes: FirstOrder.effective); the
            # correction and the predictions see the segments that would be planned for them
            phi = first.group_scale(a)                              # [C, N]
            if use_corr:
                planned = first.planned(a)
                corr = (self._correction(planned, np.concatenate([prev0, planned[:-1]])) / scales).astype(np.float32)
            if use.size:
                a[:, use] = fista(a[:, use], G[use], y - idle_s - corr, phi, mask * reweight, lam_c,
                                  s.iterations if i == 0 else s.refine_iterations, s.idle_weight * cost[use],
                                  allowed[:, use], left=None if left is None else left[use])
            if s.rms_reweight and i < passes - 1:
                reweight = self.metric_reweight(first.planned(a), y, observed, use_corr, scales, prev0).astype(np.float32)
        a = self.segments.shape(self.cpu.cap_pressure(a, values), self.cpu.busy_target(values))
        if s.cpu_first:   # then rounded again: the filler's top-up is no exception (≤ 5 ms of CPU)
            a = self.segments.round_to_quanta(self.cpu.match(a, values, allowed))
        pred = self._predict(a, prev0, use_corr) / scales
        err = (pred - y) * observed
        return a.astype(np.float32), float((err ** 2).sum()), int(observed.sum())

    def _predict(self, a: np.ndarray, prev0: np.ndarray, use_corr: bool) -> np.ndarray:
        """predict_plan for a chunk whose previous window is prev0 [1, M, K], the cores from the
        plan's columns alone (CoreMatch.match says why)."""
        first = self.model.first
        x = first.predict(a)
        if not use_corr:
            return x
        return first.clip(x + self._correction(a, np.concatenate([prev0.astype(a.dtype), a[:-1]])))

    def _correction(self, a: np.ndarray, a_prev: np.ndarray) -> np.ndarray:
        """The learned correction [C, N] in metric units, 0 on the cores."""
        corr = self.model.correction(a, a_prev)[0]
        corr[:, self.core_metrics] = 0.0
        return corr

    def metric_reweight(self, a: np.ndarray, y: np.ndarray, observed: np.ndarray, use_corr: bool,
                        scales: np.ndarray, prev0: np.ndarray | None = None) -> np.ndarray:
        """[N] factors 1 / max(RMS_n, floor) of the current plan's predicted error per metric
        (scaled units), mean 1 over the metrics the target has: the IRLS step for Σ_n RMS_n.
        prev0 [1, M, K]: the window before `a` (idle when None)."""
        prev0 = np.zeros_like(a[:1]) if prev0 is None else prev0
        return irls_factors(self._predict(a, prev0, use_corr) / scales, y, observed, self.settings.rms_floor)


def chunk_windows(settings, M: int, K: int) -> int:
    """Windows solved at once: settings.chunk_windows, or as many as keep a chunk's arrays near
    settings.chunk_cells entries (256 to 4096)."""
    if settings.chunk_windows:
        return max(1, int(settings.chunk_windows))
    return max(1, int(np.clip(settings.chunk_cells // max(M * K, 1), 256, 4096)))


def irls_factors(pred: np.ndarray, y: np.ndarray, observed: np.ndarray, floor: float) -> np.ndarray:
    """[N] 1 / max(RMS_n, floor) of the prediction's error per metric over the observed cells,
    mean 1 over the metrics observed (ones when none is)."""
    n_obs = observed.sum(axis=0)
    has = n_obs > 0
    rms = np.sqrt((((pred - y) * observed) ** 2).sum(axis=0) / np.maximum(n_obs, 1))
    f = np.where(has, 1.0 / np.maximum(rms, floor), 0.0)
    return f / f[has].mean() if has.any() else np.ones_like(f)
