"""Reward: − weighted L1 between an executed window's metrics and its target's (paper §4.3).

Both vectors are first mapped into the model's normalized metric space (the same
normalization the model conditions on), so a byte-per-second metric and a utilization
fraction count on the same scale. The distance is a weighted *mean* over the metrics that
are measured in both windows: a metric the host cannot measure (NaN) drops out and the
remaining weights are renormalized, so the reward's scale does not depend on how many
metrics a host supports. A window with no metric in common has no reward (NaN).

Default weights give every resource type (the name's first component: cpu, mem, llc,
disk, net, psi, ...) the same total weight, split evenly over its metrics, as the paper
assigns "equal weights to each resource type" (§6); (pattern, weight) overrides follow.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from typing import Callable

import numpy as np

from mimesys.errors import ConfigError


def resource_type(metric_name: str) -> str:
    """'cpu.util.core3' -> 'cpu', 'disk.read_Bps' -> 'disk'."""
    return metric_name.split(".", 1)[0]


def resolve_weights(metric_names: list[str], overrides: tuple[tuple[str, float], ...] = ()) -> np.ndarray:
    """float64 [N]: equal total weight per resource type, then each (pattern, weight) override
    sets the weight of every metric it matches, in order. A pattern matching nothing is an
    error (a typo would otherwise silently leave the default)."""
    names = list(metric_names)
    if not names:
        raise ConfigError("reward: the model has no metrics to weight")
    groups: dict[str, int] = {}
    for n in names:
        groups[resource_type(n)] = groups.get(resource_type(n), 0) + 1
    w = np.array([1.0 / groups[resource_type(n)] for n in names], dtype=np.float64)
    for pattern, weight in overrides:
        hit = [i for i, n in enumerate(names) if fnmatch.fnmatchcase(n, pattern)]
        if not hit:
            raise ConfigError(f"reward weight pattern {pattern!r} matches none of the model's metrics: "
                              f"{', '.join(names)}")
        if not np.isfinite(weight) or weight < 0:
            raise ConfigError(f"reward weight for {pattern!r} must be a finite number ≥ 0, got {weight}")
        w[hit] = float(weight)
    if not (w > 0).any():
        raise ConfigError("reward: every metric has weight 0")
    return w


@dataclass(frozen=True)
class RewardFunction:
    """reward(executed [..., N], target [..., N]) -> [...] float64, ≤ 0 (0 = exact match).

    `normalize` maps raw metric values [..., N] (model metric order) into the model's
    normalized space; `weights` [N] are non-negative.
    """

    metric_names: tuple[str, ...]
    weights: np.ndarray
    normalize: Callable[[np.ndarray], np.ndarray]

    @classmethod
    def build(cls, metric_names, normalize, overrides: tuple[tuple[str, float], ...] = ()) -> "RewardFunction":
        return cls(tuple(metric_names), resolve_weights(list(metric_names), overrides), normalize)

    def distance(self, executed: np.ndarray, target: np.ndarray) -> np.ndarray:
        """Weighted mean |normalize(executed) − normalize(target)| over metrics measured in both."""
        executed = np.asarray(executed, dtype=np.float64)
        target = np.asarray(target, dtype=np.float64)
        n = len(self.metric_names)
        if executed.shape[-1] != n or target.shape[-1] != n:
            raise ValueError(f"reward: expected [..., {n}] metric vectors, got executed {executed.shape}, "
                             f"target {target.shape}")
        e = np.asarray(self.normalize(executed), dtype=np.float64)
        g = np.asarray(self.normalize(target), dtype=np.float64)
        both = np.isfinite(e) & np.isfinite(g)
        w = np.where(both, self.weights, 0.0)
        num = np.where(both, np.abs(e - g), 0.0) * w
        den = w.sum(axis=-1)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(den > 0, num.sum(axis=-1) / np.where(den > 0, den, 1.0), np.nan)

    def __call__(self, executed: np.ndarray, target: np.ndarray) -> np.ndarray:
        return -self.distance(executed, target)

    def per_metric_error(self, executed: np.ndarray, target: np.ndarray) -> np.ndarray:
        """[..., N] |normalized difference| (NaN where either is unmeasured), for reports."""
        e = np.asarray(self.normalize(np.asarray(executed, np.float64)), np.float64)
        g = np.asarray(self.normalize(np.asarray(target, np.float64)), np.float64)
        return np.abs(e - g)


def min_max_normalizer(lo, hi) -> Callable[[np.ndarray], np.ndarray]:
    """x -> (x − lo) / (hi − lo) per metric; a zero-width range maps to 0. For tests and for
    models whose normalization is a plain per-metric range."""
    lo = np.asarray(lo, dtype=np.float64)
    span = np.asarray(hi, dtype=np.float64) - lo
    safe = np.where(span > 0, span, 1.0)

    def normalize(x: np.ndarray) -> np.ndarray:
        return np.where(span > 0, (np.asarray(x, np.float64) - lo) / safe, 0.0 * np.asarray(x, np.float64))

    return normalize
