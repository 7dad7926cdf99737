"""Which metrics feed which token, and how raw metric values are normalized.

Threads are interchangeable together with their cores: thread k of a plan is pinned to
CPU k, so a per-core metric family (`cpu.util.core<k>`, any `<family>.core<k>`) belongs
to thread k's token, and every other metric is host-wide (the global token). The layout
and the normalization are plain data (JSON-able) so the checkpoint and the ONNX manifest
carry them exactly.

Normalization per metric: z = (f(x) - mean) / std, f = log1p(max(x, 0) / floor) for rates,
bytes and counts (heavy-tailed, spanning orders of magnitude), identity otherwise;
z is clipped to ±Z_CLIP. The floor of a resource rate is the level below which the project
calls the resource idle (mimesys/activity.py IDLE_FLOOR: 512 KiB/s, 16 /s): without it a
resource at exactly 0 (a recorded application that leaves loopback untouched) and the same
resource at the host's idle noise (the agent's own few kB/s, every synthetic target's
background) sit ten log units apart, far outside what training saw, and the model reads
"idle" as something it never met. A missing value (NaN) becomes z = 0 (the training mean) with a
mask bit of 0, inside the model (see networks.ContextEncoder).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

from mimesys.activity import IDLE_FLOOR
from mimesys.metrics import MetricSpec

# Units whose values span orders of magnitude: log1p before standardizing.
LOG_UNITS = frozenset({"B/s", "1/s", "B", "ns", "iops", "ops/s", "Bps"})
Z_CLIP = 8.0
STD_FLOOR = 1e-3
_CORE = re.compile(r"^(?P<family>.+)\.core(?P<core>\d+)$")


@dataclass(frozen=True)
class MetricLayout:
    """metric_names [N] in model order; core_index [F, K]: column of family f for thread k;
    global_index [G]: the host-wide metrics' columns."""

    metric_names: tuple[str, ...]
    core_families: tuple[str, ...]
    core_index: tuple[tuple[int, ...], ...]
    global_index: tuple[int, ...]

    @classmethod
    def build(cls, metric_names: list[str], threads: int) -> "MetricLayout":
        pos = {n: i for i, n in enumerate(metric_names)}
        families: dict[str, dict[int, int]] = {}
        for i, n in enumerate(metric_names):
            m = _CORE.match(n)
            if m:
                families.setdefault(m["family"], {})[int(m["core"])] = i
        # A family is per-thread only if it has a column for every thread 0..K-1.
        per_thread = sorted(f for f, cores in families.items() if all(k in cores for k in range(threads)))
        used = {families[f][k] for f in per_thread for k in range(threads)}
        return cls(tuple(metric_names), tuple(per_thread),
                   tuple(tuple(families[f][k] for k in range(threads)) for f in per_thread),
                   tuple(i for i in range(len(metric_names)) if i not in used))

    def to_dict(self) -> dict:
        return {"metric_names": list(self.metric_names), "core_families": list(self.core_families),
                "core_index": [list(r) for r in self.core_index], "global_index": list(self.global_index)}

    @classmethod
    def from_dict(cls, d: dict) -> "MetricLayout":
        return cls(tuple(d["metric_names"]), tuple(d["core_families"]),
                   tuple(tuple(r) for r in d["core_index"]), tuple(d["global_index"]))


