"""CPU first: each plan thread's core brought to the target's busy fraction after the solve,
and that fraction named in the plan (`core_busy_target`) for the runner to hold."""

from __future__ import annotations

import numpy as np

from ...forward.cores import core_index
from ...forward.firstorder import FirstOrder

# A stressor whose own-core busy share is within this of the compute filler's keeps its core
# as busy as the filler does: handing its time to the filler buys no CPU (CoreMatch.match).
BUSY_AS_FILLER = 0.05
# The CPU pressure (psi.cpu.some, share of the window) a unit of the filler may add in its solo
# profile: a kernel that keeps a second thread runnable on its core is contention, not compute
# (measured here: cpu_contend_2x 0.99, sched_futex_pingpong 0.58; the plain kernels ≤ 0.02).
FILLER_PRESSURE = 0.05
# How far above the target's own CPU pressure (over its idle level) a plan's contending kernels
# may put the window: the host's sampling noise on psi.cpu.some, not activity.
PRESSURE_SLACK = 0.02
# The least share of a thread a contending kernel is let into a window's solve for.
MIN_CONTENDED_SHARE = 0.1


class CoreMatch:
    """The target's per-core CPU, and the plan's columns sized to it."""

    def __init__(self, first: FirstOrder, drives_any: np.ndarray, tolerance: float):
        self.first = first
        self.drives_any = drives_any        # [M]: the stressor drives some resource
        self.tolerance = tolerance          # settings.cpu_tolerance
        # (metric index, core) of each per-core busy fraction the model has
        self.cores = [(n, core_index(name)) for n, name in enumerate(first.metric_names)
                      if core_index(name) is not None]
        n = first.metric_names.index("psi.cpu.some") if "psi.cpu.some" in first.metric_names else None
        self.psi = n
        self.pressure = np.zeros(first.M) if n is None else np.nan_to_num(first.response[:, n])   # [M]

    def thread_of(self, core: int) -> int | None:
        """The plan thread that answers for a core's busy fraction: the first one pinned there
        (match sizes it, the runner holds it)."""
        return next((k for k, c in enumerate(self.first.thread_cores) if c == core), None)

    def busy_target(self, values: np.ndarray) -> np.ndarray | None:
        """float32 [T, K]: the target's busy fraction of each plan thread's core (NaN where the
        target has none), for the runner to hold; None when the target has no per-core CPU."""
        out = np.full((values.shape[0], self.first.K), np.nan, np.float32)
        for n, j in self.cores:
            k = self.thread_of(j)
            if k is not None:
                out[:, k] = np.clip(values[:, n], 0.0, 1.0)
        return out if np.isfinite(out).any() else None

    def filler(self, allowed: np.ndarray) -> int | None:
        """The stressor that fills CPU time with nothing else: a compute kernel that drives no
        resource and adds no CPU pressure, the one with the highest busy share on its own core.
        (Chosen by busy share alone, a kernel that runs two threads on its core won by 0.0003 of
        a core, and a model's plans finished around it put the target's CPU time under pressure
        it never had: psi.cpu.some 0.41 of its range off on four real memory mixes, inverse 0.05.)"""
        first = self.first
        classes = first.classes or [None] * first.M
        ok = allowed.all(axis=0) & ~self.drives_any & np.array([c == "cpu" for c in classes]) \
            & (first.own > 0.5) & ~first.unobserved() & (self.pressure <= FILLER_PRESSURE)
        if not ok.any():
            return None
        return int(np.argmax(np.where(ok, first.own, -1.0)))

    def pressure_room(self, values: np.ndarray) -> np.ndarray | None:
        """float64 [T]: the CPU pressure a plan may add in each window (the target's psi.cpu.some
        over its idle level, + PRESSURE_SLACK; inf where the target has none), or None."""
        n = self.psi
        if n is None or not (self.pressure > FILLER_PRESSURE).any() or not np.isfinite(values[:, n]).any():
            return None
        target = values[:, n].astype(np.float64)
        idle = min(float(self.first.idle[n]), float(np.nanpercentile(target, 1)))
        return np.where(np.isfinite(target), np.clip(target - idle, 0.0, None), np.inf) + PRESSURE_SLACK

    def pressure_allowed(self, values: np.ndarray) -> np.ndarray:
        """bool [T, M]: a contending kernel (cap_pressure) enters the solve only in the windows whose
        pressure leaves it room for a tenth of a thread: decided before the solve, so the fit of the
        rest is made without it (scaled down after the solve instead, measured, the loopback RPC it
        had shared a core with ran faster alone: kv_grow's loopback bytes 0.27 of their range off)."""
        room = self.pressure_room(values)
        out = np.ones((values.shape[0], self.first.M), bool)
        if room is not None:
            contended = self.pressure > FILLER_PRESSURE
            out[:, contended] = room[:, None] >= MIN_CONTENDED_SHARE * self.pressure[contended][None, :]
        return out

    def cap_pressure(self, a: np.ndarray, values: np.ndarray) -> np.ndarray:
        """No CPU pressure the target did not have: in each window, the kernels that keep a
        second thread runnable on their core (solo pressure above FILLER_PRESSURE) are scaled
        down until what their solo profiles predict fits under the target's psi.cpu.some over
        its idle level (+ PRESSURE_SLACK); `match` then gives the time they leave to the filler.
        Pressure is derived, not fitted (rules.is_derived), so nothing in the solve weighs it:
        measured, inverse plans spent 0.25-0.43 of each thread in cpu_contend_2x for targets at
        0.05-0.12 pressure, and their replays ran at 0.26-0.46 (a key-value server and a database
        on the 2-vCPU VM)."""
        room = self.pressure_room(values)
        if room is None:
            return a
        contended = self.pressure > FILLER_PRESSURE
        added = a[:, contended, :].sum(axis=2) @ self.pressure[contended]            # [T]
        f = np.where(added > room, room / np.maximum(added, 1e-12), 1.0)
        if (f >= 1.0).all():
            return a
        a = a.copy()
        a[:, contended, :] *= f[:, None, None].astype(a.dtype)
        return a

    def match(self, a: np.ndarray, values: np.ndarray, allowed: np.ndarray) -> np.ndarray:
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
        tol = self.tolerance
        filler = self.filler(allowed)
        a = a.astype(np.float64)
        base = np.zeros(self.first.N)
        for n, _ in self.cores:
            col = values[:, n]
            if np.isfinite(col).any():
                base[n] = min(0.0, float(np.nanpercentile(col, 1)) - float(self.first.idle[n]))
        for _ in range(2):
            pred = self.first.predict(a) + base
            for n, j in self.cores:
                k, target = self.thread_of(j), values[:, n]
                if k is None or not np.isfinite(target).any():
                    continue
                d = np.where(np.isfinite(target), target - pred[:, n], 0.0)
                over = d < -tol
                if over.any():
                    give_way(a, k, np.where(over, -d, 0.0), self.first.own, self.drives_any)
                short = d > tol
                if filler is not None and short.any():
                    fill(a, k, filler, np.where(short, d, 0.0), self.first.own)
        return a


