"""From the solve's effective shares to segments the runner runs as planned: stressors the
model cannot tell apart merged into one segment (`merge_equivalents`), a window's disk IO on
one thread (`one_device_queue`: the device serves one queue at a time), entries shorter than a
stressor can run dropped or raised (`round_to_quanta`), each segment lengthened by its dead
time (`pad_dead_time`)."""

from __future__ import annotations

import numpy as np

from ... import activity
from ...forward.model import ForwardModel


def catalog_entries(catalog_names: list[str]) -> list:
    """This agent's catalog entry for each of the model's stressors (None where it lists no
    such name: a model used away from its agent's catalog, where the profile decides alone)."""
    from ...catalog import load_catalog
    try:
        by_name = {st.name: st for st in load_catalog().stressors}
    except Exception:
        by_name = {}
    return [by_name.get(n) for n in catalog_names]


def catalog_kernels(catalog_names: list[str]) -> list[str | None]:
    """Each stressor's kernel in this agent's catalog (None where it has no such stressor)."""
    return [st.kernel if st is not None else None for st in catalog_entries(catalog_names)]


def submission_bytes(catalog_names: list[str]) -> list[float]:
    """Each stressor's bytes per submission, from its catalog parameters (0 when unknown)."""
    def num(p: dict, key: str, default: float = 0.0) -> float:
        v = p.get(key, default)
        return float(v) if isinstance(v, (int, float)) else 0.0
    out = []
    for st in catalog_entries(catalog_names):
        p = st.params if st is not None else {}
        out.append(max(num(p, "io_bytes") * max(num(p, "depth", 1.0), 1.0), num(p, "ahead_bytes"),
                       num(p, "extent_bytes"), num(p, "sync_every_bytes")))
    return out


def quanta(model: ForwardModel, min_segment_s: float) -> np.ndarray:
    """[M] the smallest share of a window each stressor can run as planned: min_segment_s,
    or for an IO stressor the time its rate takes to move one submission (a queue of `depth`
    IOs, a readahead, a sync interval, an extent), whichever is longer. Below it a stressor
    is not a little of itself: 0.7 ms of a 64-deep 4 KiB reader measured 185 MB/s in a
    window whose target read 1.2 MB/s."""
    first = model.first
    window = float(model.window_s)
    q = np.full(first.M, min_segment_s / window)
    byte_metrics = [n for n, name in enumerate(first.metric_names)
                    if activity.resource_of(name) in ("disk.read", "disk.write") and first.units[n] == "B/s"
                    and name.count(".") == 1]
    rate = first.response[:, byte_metrics].sum(axis=1) if byte_metrics else np.zeros(first.M)
    for m, submit in enumerate(submission_bytes(first.catalog_names)):
        if submit > 0 and rate[m] > 0:
            q[m] = max(q[m], submit / (rate[m] * window))
    return np.clip(q, 0.0, 0.05)   # beyond 50 ms the rate is not the submission's (a page-cache kernel)


def equivalence_classes(model: ForwardModel, fitted: np.ndarray, cost: np.ndarray, drives: np.ndarray,
                        tolerance: float) -> list[np.ndarray]:
    """Groups of stressors the model cannot tell apart: on every fitted metric (fitted [N] bool;
    in its full scale, on every thread) their effects differ by less than `tolerance` of the
    larger, and they share class, cost [M], footprint and the resources they drive (drives
    [M, R] bool). Without a PMU this VM saw four compute kernels (integer CRC, polynomial, two
    SIMD distances) as the same busy time within 1.4 %; a least-squares fit splits a window's
    compute evenly between them."""
    first = model.first
    if tolerance <= 0:
        return []
    g = (first.gain[:, :, fitted] / model.scales[fitted]).reshape(first.M, -1)
    size = np.abs(g).max(axis=1, initial=0.0)
    footprint = first.footprint if first.footprint is not None else np.zeros(first.M)
    classes = first.classes or [None] * first.M
    groups: list[list[int]] = []
    for m in range(first.M):
        for grp in groups:
            r = grp[0]
            if size[m] > 0 and np.abs(g[m] - g[r]).max() <= tolerance * max(size[m], size[r]) \
                    and classes[m] == classes[r] and cost[m] == cost[r] \
                    and footprint[m] == footprint[r] and (drives[m] == drives[r]).all():
                grp.append(m)
                break
        else:
            groups.append([m])
    return [np.array(grp) for grp in groups if len(grp) > 1]