@dataclass(frozen=True)
class Normalizer:
    """Per-metric transform ("log1p" | "identity") with its floor, mean and std of the
    transformed values, and the raw [min, max] seen in training (for the manifest and
    out-of-range warnings). A model saved before floors existed reads as floor 1 (plain log1p)."""

    transform: tuple[str, ...]
    mean: tuple[float, ...]
    std: tuple[float, ...]
    raw_min: tuple[float, ...]
    raw_max: tuple[float, ...]
    floor: tuple[float, ...] | None = None

    @property
    def floors(self) -> tuple[float, ...]:
        return self.floor if self.floor is not None else (1.0,) * len(self.transform)

    @classmethod
    def fit(cls, values: np.ndarray, specs: list[MetricSpec], layout: "MetricLayout") -> "Normalizer":
        """values [S, N] raw (NaN = not measured); specs in the same order. The cores of one
        per-thread family share one mean/std, so swapping two cores' values swaps their z."""
        transform = tuple("log1p" if s.unit in LOG_UNITS else "identity" for s in specs)
        floor = tuple(float(IDLE_FLOOR.get(s.unit, 1.0)) if t == "log1p" else 1.0 for s, t in zip(specs, transform))
        f = apply_transform(values.astype(np.float64), transform, floor)
        with np.errstate(all="ignore"):
            mean = np.nan_to_num(np.nanmean(f, axis=0))
            std = np.maximum(np.nan_to_num(np.nanstd(f, axis=0)), STD_FLOOR)
            for cols in layout.core_index:
                cols = list(cols)
                mean[cols] = np.nan_to_num(np.nanmean(f[:, cols]))
                std[cols] = max(float(np.nan_to_num(np.nanstd(f[:, cols]))), STD_FLOOR)
            lo, hi = np.nanmin(values, axis=0), np.nanmax(values, axis=0)
        return cls(transform, tuple(map(float, mean)), tuple(map(float, std)),
                   tuple(map(float, np.nan_to_num(lo))), tuple(map(float, np.nan_to_num(hi))), floor)

    def normalize(self, values: np.ndarray) -> np.ndarray:
        """[..., N] raw -> z [..., N] float32, NaN stays NaN (the model fills it)."""
        f = apply_transform(np.asarray(values, np.float64), self.transform, self.floors)
        z = (f - np.asarray(self.mean)) / np.asarray(self.std)
        return np.clip(z, -Z_CLIP, Z_CLIP).astype(np.float32)

    def to_dict(self) -> dict:
        return {k: list(getattr(self, k)) for k in ("transform", "mean", "std", "raw_min", "raw_max")} | {
            "floor": list(self.floors), "z_clip": Z_CLIP,
            "formula": "z = clip((f(x) - mean) / std, -z_clip, z_clip); "
                       "f = log1p(max(x, 0) / floor) or identity; NaN -> z = 0 with mask 0"}

    @classmethod
    def from_dict(cls, d: dict) -> "Normalizer":
        return cls(*(tuple(d[k]) for k in ("transform", "mean", "std", "raw_min", "raw_max")),
                   floor=tuple(map(float, d["floor"])) if "floor" in d else None)


@dataclass(frozen=True)
class ActionScale:
    """Latent x = (u(a) − offset) / scale for compositions a ∈ [0, 1], u(a) = log(a + log_floor)
    (log_floor > 0) or u(a) = a (log_floor = 0, models saved before it existed).

    Compositions are sparse (most entries 0) and what an entry means spans orders of magnitude:
    a 1 GB/s disk stressor at 0.02 of a window writes 20 MB/s, at 0.2 ten times that, and the
    target's own scale tells those apart. In a linear latent both sit within a sliver of the
    zeros, so the denoiser's error is a large error in traffic; in the log latent every decade
    of duty cycle is equally far apart (down to log_floor, below which a stressor is as good as
    off). Standardizing (offset, scale) gives the denoiser its precision where the data is."""

    offset: float = 0.5
    scale: float = 0.5
    log_floor: float = 0.0

    @classmethod
    def fit(cls, actions: np.ndarray, log_floor: float = 0.0) -> "ActionScale":
        u = np.log(actions + log_floor) if log_floor > 0 else actions
        return cls(float(np.mean(u)), max(float(np.std(u)), 0.05), float(log_floor))

    def _u(self, a: float) -> float:
        return math.log(a + self.log_floor) if self.log_floor > 0 else a

    @property
    def lo(self) -> float:
        return (self._u(0.0) - self.offset) / self.scale

    @property
    def hi(self) -> float:
        return (self._u(1.0) - self.offset) / self.scale

    def to_latent(self, a, xp=np):
        """a (NumPy array or torch tensor; xp = its module) -> latent."""
        u = xp.log(a + self.log_floor) if self.log_floor > 0 else a
        return (u - self.offset) / self.scale

    def from_latent(self, x, xp=np):
        """latent -> a (before projection: may leave [0, 1] by the latent's clip margin)."""
        u = self.offset + self.scale * x
        return xp.exp(u) - self.log_floor if self.log_floor > 0 else u

    def to_dict(self) -> dict:
        return {"offset": self.offset, "scale": self.scale, "log_floor": self.log_floor,
                "formula": "latent = (u(a) - offset) / scale; u(a) = log(a + log_floor) if log_floor > 0 else a"}

    @classmethod
    def from_dict(cls, d: dict) -> "ActionScale":
        return cls(float(d["offset"]), float(d["scale"]), float(d.get("log_floor", 0.0)))


def apply_transform(values: np.ndarray, transform, floor=None) -> np.ndarray:
    out = np.array(values, dtype=np.float64, copy=True)
    logm = np.array([t == "log1p" for t in transform])
    floor = np.ones(len(transform)) if floor is None else np.asarray(floor, np.float64)
    if logm.any():
        out[..., logm] = np.log1p(np.maximum(out[..., logm], 0.0) / floor[logm])
    return out
