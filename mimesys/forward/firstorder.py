"""The first-order forward model: a host's solo profile turned into a prediction.

Parameters (all measured by running the stressors alone, controller/forward_fit/profile.py):

- idle [N]: the metrics with nothing running.
- response R [M, N]: what one thread running stressor m for the whole window adds to idle.
- own [M], other [M]: the same on per-core metrics (`cpu.util.core<j>`): the busy fraction
  that one thread of m puts on its own core, and what it spills onto each other core (a
  loopback sink, a ping-pong partner, kernel threads).
- fixed [M, N] (profiles that ran each stressor on a second thread too): the busy fraction m
  puts on core j whichever thread runs it — a device's completions are handled on the CPUs
  its interrupt is routed to (on the development VM every virtio-blk interrupt and BLOCK
  softirq lands on CPU 1: a disk stressor on thread 0 loads core 1, and on thread 1 loads
  its own core, not core 0). Zero on metrics that are not per-core.
- noise [N] (when the profile had it): how far the idle windows spread above their median
  (p90 − median); what a target may show on a resource and still have left it idle.
- capacity [N]: the most the host showed on each metric (solo, all threads at once, and the
  independent calibration peaks when there are any): the physical ceiling.
- dead [M] (from the agent's calibration, `segment.dead_s` / window): the share of a window
  each planned segment of m runs before it moves anything at its rate — an IO stressor's queue
  fills after its first IO's latency and drains before the segment's deadline, so a segment
  of length a moves rate · (a − dead) (0 for compute; 1-6 ms for the disk stressors on the
  development VM, where the planner's 5 ms segments of writers moved 0.3-0.5 of their share).
- groups: shared resources (disk, network, memory bandwidth), each used by a thread of m by a
  share U[m, g] of its capacity; past full load, the stressors share the device by φ(L_g)
  (contention.py).

Prediction for a composition a [M, K] (fraction of the window each stressor runs on each
thread; thread k pinned to core `thread_cores[k]`):

    x_n = idle_n + φ_{g(n)}(e) · Σ_{m,k} e[m,k] · G[m,k,n],   e = max(a − dead, 0) where a > 0

with G[m,k,n] = R[m,n] for host-wide metrics and own[m] / other[m] + fixed[m,n] for per-core
ones (a core adds them as a union with its idle level, cores.py `busy_union`; its own thread's share
counts the whole segment, a dead time is spent on its core too); host-wide cpu.util, where
every core's is modeled, is their mean (`derive`), as the cpu sampler defines it; then clipped to
[0, capacity] (fractions to [0, 1]). The map is linear in a for a fixed φ, which
is what the inverse planner (planners/inverse/) uses: it solves for e and plans e + dead.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import ValidationError
from . import contention, cores


@dataclass
class FirstOrder:
    metric_names: list[str]
    units: list[str]
    catalog_names: list[str]
    thread_cores: list[int]          # core index of each plan thread
    idle: np.ndarray                 # [N]
    response: np.ndarray             # [M, N]
    own: np.ndarray                  # [M]
    other: np.ndarray                # [M]
    capacity: np.ndarray             # [N] (inf where unbounded)
    groups: dict[str, list[int]] = field(default_factory=dict)   # group -> metric indices
    usage: np.ndarray | None = None  # [M, G] in the order of `groups`
    classes: list[str] | None = None  # each stressor's resource class (catalog), when known
    footprint: np.ndarray | None = None  # [M] bytes of buffers m holds on all threads (catalog.buffer_of: the run, or its windows)
    noise: np.ndarray | None = None  # [N] spread of the idle windows above their median (p90 − median)
    fixed: np.ndarray | None = None  # [M, N] per-core share m puts on that core from any thread (None: none)
    dead: np.ndarray | None = None   # [M] share of a window each planned segment of m moves nothing (None: none)

    def __post_init__(self):
        N, M = _check_shapes(self)
        self.idle = np.asarray(self.idle, np.float64)
        self.response = np.asarray(self.response, np.float64)
        self.own, self.other = np.asarray(self.own, np.float64), np.asarray(self.other, np.float64)
        self.capacity = np.asarray(self.capacity, np.float64)
        self.fixed = np.zeros((M, N)) if self.fixed is None else np.asarray(self.fixed, np.float64)
        self.dead = np.zeros(M) if self.dead is None else np.clip(np.asarray(self.dead, np.float64), 0.0, 1.0)
        self.groups = self.groups or contention.rate_groups(self.metric_names, self.units)
        if self.usage is None:
            self.usage = contention.group_usage(self.response, self.idle, self.capacity, self.groups)
        self.fraction = np.array([u == "fraction" for u in self.units])
        self.core_metrics = cores.core_metrics(self.metric_names)
        self.host_cpu = cores.host_cpu(self.metric_names, self.core_metrics)
        self.gain = self.derive(cores.gain(self.response, self.own, self.other, self.fixed, self.metric_names,
                                           self.thread_cores))   # [M, K, N]
        self.metric_group_index = contention.group_index(self.groups, N)

    @property
    def K(self) -> int:
        return len(self.thread_cores)

    @property
    def M(self) -> int:
        return len(self.catalog_names)

    @property
    def N(self) -> int:
        return len(self.metric_names)

    def derive(self, x: np.ndarray) -> np.ndarray:
        """x [..., N] with the metrics defined by others set from them (host-wide CPU from the cores)."""
        if self.host_cpu is not None:
            n, core_idx = self.host_cpu
            x[..., n] = x[..., core_idx].mean(axis=-1)
        return x

    # -- prediction --------------------------------------------------------------
    def memory_metric(self) -> int | None:
        """Index of the memory-held gauge (mem.used_B), if the model has it."""
        return self.metric_names.index("mem.used_B") if "mem.used_B" in self.metric_names else None

    def unobserved(self) -> np.ndarray:
        """[M] bool: stressors whose resource no metric of this model observes (contention.unobserved)."""
        return contention.unobserved(self.classes, self.groups, self.M)

    def effective(self, a: np.ndarray) -> np.ndarray:
        """a [..., M, K] -> the share of each planned segment that moves anything: a − dead where
        m runs, never below 0 (a itself where no stressor has a dead time)."""
        if not self.dead.any():
            return a
        return np.where(a > 0, np.clip(a - self.dead[:, None], 0.0, None), 0.0)

    def planned(self, e: np.ndarray) -> np.ndarray:
        """e [..., M, K] effective shares -> the segments to plan for them (e + dead where e > 0):
        `effective`'s inverse."""
        if not self.dead.any():
            return e
        return np.where(e > 0, e + self.dead[:, None], 0.0)

    def group_scale(self, a: np.ndarray) -> np.ndarray:
        """a [B, M, K] -> per-metric contention factor φ [B, N] (1 for metrics in no group)."""
        return contention.group_scale(a, self.usage, self.metric_group_index)

    def predict(self, a: np.ndarray) -> np.ndarray:
        """a [B, M, K] (or [M, K]) -> predicted metrics [B, N] (or [N]); per-core metrics as the
        union of a core's thread, the others' spill and its background (cores.busy_union)."""
        single = np.ndim(a) == 2
        a = np.asarray(a, np.float64)[None] if single else np.asarray(a, np.float64)
        e = self.effective(a)
        x = self.idle + self.group_scale(e) * np.einsum("bmk,mkn->bn", e, self.gain)
        cores.busy_union(x, a, e, self)
        x = self.clip(self.derive(x))
        return x[0] if single else x

    def clip(self, x: np.ndarray) -> np.ndarray:
        hi = np.where(self.fraction, 1.0, self.capacity)
        return np.clip(x, 0.0, hi)


def _check_shapes(first: FirstOrder) -> tuple[int, int]:
    """(N, M), or ValidationError naming the parameter whose shape does not fit them."""
    N, M = len(first.metric_names), len(first.catalog_names)
    for name, arr, shape in (("idle", first.idle, (N,)), ("response", first.response, (M, N)),
                             ("own", first.own, (M,)), ("other", first.other, (M,)),
                             ("capacity", first.capacity, (N,))) + \
            ((("noise", first.noise, (N,)),) if first.noise is not None else ()) + \
            ((("fixed", first.fixed, (M, N)),) if first.fixed is not None else ()) + \
            ((("dead", first.dead, (M,)),) if first.dead is not None else ()):
        if np.shape(arr) != shape:
            raise ValidationError(f"first-order model: {name} has shape {np.shape(arr)}, expected {shape}")
    return N, M
