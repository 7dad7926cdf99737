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
- groups: shared resources (disk, network, memory bandwidth). A thread of m uses a share
  U[m, g] of group g's capacity (its largest response / capacity over the group's metrics);
  when the window's load L_g = Σ a·U exceeds 1, every contribution to the group's metrics
  shrinks by φ(L_g) = (1 + L_g^p)^(−1/p) ≈ 1/L_g: the stressors share the device.

Prediction for a composition a [M, K] (fraction of the window each stressor runs on each
thread; thread k pinned to core `thread_cores[k]`):

    x_n = idle_n + φ_{g(n)}(e) · Σ_{m,k} e[m,k] · G[m,k,n],   e = max(a − dead, 0) where a > 0

with G[m,k,n] = R[m,n] for host-wide metrics and own[m] / other[m] + fixed[m,n] for per-core
ones (a core adds them as a union with its idle level, see `predict`; its own thread's share
counts the whole segment, a dead time is spent on its core too); host-wide cpu.util, where
every core's is modeled, is their mean (`derive`), as the cpu sampler defines it; then clipped to
[0, capacity] (fractions to [0, 1]). The map is linear in a for a fixed φ, which
is what the inverse planner (planners/inverse/) uses: it solves for e and plans e + dead.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from ..errors import ValidationError

CORE_METRIC = re.compile(r"^(?P<family>.+)\.core(?P<core>\d+)$")
SATURATION_P = 6.0

# metric name prefix -> shared resource group
GROUP_PREFIXES = (("disk.", "disk"), ("psi.io.", "disk"), ("net.", "net"), ("mem.bw", "mem"), ("llc.", "mem"))
RATE_UNITS = ("B/s", "1/s", "fraction")
# catalog resource class -> the group of metrics that observes it
CLASS_GROUP = {"memory": "mem", "cache": "mem", "disk": "disk", "network": "net"}


def metric_group(name: str) -> str | None:
    for prefix, group in GROUP_PREFIXES:
        if name.startswith(prefix):
            return group
    return None


