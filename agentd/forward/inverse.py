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
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import ValidationError
from ..generate import check_target, project_to_valid, target_matrix
from ..metrics import is_duplicated_breakdown
from ..plan import Plan
from ..trace import Trace
from .firstorder import CLASS_GROUP
from .model import ForwardModel, load_forward_model


@dataclass(frozen=True)
class InverseSettings:
    outer: int = 3               # re-linearizations (φ and the correction at the current plan)
    iterations: int = 150        # projected-gradient steps per outer pass
    idle_weight: float = 2e-3    # λ_idle
    unobserved_cost: float = 4.0  # λ_idle × this for stressors whose resource no metric observes
    change_weight: float = 0.05  # λ_change
    steady_tolerance: float = 0.02
    rms_reweight: bool = True    # per-metric weights 1 / max(RMS_n, rms_floor) between outer passes
    rms_floor: float = 0.02
    first_order_only: bool = False
    chunk_windows: int = 512     # windows solved at once: bounds the working set and the time between progress calls


def fitted_metrics(names: list[str], units: list[str]) -> np.ndarray:
    """[N] weights: 1 for metrics the planner fits, 0 for gauges and duplicated breakdowns."""
    present = set(names)
    return np.array([0.0 if unit == "B" or is_duplicated_breakdown(name, present) else 1.0
                     for name, unit in zip(names, units)])


def project_columns(x: np.ndarray) -> np.ndarray:
    """[..., M, K] -> the Euclidean projection of every thread's column onto
    {v ∈ [0, 1]^M : Σ v ≤ 1}."""
    v = np.moveaxis(x, -2, -1)                                    # [..., K, M]
    shape = v.shape
    v = v.reshape(-1, shape[-1])
    box = np.clip(v, 0.0, 1.0)
    over = box.sum(axis=1) > 1.0
    if over.any():
        w = v[over]
        u = -np.sort(-w, axis=1)
        css = np.cumsum(u, axis=1) - 1.0
        idx = np.arange(1, w.shape[1] + 1)
        cond = u - css / idx > 0
        rho = w.shape[1] - 1 - np.argmax(cond[:, ::-1], axis=1)
        theta = css[np.arange(len(w)), rho] / (rho + 1)
        box[over] = np.clip(w - theta[:, None], 0.0, 1.0)
    return np.moveaxis(box.reshape(shape), -1, -2)


