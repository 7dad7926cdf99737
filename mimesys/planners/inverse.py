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
(`merge_equivalents`), a window's disk IO is put on one thread (`one_device_queue`: the
device serves one queue at a time), entries shorter than a stressor can run as planned are
dropped or raised (`round_to_quanta`), each segment is lengthened by its dead time
(`pad_dead_time`), and each core is brought to the target's busy fraction from the plan's
columns (`match_cpu`). The plan also names that fraction per thread and window
(`core_busy_target`), and the runner holds it: what a disk stressor costs
its core follows how fast the device answers that second, which no model of the host knows
in advance (on real replays ±0.03-0.05 of a core in single windows).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .. import activity
from ..errors import ValidationError
from .base import check_target, project_to_valid, target_matrix
from ..metrics import is_duplicated_breakdown
from ..plan import Plan
from ..trace import Trace
from ..forward.firstorder import CLASS_GROUP, core_index
from ..forward.model import ForwardModel, load_forward_model


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


# A stressor whose own-core busy share is within this of the compute filler's keeps its core
# as busy as the filler does: handing its time to the filler buys no CPU (match_cpu).
BUSY_AS_FILLER = 0.05

# Full-scale floors for the target's own range (its noise): a busy fraction moves by a few
# per cent on an idle core; other rates by a small share of what the host can do.
FRACTION_SCALE_FLOOR = 0.05
RATE_SCALE_FLOOR = 0.01


def project_columns(x: np.ndarray) -> np.ndarray:
    """[..., M, K] -> the Euclidean projection of every thread's column onto
    {v ∈ [0, 1]^M : Σ v ≤ 1}."""
    return project_columns_scaled(x, np.ones(x.shape[-2:]))


def project_columns_scaled(x: np.ndarray, inv_w: np.ndarray) -> np.ndarray:
    """[..., M, K] -> every thread's column projected onto {v ∈ [0, 1]^M : Σ v ≤ 1} in the norm
    Σ_m w_m (v_m − x_m)², w = 1 / inv_w [M, K] > 0 (the preconditioned step's own metric).
    `project_threads_scaled` on the transposed layout."""
    v = np.ascontiguousarray(np.moveaxis(x, -2, -1))
    return np.moveaxis(project_threads_scaled(v, np.ascontiguousarray(np.asarray(inv_w).T)), -1, -2)


def project_threads_scaled(v: np.ndarray, inv_w: np.ndarray) -> np.ndarray:
    """[..., K, M] (each thread's stressors contiguous, as the solver keeps them) -> each row
    projected onto {u ∈ [0, 1]^M : Σ u ≤ 1} in the norm Σ_m w_m (u_m − v_m)², w = 1 / inv_w
    [K, M] > 0: u_m = clip(v_m − θ·inv_w_m, 0, 1) with θ ≥ 0 the smallest that fits the window.
    θ is exact from the breakpoints v_m / inv_w_m, sorted, as in the Euclidean case (which is
    inv_w = 1); the upper bound 1 only binds where a row holds a single entry above 1."""
    shape = v.shape
    K, M = inv_w.shape
    rows = v.reshape(-1, M)
    box = np.clip(rows, 0.0, 1.0)
    over = np.flatnonzero(box.sum(axis=1) > 1.0)
    if over.size:
        w, q = rows[over], inv_w[over % K]                         # row = (window, thread)
        order = np.argsort(-(w / q), axis=1)
        ws, qs = np.take_along_axis(w, order, 1), np.take_along_axis(q, order, 1)
        theta_j = np.cumsum(ws, axis=1)
        theta_j -= 1.0
        theta_j /= np.cumsum(qs, axis=1)
        cond = ws - theta_j * qs > 0
        rho = M - 1 - np.argmax(cond[:, ::-1], axis=1)
        theta = np.maximum(theta_j[np.arange(len(w)), rho], 0.0)
        box[over] = np.clip(w - theta[:, None] * q, 0.0, 1.0)
    return box.reshape(shape)


