"""Plan: a workload as stressor compositions, float32 [T, M, K], plus metadata.

a[t, m, k] is the fraction of window t that stressor m runs on thread k; each thread's
column sums to at most 1 and the remainder is idle. Optionally, core_busy_target[t, k] is the
busy fraction the plan aims thread k's core at in window t (NaN: none); the runner holds it
by sizing the thread's compute (agentd/schedule.py, "The hold"). Optionally, mem_held_B[t] is
the memory the plan holds resident in window t, beside what its stressors' buffers take (the
runner keeps that footprint from the window's start: a neighbour feels memory held first, as
page cache evicted and reclaim). On disk (HDF5):

    /compositions       float32 [T, M, K]
    /core_busy_target   float32 [T, K], optional
    /mem_held_B         float64 [T], optional
    attrs: format="mimesys.plan", schema_version, window_s, catalog_hash,
           catalog_names (JSON list), seed, provenance (JSON), host_fingerprint (JSON)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .catalog import Catalog
from .errors import PlanError
from .plan_wire import MAX_WINDOWS
from .untrusted import H5Limits

# A thread's fractions may sum to 1 + this (float32 rounding of fractions that add to 1).
SUM_TOLERANCE = 1e-5
# What a plan file from outside may declare: /compositions (and /core_busy_target), at most 1 GiB.
PLAN_LIMITS = H5Limits(max_dataset_bytes=1 << 30, max_total_bytes=1 << 30)
# Memory a plan may name for one window at all (16 TiB); the agent also checks its own budget.
MAX_HELD_B = float(1 << 44)


@dataclass
class Plan:
    compositions: np.ndarray  # float32 [T, M, K]
    catalog_names: list[str]
    catalog_hash: str
    window_s: float = 1.0
    seed: int = 0
    provenance: dict = field(default_factory=dict)
    host_fingerprint: dict = field(default_factory=dict)
    core_busy_target: np.ndarray | None = None  # float32 [T, K], NaN = no target
    mem_held_B: np.ndarray | None = None        # float64 [T], bytes held resident in each window

    @property
    def T(self) -> int:
        return int(self.compositions.shape[0])

    @property
    def M(self) -> int:
        return int(self.compositions.shape[1])

    @property
    def K(self) -> int:
        return int(self.compositions.shape[2])

    @classmethod
    def from_catalog(cls, compositions, catalog: Catalog, **kw) -> "Plan":
        return cls(np.asarray(compositions, dtype=np.float32), catalog.names, catalog.hash, **kw)

    def freeze(self) -> "Plan":
        """Make the compositions read-only, so a validation result can be kept: RunManager
        validates once (off the event loop) and the backend and compiler ask again for free."""
        self.compositions.flags.writeable = False
        for extra in (self.core_busy_target, self.mem_held_B):
            if extra is not None:
                extra.flags.writeable = False
        return self

    def validate(self, catalog: Catalog | None = None, *, max_threads: int | None = None) -> "Plan":
        """Raise PlanError naming the first offending window/thread/stressor."""
        a = self.compositions
        key = (id(a), id(self.core_busy_target), id(self.mem_held_B), catalog.hash if catalog is not None else None,
               tuple(self.catalog_names), self.catalog_hash, float(self.window_s))
        if isinstance(a, np.ndarray) and not a.flags.writeable and self.__dict__.get("_validated") == key:
            if max_threads is not None and a.shape[2] > max_threads:   # cheap: not cached
                raise PlanError(f"plan has {a.shape[2]} threads but this host has {max_threads} CPUs")
            return self
        self._validate(catalog, max_threads=max_threads)
        if isinstance(a, np.ndarray) and not a.flags.writeable:
            self.__dict__["_validated"] = key
        return self

    def _validate(self, catalog: Catalog | None, *, max_threads: int | None) -> None:
        _check_shape(self, max_threads)
        if catalog is not None:
            _check_catalog(self, catalog)
        _check_fractions(self.compositions, self.catalog_names)
        T, _, K = self.compositions.shape
        _check_busy_target(self.core_busy_target, T, K)
        _check_held(self.mem_held_B, T)

    @property
    def held_max_B(self) -> float:
        """The most memory any window holds (0 without mem_held_B)."""
        return float(self.mem_held_B.max()) if self.mem_held_B is not None and self.mem_held_B.size else 0.0

    # -- the wire (mimesys/plan_wire.py) and HDF5 (mimesys/plan_h5.py) ----------
    def to_wire(self) -> dict:
        from . import plan_wire
        return plan_wire.to_wire(self)

    @classmethod
    def from_wire(cls, obj, where: str = "plan", *, max_threads: int | None = None,
                  max_elements: int = 1 << 28) -> "Plan":
        """A plan sent as a map of plain fields, /compositions as {shape, dtype: "<f4", bytes}."""
        from . import plan_wire
        return cls(**plan_wire.fields_from_wire(obj, where, max_threads=max_threads, max_elements=max_elements))

    def write(self, path: Path | str) -> None:
        from . import plan_h5
        plan_h5.write(self, path)

    def to_bytes(self) -> bytes:
        from . import plan_h5
        return plan_h5.to_bytes(self)

    @classmethod
    def read(cls, path: Path | str, *, limits: H5Limits = PLAN_LIMITS) -> "Plan":
        from . import plan_h5
        return cls(**plan_h5.read_fields(path, str(path), limits))

    @classmethod
    def from_bytes(cls, data: bytes, where: str = "request body", *, limits: H5Limits = PLAN_LIMITS,
                   max_threads: int | None = None) -> "Plan":
        from . import plan_h5
        return cls(**plan_h5.read_fields(data, where, limits, max_threads))


# -- validation: each check raises PlanError naming the first offending window/thread/stressor --

def _check_shape(plan: Plan, max_threads: int | None) -> None:
    a = plan.compositions
    if not isinstance(a, np.ndarray) or a.ndim != 3:
        raise PlanError(f"compositions must be a 3-D array [T, M, K], got shape {getattr(a, 'shape', None)}")
    if a.dtype != np.float32:
        raise PlanError(f"compositions must be float32, got {a.dtype}")
    T, M, K = a.shape
    if T == 0 or K == 0:
        raise PlanError(f"empty plan: shape {a.shape}")
    if T > MAX_WINDOWS:
        raise PlanError(f"plan has {T} windows; at most {MAX_WINDOWS} allowed")
    if not (0.01 <= float(plan.window_s) <= 3600):
        raise PlanError(f"window_s={plan.window_s} outside [0.01, 3600]")
    if max_threads is not None and K > max_threads:
        raise PlanError(f"plan has {K} threads but this host has {max_threads} CPUs")
    if len(plan.catalog_names) != M:
        raise PlanError(f"shape mismatch: compositions have M={M} stressors, catalog_names lists "
                        f"{len(plan.catalog_names)}")


def _check_catalog(plan: Plan, catalog: Catalog) -> None:
    """The plan names this agent's catalog: the same stressors, in the same order, the same hash."""
    known = set(catalog.names)
    for name in plan.catalog_names:
        if name not in known:
            raise PlanError("unknown stressor (not in this agent's catalog)", stressor=name)
    if plan.catalog_names != catalog.names:
        m = next(i for i, (x, y) in enumerate(zip(plan.catalog_names, catalog.names)) if x != y) \
            if len(plan.catalog_names) == len(catalog.names) else min(len(plan.catalog_names), len(catalog.names))
        raise PlanError(f"catalog order differs from this agent's at position {m} "
                        f"(plan {len(plan.catalog_names)} stressors, agent {len(catalog.names)}); "
                        f"regenerate the plan for catalog {catalog.hash}")
    if plan.catalog_hash != catalog.hash:
        raise PlanError(f"catalog hash {plan.catalog_hash} does not match this agent's {catalog.hash}")


