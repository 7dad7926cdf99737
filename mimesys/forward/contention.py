"""Shared resources in the first-order model (disk, network, memory bandwidth): which metrics
observe each, how much of it one thread of a stressor uses, and how the stressors share it.

A thread of m uses a share U[m, g] of group g's capacity (its largest response / capacity over
the group's metrics); when the window's load L_g = Σ a·U exceeds 1, every contribution to the
group's metrics shrinks by φ(L_g) = (1 + L_g^p)^(−1/p) ≈ 1/L_g: the stressors share the device.
"""

from __future__ import annotations

import numpy as np

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


def rate_groups(metric_names: list[str], units: list[str]) -> dict[str, list[int]]:
    """group -> indices of the rate metrics that observe it."""
    groups: dict[str, list[int]] = {}
    for n, name in enumerate(metric_names):
        g = metric_group(name)
        if g is not None and units[n] in RATE_UNITS:
            groups.setdefault(g, []).append(n)
    return groups


def group_usage(response: np.ndarray, idle: np.ndarray, capacity: np.ndarray,
                groups: dict[str, list[int]]) -> np.ndarray:
    """U [M, G] (in the order of `groups`): the share of each group one thread of m uses."""
    U = np.zeros((response.shape[0], len(groups)))
    for gi, idx in enumerate(groups.values()):
        head = capacity[idx] - idle[idx]
        ok = np.isfinite(head) & (head > 0)
        if ok.any():
            share = np.clip(response[:, np.asarray(idx)[ok]], 0, None) / head[ok]
            U[:, gi] = share.max(axis=1)
    return U


def group_index(groups: dict[str, list[int]], N: int) -> np.ndarray:
    """[N] each metric's group (in the order of `groups`), −1 for metrics in none."""
    out = np.full(N, -1)
    for gi, idx in enumerate(groups.values()):
        out[idx] = gi
    return out


def saturation(L: np.ndarray) -> np.ndarray:
    """φ(L) = (1 + L^p)^(−1/p): what is left of each contribution at load L."""
    return (1.0 + np.power(np.clip(L, 0, None), SATURATION_P)) ** (-1.0 / SATURATION_P)


def group_scale(a: np.ndarray, usage: np.ndarray, index: np.ndarray) -> np.ndarray:
    """a [B, M, K] -> φ [B, N] of each metric's group at the load L [B, G] = Σ_k a · usage (1 for
    metrics in no group: index −1)."""
    phi_g = saturation(np.einsum("bm,mg->bg", a.sum(axis=2), usage))
    phi = np.ones((a.shape[0], len(index)))
    has = index >= 0
    phi[:, has] = phi_g[:, index[has]]
    return phi


def unobserved(classes: list[str] | None, groups: dict[str, list[int]], M: int) -> np.ndarray:
    """[M] bool: stressors whose resource no metric observes (the memory hierarchy on a host
    without a PMU): their contention cannot be checked against a target."""
    if not classes:
        return np.zeros(M, bool)
    seen = set(groups)
    return np.array([CLASS_GROUP.get(c) is not None and CLASS_GROUP[c] not in seen for c in classes])