class InversePlanner:
    """The forward model inverted, behind the Generator protocol (planners/base.py)."""

    name = "inverse"

    def __init__(self, model: ForwardModel | Path | str, settings: InverseSettings | None = None):
        self.model = model if isinstance(model, ForwardModel) else load_forward_model(model)
        self.model_dir = None if isinstance(model, ForwardModel) else str(model)
        self.settings = settings or InverseSettings()
        if self.settings.first_order_only:
            self.name = "inverse-first-order"
        first = self.model.first
        self.weights = fitted_metrics(first.metric_names, first.units)
        names = first.metric_names
        self._margins = activity.idle_margins(names, first.units, first.noise)
        self._thresholds = first.idle + self._margins
        self._drives = activity.stressor_drives(self._kernels(), response=first.response, names=names,
                                                margins=self._margins)
        self._drives_any = np.logical_or.reduce(list(self._drives.values()))   # [M]: drives some resource
        self._delayed_any = np.logical_or.reduce(list(activity.stressor_delays(self._kernels()).values()))
        self._cores = [(n, core_index(name)) for n, name in enumerate(names) if core_index(name) is not None]
        # ... and host-wide CPU, their mean (FirstOrder.derive)
        self._core_metrics = [n for n, _ in self._cores] + \
            ([int(self.model.first.host_cpu[0])] if self.model.first.host_cpu is not None else [])
        self._quanta = self.quanta()
        self._disk = np.array([c == "disk" for c in (first.classes or [None] * first.M)])   # one_device_queue
        # What a unit of each stressor costs beyond its fit: the same for all, except that a stressor
        # driving a resource no metric observes (memory bandwidth without a PMU) costs more — its
        # contention cannot be checked against the target, so it is not used to fill in CPU time.
        self._cost = 1.0 + self.settings.unobserved_cost * first.unobserved()
        self._equivalents = self.equivalence_classes()

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

    def core_busy_target(self, values: np.ndarray) -> np.ndarray | None:
        """float32 [T, K]: the target's busy fraction of each plan thread's core (NaN where the
        target has none), for the runner to hold; None when the target has no per-core CPU."""
        out = np.full((values.shape[0], self.model.first.K), np.nan, np.float32)
        for n, j in self._cores:
            k = self._core_thread(j)
            if k is not None:
                out[:, k] = np.clip(values[:, n], 0.0, 1.0)
        return out if np.isfinite(out).any() else None

    def _core_thread(self, core: int) -> int | None:
        """The plan thread that answers for a core's busy fraction: the first one pinned there
        (match_cpu sizes it, the runner holds it)."""
        return next((k for k, c in enumerate(self.model.first.thread_cores) if c == core), None)

    def solve(self, values: np.ndarray, progress=None, restrict: np.ndarray | None = None) -> tuple[np.ndarray, dict]:
        """Target values [T, N] (NaN = not in the target) -> compositions [T, M, K] float32, info.

        What needs the whole target is decided once (each metric's scale, the weights, which
        stressors each window may use); the plan is then solved chunk by chunk
        (settings.chunk_windows windows, or as many as keep a chunk's arrays near chunk_cells
        entries: 4096 windows for 43 stressors on 2 threads; each chunk starting from the last
        window of the one before, which its change term and correction see as the previous window): the working
        set is a chunk's, not T × M × K arrays several times over (gigabytes at /v1/generate's
        window cap), and `progress(done, T)` after each chunk lets the caller stop it."""
        model, s = self.model, self.settings
        first = model.first
        T = values.shape[0]
        scales = self.target_scales(values)
        mask = self.fit_mask(values)
        y = np.nan_to_num(values / scales, nan=0.0).astype(np.float32)
        diff = np.abs(np.diff(y, axis=0, prepend=y[:1])) * (mask > 0)
        nobs = np.maximum((mask > 0).sum(axis=1), 1)
        steady = np.exp(-diff.sum(axis=1) / nobs / s.steady_tolerance)
        del diff
        steady[0] = 0.0
        lam_c = (s.change_weight * steady).astype(np.float32)      # [T]: couples t with t−1
        allowed = self.allowed(values)
        if restrict is not None:
            allowed &= restrict
        cost = self.cost(values)
        G = first.gain / scales                                   # [M, K, N] in the target's scale
        a = np.zeros((T, first.M, first.K), np.float32)
        err_sq, n_obs = 0.0, 0
        chunk = int(s.chunk_windows) if s.chunk_windows else \
            int(np.clip(s.chunk_cells // max(first.M * first.K, 1), 256, 4096))
        chunk = max(1, chunk)
        for start in range(0, T, chunk):
            end = min(T, start + chunk)
            prev0 = a[start - 1:start] if start > 0 else np.zeros_like(a[:1])
            a[start:end], e, n = self._solve_chunk(values[start:end], y[start:end], mask[start:end], lam_c[start:end],
                                                   prev0, start > 0, allowed[start:end], cost, G, scales)
            err_sq, n_obs = err_sq + e, n_obs + n
            if progress is not None:
                progress(end, T)
        return a, {"rms": float(np.sqrt(err_sq / max(n_obs, 1)))}

    def _solve_chunk(self, values, y, mask, lam_c, prev0, fixed_left, allowed, cost, G, scales):
        """One chunk's windows -> (compositions [C, M, K] float32, sum of squared scaled errors of
        its prediction, observed cells). prev0 [1, M, K]: the window before the chunk (idle before
        the plan's first); `fixed_left`: the change term holds the chunk's first window to it."""
        model, s = self.model, self.settings
        first = model.first
        C = y.shape[0]
        idle_s = (first.idle / scales).astype(np.float32)
        a = np.zeros((C, first.M, first.K))
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
                a[:, use] = self._fista(a[:, use], G[use], y - idle_s - corr, phi, mask * reweight, lam_c,
                                        s.iterations if i == 0 else s.refine_iterations, allowed[:, use], cost[use],
                                        left=None if left is None else left[use])
            if s.rms_reweight and i < passes - 1:
                reweight = self.metric_reweight(first.planned(a), y, observed, use_corr, scales, prev0).astype(np.float32)
        a = self.pad_dead_time(self.round_to_quanta(self.one_device_queue(self.merge_equivalents(a), values)))
        if s.cpu_first:   # then rounded again: the filler's top-up is no exception (≤ 5 ms of CPU)
            a = self.round_to_quanta(self.match_cpu(a, values, allowed, prev0))
        pred = self._predict(a, prev0, use_corr) / scales
        err = (pred - y) * observed
        return a.astype(np.float32), float((err ** 2).sum()), int(observed.sum())

    def _predict(self, a: np.ndarray, prev0: np.ndarray, use_corr: bool) -> np.ndarray:
        """predict_plan for a chunk whose previous window is prev0 [1, M, K], the cores from the
        plan's columns alone (match_cpu says why)."""
        first = self.model.first
        x = first.predict(a)
        if not use_corr:
            return x
        return first.clip(x + self._correction(a, np.concatenate([prev0.astype(a.dtype), a[:-1]])))

    def _correction(self, a: np.ndarray, a_prev: np.ndarray) -> np.ndarray:
        """The learned correction [C, N] in metric units, 0 on the cores."""
        corr = self.model.correction(a, a_prev)[0]
        corr[:, self._core_metrics] = 0.0
        return corr

    def fit_mask(self, values: np.ndarray) -> np.ndarray:
        """float32 [T, N]: each metric's weight in the fit where the target has it, 0 elsewhere;
        host-wide CPU left out where the target has its cores (they say it, one by one)."""
        first = self.model.first
        weights = self.weights.copy()
        if any(np.isfinite(values[:, n]).any() for n, _ in self._cores) and "cpu.util" in first.metric_names:
            weights[first.metric_names.index("cpu.util")] = 0.0
        return ((np.isfinite(values) & (weights > 0)) * weights).astype(np.float32)

    def target_scales(self, values: np.ndarray) -> np.ndarray:
        """[N] each metric's scale in the fit: the target's own range (p99 over its windows less
        the lower of its p1 and the host's idle level), floored by the host's noise — errors are
        weighed as a person reading the overlay weighs them, not against the device's capacity,
        so a little traffic where the target had none costs in full."""
        first = self.model.first
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)   # a metric the target lacks: all NaN
            hi = np.nanpercentile(values, 99, axis=0)
            lo = np.nanpercentile(values, 1, axis=0)
        span = np.nan_to_num(hi - np.minimum(lo, first.idle), nan=0.0)
        floor = np.where(first.fraction, FRACTION_SCALE_FLOOR, RATE_SCALE_FLOOR * self.model.scales)
        floor = np.where(np.isfinite(self._margins), self._margins, floor)   # cause metrics: the idle margin
        return np.maximum(span, np.maximum(floor, 1e-12))

    def metric_reweight(self, a: np.ndarray, y: np.ndarray, observed: np.ndarray, use_corr: bool,
                        scales: np.ndarray, prev0: np.ndarray | None = None) -> np.ndarray:
        """[N] factors 1 / max(RMS_n, floor) of the current plan's predicted error per metric
        (scaled units), mean 1 over the metrics the target has: the IRLS step for Σ_n RMS_n.
        prev0 [1, M, K]: the window before `a` (idle when None)."""
        prev0 = np.zeros_like(a[:1]) if prev0 is None else prev0
        pred = self._predict(a, prev0, use_corr) / scales
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

    def equivalence_classes(self) -> list[np.ndarray]:
        """Groups of stressors the model cannot tell apart: on every fitted metric (in its full
        scale, on every thread) their effects differ by less than equivalence_tolerance of the
        larger, and they share class, cost, footprint and the resources they drive. Without a
        PMU this VM saw four compute kernels (integer CRC, polynomial, two SIMD distances) as
        the same busy time within 1.4 %; a least-squares fit splits a window's compute evenly
        between them."""
        first, tol = self.model.first, self.settings.equivalence_tolerance
        if tol <= 0:
            return []
        w = self.weights > 0
        g = (first.gain[:, :, w] / self.model.scales[w]).reshape(first.M, -1)
        size = np.abs(g).max(axis=1, initial=0.0)
        footprint = first.footprint if first.footprint is not None else np.zeros(first.M)
        classes = first.classes or [None] * first.M
        drives = np.stack([self._drives[r] for r in sorted(self._drives)] + [self._delayed_any], axis=1)
        groups: list[list[int]] = []
        for m in range(first.M):
            for grp in groups:
                r = grp[0]
                if size[m] > 0 and np.abs(g[m] - g[r]).max() <= tol * max(size[m], size[r]) \
                        and classes[m] == classes[r] and self._cost[m] == self._cost[r] \
                        and footprint[m] == footprint[r] and (drives[m] == drives[r]).all():
                    grp.append(m)
                    break
            else:
                groups.append([m])
        return [np.array(grp) for grp in groups if len(grp) > 1]

    def merge_equivalents(self, a: np.ndarray) -> np.ndarray:
        """[T, M, K] -> each window's and thread's share of a group of equivalent stressors
        (equivalence_classes) moved onto the member that has the most of it: the same predicted
        trace in one segment instead of several. The runner switches kernels at each segment,
        and on real replays a core ran about 1 ms busier per segment than the plan's columns
        (+0.012 to +0.022 with 5-8 segments a thread, −0.005 with one)."""
        a = a.copy()
        for grp in self._equivalents:
            part = a[:, grp, :]                                     # [T, G, K]
            total = part.sum(axis=1)                                # [T, K]
            keep = np.argmax(part, axis=1)                          # [T, K]
            merged = np.zeros_like(part)
            np.put_along_axis(merged, keep[:, None, :], total[:, None, :], axis=1)
            a[:, grp, :] = merged
        return a

    def quanta(self) -> np.ndarray:
        """[M] the smallest share of a window each stressor can run as planned: min_segment_s,
        or for an IO stressor the time its rate takes to move one submission (a queue of `depth`
        IOs, a readahead, a sync interval, an extent), whichever is longer. Below it a stressor
        is not a little of itself: 0.7 ms of a 64-deep 4 KiB reader measured 185 MB/s in a
        window whose target read 1.2 MB/s."""
        first = self.model.first
        window = float(self.model.window_s)
        q = np.full(first.M, self.settings.min_segment_s / window)
        byte_metrics = [n for n, name in enumerate(first.metric_names)
                        if activity.resource_of(name) in ("disk.read", "disk.write") and first.units[n] == "B/s"
                        and name.count(".") == 1]
        rate = first.response[:, byte_metrics].sum(axis=1) if byte_metrics else np.zeros(first.M)
        for m, submit in enumerate(self._submission_bytes()):
            if submit > 0 and rate[m] > 0:
                q[m] = max(q[m], submit / (rate[m] * window))
        return np.clip(q, 0.0, 0.05)   # beyond 50 ms the rate is not the submission's (a page-cache kernel)

    def one_device_queue(self, a: np.ndarray, values: np.ndarray) -> np.ndarray:
        """[T, M, K] effective shares -> each window's disk IO on one thread, where that thread's
        column has room for it and the dead time of the segments it gains, its compute that
        drives nothing giving way if need be (CPU-first then sizes both cores). The threads of a
        window start together and run their IO first, so IO on two threads runs at the same
        time and the device shares itself between them, where the model counts each in full up
        to the window's average load: two threads of the 16-deep 1 MiB writer each moved about
        half of what one moves alone (bench/results/io-segments-2026-11-27), and a held-out
        plan's 24 ms of it on both threads replayed 34-100 MB/s where 266 were predicted. One
        after the other on one thread, the window's IO is the sum the model predicts. The thread
        that takes it: of those whose core's target is at least what the IO costs that core, the
        least busy one (the most room left beside the IO for the compute that makes up the
        rest); without a per-core target, the one with the most IO already."""
        first = self.model.first
        disk = self._disk
        if first.K < 2 or not disk.any():
            return a
        io = a[:, disk, :]                                          # [T, D, K]
        per_thread = io.sum(axis=1)                                 # [T, K]
        multi = (per_thread > 0).sum(axis=1) >= 2
        if not multi.any():
            return a
        T = a.shape[0]
        rows = np.arange(T)
        target = self.core_busy_target(values)
        if target is None or not np.isfinite(target).any():
            k_star = np.argmax(per_thread, axis=1)                  # [T]
        else:
            tgt = np.nan_to_num(target.astype(np.float64), nan=1.0)
            io_cpu = io.sum(axis=2) @ first.own[disk]               # [T]: the IO's CPU on whichever core
            feasible = tgt >= io_cpu[:, None] - self.settings.cpu_tolerance
            k_star = np.where(feasible.any(axis=1), np.argmin(np.where(feasible, tgt, np.inf), axis=1),
                              np.argmax(tgt, axis=1))
        onto = np.zeros(per_thread.shape, bool)
        onto[rows, k_star] = True
        moving = (io * ~onto[:, None, :]).sum(axis=2)               # [T, D]: IO on the other threads
        staying = io[rows, :, k_star]                               # [T, D]
        gained = ((moving > 0) & ~(staying > 0)) @ first.dead[disk]  # dead time of segments new there
        compute = ~self._drives_any & ~disk                        # [M]: what may give way on k*
        yielding = a[rows, :, k_star][:, compute]                   # [T, C] on the thread that takes the IO
        excess = a.sum(axis=1)[rows, k_star] + moving.sum(axis=1) + gained - 1.0     # [T]
        free = yielding.sum(axis=1)
        fits = multi & (excess <= free + 1e-9)
        if not fits.any():
            return a
        a = a.copy()
        t = np.flatnonzero(fits)[:, None]
        k = k_star[t]
        d = np.flatnonzero(disk)[None, :]
        a[t, d, :] = 0.0
        a[t, d, k] = io[t[:, 0]].sum(axis=2)                         # the window's IO, on thread k*
        c = np.flatnonzero(compute)[None, :]
        keep = np.clip(1.0 - np.clip(excess[t], 0.0, None) / np.maximum(free[t], 1e-12), 0.0, 1.0)
        a[t, c, k] *= keep
        return a

    def pad_dead_time(self, e: np.ndarray) -> np.ndarray:
        """Effective shares [T, M, K] -> the segments to plan: each lengthened by its stressor's
        dead time (FirstOrder.planned), a column over the window scaled back into it."""
        a = self.model.first.planned(e)
        return a / np.maximum(a.sum(axis=1, keepdims=True), 1.0)

    def round_to_quanta(self, a: np.ndarray) -> np.ndarray:
        """Each entry below half its stressor's quantum dropped, between half and one raised to
        it; columns kept within the window."""
        q = self._quanta[None, :, None]
        a = np.where(a < 0.5 * q, 0.0, np.maximum(a, q))
        return a / np.maximum(a.sum(axis=1, keepdims=True), 1.0)

    def _catalog_entries(self) -> list:
        """This agent's catalog entry for each of the model's stressors (None where it lists no
        such name: a model used away from its agent's catalog, where the profile decides alone)."""
        from ..catalog import load_catalog
        try:
            by_name = {st.name: st for st in load_catalog().stressors}
        except Exception:
            by_name = {}
        return [by_name.get(n) for n in self.model.first.catalog_names]

    def _submission_bytes(self) -> list[float]:
        """Each stressor's bytes per submission, from its catalog parameters (0 when unknown)."""
        def num(p: dict, key: str, default: float = 0.0) -> float:
            v = p.get(key, default)
            return float(v) if isinstance(v, (int, float)) else 0.0
        out = []
        for st in self._catalog_entries():
            p = st.params if st is not None else {}
            out.append(max(num(p, "io_bytes") * max(num(p, "depth", 1.0), 1.0), num(p, "ahead_bytes"),
                           num(p, "extent_bytes"), num(p, "sync_every_bytes")))
        return out

    def _kernels(self) -> list[str | None]:
        return [st.kernel if st is not None else None for st in self._catalog_entries()]

    def cpu_filler(self, allowed: np.ndarray) -> int | None:
        """The stressor that fills CPU time with nothing else: a compute kernel that drives no
        resource, the one with the highest busy share on its own core."""
        first = self.model.first
        drives_any = self._drives_any
        classes = first.classes or [None] * first.M
        ok = allowed.all(axis=0) & ~drives_any & np.array([c == "cpu" for c in classes]) & (first.own > 0.5) \
            & ~first.unobserved()
        if not ok.any():
            return None
        return int(np.argmax(np.where(ok, first.own, -1.0)))

    def match_cpu(self, a: np.ndarray, values: np.ndarray, allowed: np.ndarray,
                  prev0: np.ndarray | None = None) -> np.ndarray:
        """CPU first: each plan thread's core is brought to the target's busy fraction — short
        by more than the tolerance, the compute filler takes the thread's idle time; over, the
        thread's compute that drives nothing is scaled down first, then its IO. Two passes, as
        the threads spill onto each other's cores.

        A core's busy fraction is predicted from the plan's columns alone (the first-order
        model: each stressor's measured share of its own core and of the others, over the host's
        idle level), never through the learned correction: the column sum is what the runner
        executes, while a correction fitted on a campaign absorbs whatever else ran on the host
        then (measured: a correction learned beside other work predicted core 1 0.3 busier than
        the replays ran it, and CPU-first left the thread half idle). The idle level is the lower
        of the profile's and the target's own 1st percentile: a target recorded on a quieter host
        than the profile's shows it."""
        first, tol = self.model.first, self.settings.cpu_tolerance
        filler = self.cpu_filler(allowed)
        drives_any = self._drives_any
        a = a.astype(np.float64)
        prev0 = np.zeros_like(a[:1]) if prev0 is None else prev0
        base = np.zeros(first.N)
        for n, _ in self._cores:
            col = values[:, n]
            if np.isfinite(col).any():
                base[n] = min(0.0, float(np.nanpercentile(col, 1)) - float(first.idle[n]))
        for _ in range(2):
            pred = self._predict(a, prev0, False) + base
            for n, j in self._cores:
                k, target = self._core_thread(j), values[:, n]
                if k is None or not np.isfinite(target).any():
                    continue
                d = np.where(np.isfinite(target), target - pred[:, n], 0.0)
                over = d < -tol
                if over.any():
                    # compute that drives nothing gives way first: the IO on the thread is what
                    # the target's other resources asked for
                    excess = np.where(over, -d, 0.0)
                    for group in (~drives_any, drives_any):
                        part = a[:, group, k] @ first.own[group]                # [T]
                        f = np.where(part > 0, np.clip((part - excess) / np.maximum(part, 1e-9), 0.0, 1.0), 1.0)
                        a[:, group, k] *= f[:, None]
                        excess = np.maximum(excess - part * (1.0 - f), 0.0)
                short = d > tol
                if filler is not None and short.any():
                    # The filler takes the thread's idle time; where that is not enough, the
                    # stressors that keep the core least busy per unit of time give way first —
                    # each unit of stressor m handed to the filler buys own_f − own_m of CPU — until
                    # the core is matched. Stressors as busy as the filler (a network RPC, a
                    # contended compute kernel) never give way: that buys no CPU. (Scaling the
                    # whole column alike, a saturated core lost its RPC to buy 0.02 of CPU a disk
                    # stressor beside it could give: loopback at 0.3 of a held-out database's.)
                    own_f = first.own[filler]
                    colsum = a[:, :, k].sum(axis=1)
                    idle_time = np.clip(1.0 - colsum, 0.0, None)
                    want = np.where(short, d, 0.0)                     # CPU to add
                    need = want - idle_time * own_f                    # ... beyond what idle time gives
                    lost = np.zeros(len(d))                            # CPU the cut stressors took along
                    for m in np.argsort(first.own, kind="stable"):
                        if not (need > 0).any():
                            break
                        gain = own_f - first.own[m]
                        if m == filler or gain <= BUSY_AS_FILLER:
                            continue
                        cut = np.minimum(a[:, m, k], np.clip(need, 0.0, None) / gain)
                        a[:, m, k] -= cut
                        need -= cut * gain
                        lost += cut * first.own[m]
                    room = np.clip(1.0 - a[:, :, k].sum(axis=1), 0.0, None)
                    a[:, filler, k] += np.clip((want + lost) / own_f, 0.0, room)
        return a

    def _fista(self, a0, G, resid_target, phi, mask, lam_c, iterations, allowed=None, cost=None, left=None):
        """Projected accelerated gradient on the linearized problem (φ fixed). G [M, K, N]: the
        gains in the fit's scale; mask [T, N]: the metric weights (0 where the target has no
        value); allowed [T, M]: the stressors each window may use (the rest stay at 0, exactly:
        they are zeroed before each projection, which keeps it the projection onto that face);
        left [M, K]: a fixed window before a0's first (a chunk's neighbour), or None."""
        T, M, K = a0.shape
        cost = self._cost if cost is None else cost
        # The loop keeps the plan as [T, K, M]: each thread's stressors contiguous, so the
        # projection (a sort per thread and window) reads rows in place instead of a copy each step.
        lam_i = np.tile(self.settings.idle_weight * cost, K)          # [KM]
        G = np.ascontiguousarray(G.transpose(1, 0, 2)).reshape(K * M, -1)   # [KM, N]
        w = mask * phi
        # A diagonal (Jacobi) step per stressor and thread: errors on the target's own range make
        # the gains differ by orders of magnitude between stressors (a disk writer against 100
        # MB/s, a compute kernel against a busy fraction), and one global 1/L step would leave
        # the small ones unmoved. d_i = the Gershgorin bound on row i of the fit's Hessian
        # 2 G diag(max_t w φ) Gᵀ plus the change term's, so the scaled problem's curvature is ≤ 1;
        # the projection is taken in the same metric (project_threads_scaled).
        wmax = np.max(w * phi, axis=0, initial=0.0)
        Gw = np.abs(G) * np.sqrt(wmax)                                  # [KM, N]
        curv = 2.0 * (Gw @ Gw.sum(axis=0)) + 8.0 * float(lam_c.max(initial=0.0)) + 1e-9   # [KM]
        inv_d = (1.0 / curv).astype(np.float32)
        inv_d_km = inv_d.reshape(K, M)
        # the loop in float32: the answer is a fraction of a window good to far below 1e-4, and
        # half the memory traffic is what a long trace's solve is bound by
        f32 = np.float32
        G32, Gt32 = G.astype(f32), np.ascontiguousarray(G.T, dtype=f32)
        phi32, w32, res32 = phi.astype(f32), w.astype(f32), resid_target.astype(f32)
        lam_i32, lam_c32 = lam_i.astype(f32), (2.0 * lam_c).astype(f32)[:, None, None]
        keep = allowed[:, None, :].astype(f32) if allowed is not None else None
        left32 = None if left is None else np.ascontiguousarray(np.asarray(left).T, f32)
        x = np.ascontiguousarray(a0.transpose(0, 2, 1), dtype=f32)     # [T, K, M]
        z, t_k = x.copy(), 1.0
        d = np.zeros_like(z)
        for _ in range(iterations):
            r = phi32 * (z.reshape(T, -1) @ G32) - res32                # [T, N]
            r *= w32
            grad = ((2.0 * r) @ Gt32 + lam_i32).reshape(T, K, M)
            np.subtract(z[1:], z[:-1], out=d[1:])
            if left32 is not None:
                np.subtract(z[0], left32, out=d[0])                    # the chunk's fixed neighbour
            d *= lam_c32                                               # 2 λ_t (a_t − a_{t−1})
            grad += d
            grad[:-1] -= d[1:]
            grad *= -inv_d_km
            grad += z                                                  # z − D⁻¹ ∇
            if keep is not None:
                grad *= keep
            x_new = project_threads_scaled(grad, inv_d_km)
            t_new = (1.0 + math.sqrt(1.0 + 4.0 * t_k * t_k)) / 2.0
            z = x_new + f32((t_k - 1.0) / t_new) * (x_new - x)
            x, t_k = x_new, t_new
        return x.transpose(0, 2, 1).astype(np.float64)