class Segments:
    """The post-solve steps, in the order the planner applies them (`shape`)."""

    def __init__(self, model: ForwardModel, drives_any: np.ndarray, equivalents: list[np.ndarray],
                 quanta: np.ndarray, cpu_tolerance: float):
        self.first = model.first
        self.drives_any = drives_any      # [M]: the stressor drives some resource
        self.equivalents = equivalents    # equivalence_classes
        self.quanta = quanta              # [M] shares of a window (quanta)
        self.cpu_tolerance = cpu_tolerance
        first = self.first
        self.disk = np.array([c == "disk" for c in (first.classes or [None] * first.M)])

    def shape(self, a: np.ndarray, busy_target: np.ndarray | None) -> np.ndarray:
        """Effective shares [T, M, K] -> the segments to plan. busy_target [T, K]: the target's
        core busy fraction per thread (CoreMatch.busy_target), or None."""
        merged = merge_equivalents(a, self.equivalents)
        return self.pad_dead_time(self.round_to_quanta(self.one_device_queue(merged, busy_target)))

    def one_device_queue(self, a: np.ndarray, busy_target: np.ndarray | None) -> np.ndarray:
        """[T, M, K] effective shares -> each window's disk IO on one thread, where that thread's
        column has room for it and the dead time of the segments it gains, its compute that
        drives nothing giving way if need be (CPU-first then sizes both cores). The threads of a
        window start together and run their IO first, so IO on two threads runs at the same
        time and the device shares itself between them, where the model counts each in full up
        to the window's average load: two threads of the 16-deep 1 MiB writer each moved about
        half of what one moves alone (bench/results/io-segments-2026-11-27), and a held-out
        plan's 24 ms of it on both threads replayed 34-100 MB/s where 266 were predicted. One
        after the other on one thread, the window's IO is the sum the model predicts."""
        first, disk = self.first, self.disk
        if first.K < 2 or not disk.any():
            return a
        io = a[:, disk, :]                                          # [T, D, K]
        per_thread = io.sum(axis=1)                                 # [T, K]
        multi = (per_thread > 0).sum(axis=1) >= 2
        if not multi.any():
            return a
        rows = np.arange(a.shape[0])
        k_star = self._io_thread(io, per_thread, busy_target)
        onto = np.zeros(per_thread.shape, bool)
        onto[rows, k_star] = True
        moving = (io * ~onto[:, None, :]).sum(axis=2)               # [T, D]: IO on the other threads
        staying = io[rows, :, k_star]                               # [T, D]
        gained = ((moving > 0) & ~(staying > 0)) @ first.dead[disk]  # dead time of segments new there
        compute = ~self.drives_any & ~disk                          # [M]: what may give way on k*
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

    def _io_thread(self, io: np.ndarray, per_thread: np.ndarray, busy_target: np.ndarray | None) -> np.ndarray:
        """[T] the thread that takes each window's IO (io [T, D, K]): of those whose core's target
        is at least what the IO costs that core, the least busy one (the most room left beside
        the IO for the compute that makes up the rest); without a per-core target, the one with
        the most IO already."""
        if busy_target is None or not np.isfinite(busy_target).any():
            return np.argmax(per_thread, axis=1)
        tgt = np.nan_to_num(busy_target.astype(np.float64), nan=1.0)
        io_cpu = io.sum(axis=2) @ self.first.own[self.disk]         # [T]: the IO's CPU on whichever core
        feasible = tgt >= io_cpu[:, None] - self.cpu_tolerance
        return np.where(feasible.any(axis=1), np.argmin(np.where(feasible, tgt, np.inf), axis=1),
                        np.argmax(tgt, axis=1))

    def pad_dead_time(self, e: np.ndarray) -> np.ndarray:
        """Effective shares [T, M, K] -> the segments to plan: each lengthened by its stressor's
        dead time (FirstOrder.planned), a column over the window scaled back into it."""
        a = self.first.planned(e)
        return a / np.maximum(a.sum(axis=1, keepdims=True), 1.0)

    def round_to_quanta(self, a: np.ndarray) -> np.ndarray:
        """Each entry below half its stressor's quantum dropped, between half and one raised to
        it; columns kept within the window."""
        q = self.quanta[None, :, None]
        a = np.where(a < 0.5 * q, 0.0, np.maximum(a, q))
        return a / np.maximum(a.sum(axis=1, keepdims=True), 1.0)


def merge_equivalents(a: np.ndarray, equivalents: list[np.ndarray]) -> np.ndarray:
    """[T, M, K] -> each window's and thread's share of a group of equivalent stressors
    (equivalence_classes) moved onto the member that has the most of it: the same predicted
    trace in one segment instead of several. The runner switches kernels at each segment,
    and on real replays a core ran about 1 ms busier per segment than the plan's columns
    (+0.012 to +0.022 with 5-8 segments a thread, −0.005 with one)."""
    a = a.copy()
    for grp in equivalents:
        part = a[:, grp, :]                                     # [T, G, K]
        total = part.sum(axis=1)                                # [T, K]
        keep = np.argmax(part, axis=1)                          # [T, K]
        merged = np.zeros_like(part)
        np.put_along_axis(merged, keep[:, None, :], total[:, None, :], axis=1)
        a[:, grp, :] = merged
    return a
