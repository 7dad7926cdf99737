"""Compositions as the controller draws them: the valid set a runner can honour, and sparse
random compositions (the campaign's `--strategy random` and half its novelty pool, and the
simulated dataset of controller/dataset.py). Shapes: float [..., M, K] (M stressors, K threads).
"""

from __future__ import annotations

import numpy as np

MIN_FRACTION = 0.02   # smaller slices are dropped: the runner cannot honour them usefully


def feasible(a: np.ndarray) -> np.ndarray:
    """Clip to [0, 1], drop slivers, scale every thread whose fractions sum above 1. [..., M, K]."""
    a = np.clip(np.asarray(a, np.float64), 0.0, 1.0)
    a = np.where(a < MIN_FRACTION, 0.0, a)
    s = a.sum(axis=-2, keepdims=True)
    a = np.where(s > 1.0, a / np.maximum(s, 1e-12), a)
    return np.floor(a.astype(np.float32) * 1e4) / 1e4      # float32 sums stay <= 1


def random_compositions(rng: np.random.Generator, n: int, M: int, K: int) -> np.ndarray:
    """Sparse random compositions, the `--strategy random` baseline and half the novelty pool.

    Each thread runs 0..3 stressors drawn uniformly, with Dirichlet(1) shares of a busy
    fraction drawn uniformly from [0.2, 1]. [n, M, K]."""
    a = np.zeros((n, M, K), np.float64)
    for i in range(n):
        for k in range(K):
            j = rng.choice(4, p=(0.1, 0.4, 0.3, 0.2))
            if j == 0:
                continue
            ms = rng.choice(M, size=j, replace=False)
            a[i, ms, k] = rng.dirichlet(np.ones(j)) * rng.uniform(0.2, 1.0)
    return feasible(a)