def give_way(a: np.ndarray, k: int, excess: np.ndarray, own: np.ndarray, drives_any: np.ndarray) -> None:
    """Thread k's columns of a [T, M, K] scaled down, in place, until its core sheds excess
    [T] of busy fraction: compute that drives nothing gives way first, as the IO on the
    thread is what the target's other resources asked for."""
    for group in (~drives_any, drives_any):
        part = a[:, group, k] @ own[group]                      # [T]
        f = np.where(part > 0, np.clip((part - excess) / np.maximum(part, 1e-9), 0.0, 1.0), 1.0)
        a[:, group, k] *= f[:, None]
        excess = np.maximum(excess - part * (1.0 - f), 0.0)


def fill(a: np.ndarray, k: int, filler: int, want: np.ndarray, own: np.ndarray) -> None:
    """Thread k's core given want [T] more busy fraction, in place. The filler takes the
    thread's idle time; where that is not enough, the stressors that keep the core least busy
    per unit of time give way first — each unit of stressor m handed to the filler buys
    own_f − own_m of CPU — until the core is matched. Stressors as busy as the filler (a
    network RPC, a contended compute kernel) never give way: that buys no CPU. (Scaling the
    whole column alike, a saturated core lost its RPC to buy 0.02 of CPU a disk stressor
    beside it could give: loopback at 0.3 of a held-out database's.)"""
    own_f = own[filler]
    idle_time = np.clip(1.0 - a[:, :, k].sum(axis=1), 0.0, None)
    need = want - idle_time * own_f                            # CPU beyond what idle time gives
    lost = np.zeros(len(want))                                 # CPU the cut stressors took along
    for m in np.argsort(own, kind="stable"):
        if not (need > 0).any():
            break
        gain = own_f - own[m]
        if m == filler or gain <= BUSY_AS_FILLER:
            continue
        cut = np.minimum(a[:, m, k], np.clip(need, 0.0, None) / gain)
        a[:, m, k] -= cut
        need -= cut * gain
        lost += cut * own[m]
    room = np.clip(1.0 - a[:, :, k].sum(axis=1), 0.0, None)
    a[:, filler, k] += np.clip((want + lost) / own_f, 0.0, room)