def core_index(name: str) -> int | None:
    m = CORE_METRIC.match(name)
    return int(m.group("core")) if m else None


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
    footprint: np.ndarray | None = None  # [M] bytes of memory a plan holds for its whole run once it uses m
    noise: np.ndarray | None = None  # [N] spread of the idle windows above their median (p90 − median)
    fixed: np.ndarray | None = None  # [M, N] per-core share m puts on that core from any thread (None: none)
    dead: np.ndarray | None = None   # [M] share of a window each planned segment of m moves nothing (None: none)

    def __post_init__(self):
        N, M = len(self.metric_names), len(self.catalog_names)
        for name, arr, shape in (("idle", self.idle, (N,)), ("response", self.response, (M, N)),
                                 ("own", self.own, (M,)), ("other", self.other, (M,)),
                                 ("capacity", self.capacity, (N,))) + \
                ((("noise", self.noise, (N,)),) if self.noise is not None else ()) + \
                ((("fixed", self.fixed, (M, N)),) if self.fixed is not None else ()) + \
                ((("dead", self.dead, (M,)),) if self.dead is not None else ()):
            if np.shape(arr) != shape:
                raise ValidationError(f"first-order model: {name} has shape {np.shape(arr)}, expected {shape}")
        self.idle = np.asarray(self.idle, np.float64)
        self.response = np.asarray(self.response, np.float64)
        self.own, self.other = np.asarray(self.own, np.float64), np.asarray(self.other, np.float64)
        self.capacity = np.asarray(self.capacity, np.float64)
        self.fixed = np.zeros((M, N)) if self.fixed is None else np.asarray(self.fixed, np.float64)
        self.dead = np.zeros(M) if self.dead is None else np.clip(np.asarray(self.dead, np.float64), 0.0, 1.0)
        if not self.groups:
            self.groups = {}
            for n, name in enumerate(self.metric_names):
                g = metric_group(name)
                if g is not None and self.units[n] in RATE_UNITS:
                    self.groups.setdefault(g, []).append(n)
        if self.usage is None:
            self.usage = self._usage()
        self.fraction = np.array([u == "fraction" for u in self.units])
        self.core_metrics = [(n, core_index(name)) for n, name in enumerate(self.metric_names)
                             if core_index(name) is not None]
        self.host_cpu = self._host_cpu()
        self.gain = self._gain()                                   # [M, K, N]
        self.metric_group_index = np.full(N, -1)
        for gi, idx in enumerate(self.groups.values()):
            self.metric_group_index[idx] = gi

    @property
    def K(self) -> int:
        return len(self.thread_cores)

    @property
    def M(self) -> int:
        return len(self.catalog_names)

    @property
    def N(self) -> int:
        return len(self.metric_names)

    def _usage(self) -> np.ndarray:
        U = np.zeros((self.M, len(self.groups)))
        for gi, idx in enumerate(self.groups.values()):
            head = self.capacity[idx] - self.idle[idx]
            ok = np.isfinite(head) & (head > 0)
            if ok.any():
                share = np.clip(self.response[:, np.asarray(idx)[ok]], 0, None) / head[ok]
                U[:, gi] = share.max(axis=1)
        return U

    def _host_cpu(self) -> tuple[int, np.ndarray] | None:
        """(index of cpu.util, indices of cpu.util.core0..C-1) when the model has every core's
        busy fraction: the host-wide one is then their mean by definition (the cpu sampler's), and
        is derived, never predicted on its own. Measured on ten replayed inverse plans on the
        development VM, mean |predicted − measured|: 0.0076 from its own solo responses, 0.0173 with
        a correction the campaign's cross-validation let through, 0.0039 as the cores' mean."""
        if "cpu.util" not in self.metric_names:
            return None
        cores = sorted((j, n) for n, j in self.core_metrics if self.metric_names[n] == f"cpu.util.core{j}")
        if not cores or [j for j, _ in cores] != list(range(len(cores))):
            return None
        return self.metric_names.index("cpu.util"), np.array([n for _, n in cores])

    def derive(self, x: np.ndarray) -> np.ndarray:
        """x [..., N] with the metrics defined by others set from them (host-wide CPU from the cores)."""
        if self.host_cpu is not None:
            n, cores = self.host_cpu
            x[..., n] = x[..., cores].mean(axis=-1)
        return x

    def _gain(self) -> np.ndarray:
        """G [M, K, N]: what one full window of m on thread k adds to each metric."""
        G = np.repeat(self.response[:, None, :], self.K, axis=1).copy()
        for n, name in enumerate(self.metric_names):
            j = core_index(name)
            if j is None:
                continue
            for k, core in enumerate(self.thread_cores):
                G[:, k, n] = (self.own if core == j else self.other) + self.fixed[:, n]
        return self.derive(G)

    # -- prediction --------------------------------------------------------------
    def memory_metric(self) -> int | None:
        """Index of the memory-held gauge (mem.used_B), if the model has it."""
        return self.metric_names.index("mem.used_B") if "mem.used_B" in self.metric_names else None

    def with_held(self, x: np.ndarray, held_B: np.ndarray | None) -> np.ndarray:
        """Predictions x [T, N] of a plan's windows with the memory it holds in each (Plan.mem_held_B)
        added to used memory: the runner's held pages are anonymous memory, used one for one."""
        n = self.memory_metric()
        if held_B is None or n is None:
            return x
        x = np.array(x, np.float64)
        x[:, n] += np.asarray(held_B, np.float64)[:len(x)]   # not capped at the profile's most: it held none
        return x

    def unobserved(self) -> np.ndarray:
        """[M] bool: stressors whose resource no metric of this model observes (the memory
        hierarchy on a host without a PMU): their contention cannot be checked against a target."""
        if not self.classes:
            return np.zeros(self.M, bool)
        seen = set(self.groups)
        return np.array([CLASS_GROUP.get(c) is not None and CLASS_GROUP[c] not in seen for c in self.classes])

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

    def group_load(self, a: np.ndarray) -> np.ndarray:
        """a [B, M, K] -> L [B, G]."""
        return np.einsum("bm,mg->bg", a.sum(axis=2), self.usage)

    def group_scale(self, a: np.ndarray) -> np.ndarray:
        """a [B, M, K] -> per-metric contention factor φ [B, N] (1 for metrics in no group)."""
        L = self.group_load(a)
        phi_g = (1.0 + np.power(np.clip(L, 0, None), SATURATION_P)) ** (-1.0 / SATURATION_P)
        phi = np.ones((a.shape[0], self.N))
        has = self.metric_group_index >= 0
        phi[:, has] = phi_g[:, self.metric_group_index[has]]
        return phi

    def predict(self, a: np.ndarray) -> np.ndarray:
        """a [B, M, K] (or [M, K]) -> predicted metrics [B, N] (or [N]).

        A core's busy fraction is the union of its own thread's busy time u, the other
        threads' spill s onto it (a ping-pong partner; and the completions of any thread's IO
        whose interrupt this core handles: `fixed`) and the host's own background (the idle
        level i), not their sum: 1 − (1 − i)(1 − u)(1 − s). The spill and
        the background run in the core's idle time or move to a freer core, and a core its
        thread keeps busy gains little from them (measured on plans replayed on this 2-vCPU
        host: mean |error| per window 0.024 with spill as a sum, 0.021 as a union; and over 20
        replays of 60 s, 0.0103 with the background added, 0.0070 as a union — a busy core
        showed its thread's time, not that plus the 0.01 its idle windows had)."""
        single = np.ndim(a) == 2
        a = np.asarray(a, np.float64)[None] if single else np.asarray(a, np.float64)
        e = self.effective(a)
        x = self.idle + self.group_scale(e) * np.einsum("bmk,mkn->bn", e, self.gain)
        cores = np.asarray(self.thread_cores)
        own = np.einsum("bmk,m->bk", a, self.own)                  # [B, K] each thread on its core
        spill = np.einsum("bmk,m->bk", a, self.other)              # [B, K] ... and on the others
        for n, j in self.core_metrics:
            on = cores == j
            if not on.any():
                continue
            u = np.clip(own[:, on].sum(axis=1), 0.0, 1.0)
            s = np.clip(spill[:, ~on].sum(axis=1) + np.einsum("bmk,m->b", e, self.fixed[:, n]), 0.0, 1.0)
            x[:, n] = 1.0 - (1.0 - self.idle[n]) * (1.0 - u) * (1.0 - s)
        x = self.clip(self.derive(x))
        return x[0] if single else x

    def clip(self, x: np.ndarray) -> np.ndarray:
        hi = np.where(self.fraction, 1.0, self.capacity)
        return np.clip(x, 0.0, hi)

    # -- file form ------------------------------------------------------------------
    def to_dict(self) -> dict:
        cap = [None if not np.isfinite(c) else float(c) for c in self.capacity]
        return {"metric_names": self.metric_names, "units": self.units, "catalog_names": self.catalog_names,
                "thread_cores": self.thread_cores, "idle": self.idle.tolist(), "response": self.response.tolist(),
                "own": self.own.tolist(), "other": self.other.tolist(), "capacity": cap,
                "groups": {g: list(map(int, idx)) for g, idx in self.groups.items()},
                "usage": self.usage.tolist(), "classes": self.classes,
                "footprint_B": None if self.footprint is None else self.footprint.tolist(),
                "idle_noise": None if self.noise is None else self.noise.tolist(),
                "core_fixed": self.fixed.tolist() if self.fixed.any() else None,
                "segment_dead": self.dead.tolist() if self.dead.any() else None}

    @classmethod
    def from_dict(cls, d: dict, where: str = "first-order model") -> "FirstOrder":
        try:
            cap = np.array([np.inf if c is None else float(c) for c in d["capacity"]])
            M = len(d["catalog_names"])
            usage = np.asarray(d.get("usage"), np.float64).reshape(M, len(d.get("groups") or {})) \
                if d.get("usage") is not None else None
            return cls(list(d["metric_names"]), list(d["units"]), list(d["catalog_names"]),
                       [int(c) for c in d["thread_cores"]], np.asarray(d["idle"], np.float64),
                       np.asarray(d["response"], np.float64), np.asarray(d["own"], np.float64),
                       np.asarray(d["other"], np.float64), cap,
                       {str(g): [int(i) for i in idx] for g, idx in (d.get("groups") or {}).items()}, usage,
                       list(d["classes"]) if d.get("classes") else None,
                       np.asarray(d["footprint_B"], np.float64) if d.get("footprint_B") is not None else None,
                       np.asarray(d["idle_noise"], np.float64) if d.get("idle_noise") is not None else None,
                       np.asarray(d["core_fixed"], np.float64) if d.get("core_fixed") is not None else None,
                       np.asarray(d["segment_dead"], np.float64) if d.get("segment_dead") is not None else None)
        except (KeyError, TypeError, ValueError) as e:
            raise ValidationError(f"{where}: malformed ({type(e).__name__}: {e})") from None