class InversePlanner:
    """The forward model inverted, behind the Generator protocol (agentd/generate.py)."""

    name = "inverse"

    def __init__(self, model: ForwardModel | Path | str, settings: InverseSettings | None = None):
        self.model = model if isinstance(model, ForwardModel) else load_forward_model(model)
        self.model_dir = None if isinstance(model, ForwardModel) else str(model)
        self.settings = settings or InverseSettings()
        if self.settings.first_order_only:
            self.name = "inverse-first-order"
        first = self.model.first
        self.weights = fitted_metrics(first.metric_names, first.units)
        G = first.gain / self.model.scales                        # [M, K, N] scaled
        self._G = G
        # What a unit of each stressor costs beyond its fit: the same for all, except that a stressor
        # driving a resource no metric observes (memory bandwidth without a PMU) costs more — its
        # contention cannot be checked against the target, so it is not used to fill in CPU time.
        self._cost = 1.0 + self.settings.unobserved_cost * first.unobserved()

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
                    seed=int(seed), provenance=prov, host_fingerprint=dict(model.host_fingerprint)).validate()

    def solve(self, values: np.ndarray, progress=None) -> tuple[np.ndarray, dict]:
        """Target values [T, N] (NaN = not in the target) -> compositions [T, M, K] float32, info.

        Solved chunk by chunk (settings.chunk_windows windows; each chunk starts from the last
        window of the one before, which its change term and correction see as the previous
        window) in float32: the working set is a chunk's, not T x M x K float64 arrays several
        times over (gigabytes at /v1/generate's window cap), and `progress(done, T)` after each
        chunk lets the caller stop it (a /v1/generate whose client went away)."""
        model, s = self.model, self.settings
        first = model.first
        T = values.shape[0]
        scales = model.scales
        mask = (np.isfinite(values) & (self.weights > 0)).astype(np.float32) * self.weights.astype(np.float32)
        y = np.nan_to_num(values / scales, nan=0.0).astype(np.float32)
        diff = np.abs(np.diff(y, axis=0, prepend=y[:1])) * (mask > 0)
        nobs = np.maximum((mask > 0).sum(axis=1), 1)
        steady = np.exp(-diff.sum(axis=1) / nobs / s.steady_tolerance)
        steady[0] = 0.0
        lam_c = (s.change_weight * steady).astype(np.float32)      # [T]: couples t with t−1
        del diff
        allowed = self.allowed(values)
        cost = self.cost(values)
        a = np.zeros((T, first.M, first.K), np.float32)
        err_sq, n_obs = 0.0, 0
        chunk = max(1, int(s.chunk_windows))
        for start in range(0, T, chunk):
            end = min(T, start + chunk)
            left = a[start - 1] if start > 0 else None
            a[start:end], e, n = self._solve_chunk(y[start:end], mask[start:end], lam_c[start:end], left,
                                                   allowed, cost)
            err_sq, n_obs = err_sq + e, n_obs + n
            if progress is not None:
                progress(end, T)
        return a, {"rms": float(np.sqrt(err_sq / max(n_obs, 1)))}

    def _solve_chunk(self, y, mask, lam_c, left, allowed, cost) -> tuple[np.ndarray, float, int]:
        """One chunk's windows: (compositions [C, M, K] float32, sum of squared scaled errors of
        its prediction, observed cells). `left` [M, K] is the window before the chunk (None at
        the start: idle before the plan, as predict_plan has it)."""
        model, s = self.model, self.settings
        first = model.first
        C = y.shape[0]
        scales = model.scales
        idle_s = (first.idle / scales).astype(np.float32)
        a = np.zeros((C, first.M, first.K), np.float32)
        prev0 = np.zeros_like(a[:1]) if left is None else left[None].astype(np.float32)
        corr = np.zeros((C, first.N), np.float32)
        use_corr = model.has_correction and not s.first_order_only
        observed = mask > 0
        reweight = np.ones(first.N, np.float32)
        passes = max(1, s.outer)
        for i in range(passes):
            phi = first.group_scale(a).astype(np.float32)               # [C, N]
            if use_corr:
                prev = np.concatenate([prev0, a[:-1]])
                corr = (model.correction(a, prev)[0] / scales).astype(np.float32)
            a = self._fista(a, y - idle_s - corr, phi, mask * reweight, lam_c, s.iterations, allowed, cost,
                            left=None if left is None else prev0[0])
            if s.rms_reweight and i < passes - 1:
                reweight = self.metric_reweight(a, y, observed, use_corr, prev0).astype(np.float32)
        pred = self._predict(a, prev0, use_corr) / scales
        err = (pred - y) * observed
        return a, float((err.astype(np.float64) ** 2).sum()), int(observed.sum())

    def _predict(self, a: np.ndarray, prev0: np.ndarray, use_corr: bool) -> np.ndarray:
        """predict_plan for a chunk whose previous window is prev0 [1, M, K]."""
        prev = np.concatenate([prev0, a[:-1]])
        return self.model.predict(a, prev, first_order_only=not use_corr)[0]

    def metric_reweight(self, a: np.ndarray, y: np.ndarray, observed: np.ndarray, use_corr: bool,
                        prev0: np.ndarray | None = None) -> np.ndarray:
        """[N] factors 1 / max(RMS_n, floor) of the current plan's predicted error per metric
        (scaled units), mean 1 over the metrics the target has: the IRLS step for Σ_n RMS_n.
        prev0 [1, M, K]: the window before `a` (idle when None)."""
        prev0 = np.zeros_like(a[:1]) if prev0 is None else prev0
        pred = self._predict(a, prev0, use_corr) / self.model.scales
        n_obs = observed.sum(axis=0)
        has = n_obs > 0
        rms = np.sqrt((((pred - y) * observed) ** 2).sum(axis=0) / np.maximum(n_obs, 1))
        f = np.where(has, 1.0 / np.maximum(rms, self.settings.rms_floor), 0.0)
        return f / f[has].mean() if has.any() else np.ones_like(f)

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
        """[M] bool: the stressors a plan for this target may use. A stressor whose buffer is held
        for the whole run (memory footprint) and whose work no metric observes is left out unless
        the target held that much memory above the host's idle: it would only add memory held and
        traffic nobody can check."""
        first = self.model.first
        ok = np.ones(first.M, bool)
        if first.footprint is None:
            return ok
        n = first.memory_metric()
        excess = 0.0
        if n is not None and np.isfinite(values[:, n]).any():
            excess = max(0.0, float(np.nanmedian(values[:, n])) - float(first.idle[n]))
        return ok & ~(first.unobserved() & (first.footprint > excess))

    def _fista(self, a0, resid_target, phi, mask, lam_c, iterations, allowed=None, cost=None, left=None):
        """Projected accelerated gradient on the linearized problem (φ fixed), in a0's dtype
        (float32 from solve). mask [T, N]: the metric weights (0 where the target has no value).
        left [M, K]: a fixed window before a0's first (a chunk's neighbour), or None."""
        T, M, K = a0.shape
        dt = a0.dtype
        cost = self._cost if cost is None else cost
        lam_i = (self.settings.idle_weight * cost)[:, None].repeat(K, axis=1).reshape(-1).astype(dt)   # [MK]
        G64 = self._G.reshape(M * K, -1)                               # [MK, N]
        G = G64.astype(dt)
        Gt = np.ascontiguousarray(G.T)
        w = (mask * phi).astype(dt)
        # Lipschitz constant of the fit term's gradient: 2 ‖G diag(√max_t w φ)‖² (φ ≤ 1)
        wmax = np.max(w * phi, axis=0, initial=0.0).astype(np.float64)
        lip_fit = 2.0 * float(np.linalg.norm(G64 * np.sqrt(wmax), 2) ** 2)
        lip = lip_fit + 8.0 * float(lam_c.max(initial=0.0)) + 1e-9
        step = dt.type(1.0 / lip)
        lam_c = lam_c.astype(dt)
        resid_target = resid_target.astype(dt, copy=False)
        phi = phi.astype(dt, copy=False)
        x = a0.copy()
        z, t_k = x.copy(), 1.0
        for _ in range(iterations):
            r = phi * (z.reshape(T, -1) @ G) - resid_target            # [T, N]
            grad = (2.0 * ((w * r) @ Gt) + lam_i).reshape(T, M, K)
            d = np.zeros_like(z)
            d[1:] = z[1:] - z[:-1]
            if left is not None:
                d[0] = z[0] - left                                     # the chunk's fixed neighbour
            cd = lam_c[:, None, None] * d                              # λ_t (a_t − a_{t−1})
            grad += 2.0 * cd
            grad[:-1] -= 2.0 * cd[1:]
            x_new = project_columns(z - step * grad)
            if allowed is not None:
                x_new *= allowed[None, :, None]
            t_new = (1.0 + math.sqrt(1.0 + 4.0 * t_k * t_k)) / 2.0
            z = x_new + dt.type((t_k - 1.0) / t_new) * (x_new - x)
            x, t_k = x_new, t_new
        return x