def _check_fractions(a: np.ndarray, names: list[str]) -> None:
    bad = ~np.isfinite(a)
    if bad.any():
        t, m, k = map(int, np.argwhere(bad)[0])
        # Indices only, never the value: a value may be bytes the sender should not see.
        raise PlanError("non-finite value", window=t, thread=k, stressor=names[m])
    bad = (a < 0) | (a > 1)
    if bad.any():
        t, m, k = map(int, np.argwhere(bad)[0])
        raise PlanError("value outside [0, 1]", window=t, thread=k, stressor=names[m])
    sums = a.astype(np.float64).sum(axis=1)  # [T, K]
    bad = sums > 1 + SUM_TOLERANCE
    if bad.any():
        t, k = map(int, np.argwhere(bad)[0])
        raise PlanError("thread's fractions sum to more than 1", window=t, thread=k)


def _check_busy_target(b, T: int, K: int) -> None:
    if b is None:
        return
    if not isinstance(b, np.ndarray) or b.dtype != np.float32 or b.shape != (T, K):
        raise PlanError(f"core_busy_target must be float32 [T, K] = [{T}, {K}], got "
                        f"{getattr(b, 'dtype', type(b).__name__)} {getattr(b, 'shape', None)}")
    bad = np.isinf(b) | (b < 0) | (b > 1)
    if bad.any():
        t, k = map(int, np.argwhere(bad)[0])
        raise PlanError("core busy target outside [0, 1] (NaN: none)", window=t, thread=k)


def _check_held(h, T: int) -> None:
    if h is None:
        return
    if not isinstance(h, np.ndarray) or h.dtype != np.float64 or h.shape != (T,):
        raise PlanError(f"mem_held_B must be float64 [T] = [{T}], got "
                        f"{getattr(h, 'dtype', type(h).__name__)} {getattr(h, 'shape', None)}")
    bad = ~np.isfinite(h) | (h < 0) | (h > MAX_HELD_B)
    if bad.any():
        raise PlanError(f"memory held outside [0, {MAX_HELD_B:.0f}] bytes", window=int(np.argmax(bad)))
