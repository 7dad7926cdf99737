"""Which metrics feed which token, and how raw metric values are normalized.

Threads are interchangeable together with their cores: thread k of a plan is pinned to
CPU k, so a per-core metric family (`cpu.util.core<k>`, any `<family>.core<k>`) belongs
to thread k's token, and every other metric is host-wide (the global token). The layout
and the normalization are plain data (JSON-able) so the checkpoint and the ONNX manifest
carry them exactly.

Normalization per metric: z = (f(x) - mean) / std, f = log1p(max(x, 0)) for rates,
bytes and counts (heavy-tailed, spanning orders of magnitude), identity otherwise;
z is clipped to ±Z_CLIP. A missing value (NaN) becomes z = 0 (the training mean) with a
mask bit of 0, inside the model (see networks.ContextEncoder).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

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
    """Per-metric transform ("log1p" | "identity"), mean and std of the transformed values,
    and the raw [min, max] seen in training (for the manifest and out-of-range warnings)."""

    transform: tuple[str, ...]
    mean: tuple[float, ...]
    std: tuple[float, ...]
    raw_min: tuple[float, ...]
    raw_max: tuple[float, ...]

    @classmethod
    def fit(cls, values: np.ndarray, specs: list[MetricSpec], layout: "MetricLayout") -> "Normalizer":
        """values [S, N] raw (NaN = not measured); specs in the same order. The cores of one
        per-thread family share one mean/std, so swapping two cores' values swaps their z."""
        transform = tuple("log1p" if s.unit in LOG_UNITS else "identity" for s in specs)
        f = apply_transform(values.astype(np.float64), transform)
        with np.errstate(all="ignore"):
            mean = np.nan_to_num(np.nanmean(f, axis=0))
            std = np.maximum(np.nan_to_num(np.nanstd(f, axis=0)), STD_FLOOR)
            for cols in layout.core_index:
                cols = list(cols)
                mean[cols] = np.nan_to_num(np.nanmean(f[:, cols]))
                std[cols] = max(float(np.nan_to_num(np.nanstd(f[:, cols]))), STD_FLOOR)
            lo, hi = np.nanmin(values, axis=0), np.nanmax(values, axis=0)
        return cls(transform, tuple(map(float, mean)), tuple(map(float, std)),
                   tuple(map(float, np.nan_to_num(lo))), tuple(map(float, np.nan_to_num(hi))))

    def normalize(self, values: np.ndarray) -> np.ndarray:
        """[..., N] raw -> z [..., N] float32, NaN stays NaN (the model fills it)."""
        f = apply_transform(np.asarray(values, np.float64), self.transform)
        z = (f - np.asarray(self.mean)) / np.asarray(self.std)
        return np.clip(z, -Z_CLIP, Z_CLIP).astype(np.float32)

    def to_dict(self) -> dict:
        return {k: list(getattr(self, k)) for k in ("transform", "mean", "std", "raw_min", "raw_max")} | {
            "z_clip": Z_CLIP, "formula": "z = clip((f(x) - mean) / std, -z_clip, z_clip); "
                                         "f = log1p(max(x, 0)) or identity; NaN -> z = 0 with mask 0"}

    @classmethod
    def from_dict(cls, d: dict) -> "Normalizer":
        return cls(*(tuple(d[k]) for k in ("transform", "mean", "std", "raw_min", "raw_max")))


@dataclass(frozen=True)
class ActionScale:
    """Latent x = (a − offset) / scale for compositions a ∈ [0, 1].

    Compositions are sparse (most entries 0); standardizing them (instead of x = 2a − 1)
    gives the denoiser its precision where the data is, so the many zero entries come out
    near zero rather than as a spread of small positive slivers that add up per thread."""

    offset: float = 0.5
    scale: float = 0.5

    @classmethod
    def fit(cls, actions: np.ndarray) -> "ActionScale":
        return cls(float(np.mean(actions)), max(float(np.std(actions)), 0.05))

    @property
    def lo(self) -> float:
        return (0.0 - self.offset) / self.scale

    @property
    def hi(self) -> float:
        return (1.0 - self.offset) / self.scale

    def to_dict(self) -> dict:
        return {"offset": self.offset, "scale": self.scale,
                "formula": "latent = (a - offset) / scale; a = offset + scale * latent"}

    @classmethod
    def from_dict(cls, d: dict) -> "ActionScale":
        return cls(float(d["offset"]), float(d["scale"]))


def apply_transform(values: np.ndarray, transform) -> np.ndarray:
    out = np.array(values, dtype=np.float64, copy=True)
    logm = np.array([t == "log1p" for t in transform])
    if logm.any():
        out[..., logm] = np.log1p(np.maximum(out[..., logm], 0.0))
    return out
