"""What to profile next: the one-hot sweep, random compositions, and the hybrid novelty
proposal (RF surrogate + KDE rarity + tree uncertainty + weighted farthest-point
selection, and convex-hull gap filling).

After the MIMESYS paper §4.2.3 and its artifact's collection loop (README "2. Data
Collection": RF novelty + FPS selection and convex-hull interpolation, mixed by a ratio);
written from that description with scikit-learn and scipy primitives, not from its code.

Shapes: compositions are float32 [B, M, K] (B proposals, M stressors, K threads); metric
vectors are already normalized to [0, ~1] per key metric, float [n, D].
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
from scipy.spatial import Delaunay, QhullError, cKDTree

from ..compositions import MIN_FRACTION, feasible, random_compositions  # noqa: F401  (proposals' vocabulary)

log = logging.getLogger(__name__)


def one_hot_sweep(M: int, K: int, intensities=(0.25, 0.5, 1.0), thread_counts=None) -> np.ndarray:
    """Round 0: every stressor alone, across thread counts and intensities. [M*|T|*|I|, M, K]."""
    counts = sorted(set(thread_counts or (1, max(1, K // 2), K)))
    if any(not 1 <= c <= K for c in counts):
        raise ValueError(f"sweep thread counts {counts} must lie in 1..{K}")
    out = []
    for m in range(M):
        for c in counts:
            for x in intensities:
                a = np.zeros((M, K), np.float32)
                a[m, :c] = x
                out.append(a)
    return np.stack(out)


def mutate(rng: np.random.Generator, base: np.ndarray) -> np.ndarray:
    """Perturb observed compositions [n, M, K]: jitter, add or remove a stressor, move a thread."""
    a = np.array(base, np.float64)
    n, M, K = a.shape
    a += rng.normal(0.0, 0.12, a.shape) * (a > 0)
    for i in range(n):
        op = rng.integers(4)
        k = rng.integers(K)
        if op == 0:     # add a stressor on one thread
            a[i, rng.integers(M), k] += rng.uniform(0.1, 0.8)
        elif op == 1:   # remove one
            nz = np.argwhere(a[i] > 0)
            if len(nz):
                m, kk = nz[rng.integers(len(nz))]
                a[i, m, kk] = 0.0
        elif op == 2:   # copy one thread's column onto another
            a[i, :, rng.integers(K)] = a[i, :, k]
        else:           # scale intensity
            a[i] *= rng.uniform(0.4, 1.6)
    return feasible(a)


def features(a: np.ndarray) -> np.ndarray:
    """Thread-order-invariant surrogate features: per-stressor total and thread count. [n, 2M]."""
    a = np.asarray(a, np.float32)
    return np.concatenate([a.sum(axis=2), (a > 0).sum(axis=2).astype(np.float32)], axis=1)


@dataclass(frozen=True)
class NoveltySettings:
    pool: int = 2000            # candidates scored per round
    lam: float = 1.0            # weight of uncertainty against rarity
    trees: int = 60             # Random Forest size (the paper uses 100)
    hull_fraction: float = 0.3  # share of a round proposed by convex-hull interpolation
    hull_grid: int = 12         # cells per side of each 2-D subspace's grid
    neighbours: int = 3         # observed compositions blended per hull cell


@dataclass
class ProposalReport:
    novelty: int = 0
    hull: int = 0
    pool: int = 0
    mean_rarity: float = float("nan")
    mean_uncertainty: float = float("nan")


def _zscore(x: np.ndarray) -> np.ndarray:
    s = x.std()
    return (x - x.mean()) / s if s > 1e-12 else np.zeros_like(x)


def novelty_select(rng: np.random.Generator, X: np.ndarray, Y: np.ndarray, n: int,
                   settings: NoveltySettings, report: ProposalReport | None = None) -> np.ndarray:
    """RF-novelty proposals. X: observed compositions [S, M, K]; Y: their normalized metrics
    [S, D]. Returns n compositions [n, M, K] chosen by greedy farthest-point selection in
    predicted metric space, each step's distance weighted by the candidate's novelty."""
    from sklearn.ensemble import RandomForestRegressor
    from sklearn.neighbors import KernelDensity

    if n <= 0:
        return np.zeros((0, *X.shape[1:]), np.float32)
    S, M, K = X.shape
    size = max(settings.pool, 2 * n)          # the pool must leave room to choose
    n_mut = size // 2
    base = X[rng.integers(S, size=n_mut)]
    pool = np.concatenate([mutate(rng, base), random_compositions(rng, size - n_mut, M, K)])

    rf = RandomForestRegressor(n_estimators=settings.trees, min_samples_leaf=2, max_features=0.5,
                               random_state=int(rng.integers(2**31)), n_jobs=1)
    rf.fit(features(X), Y)
    F = features(pool)
    per_tree = np.stack([t.predict(F) for t in rf.estimators_])          # [trees, P, D]
    if per_tree.ndim == 2:
        per_tree = per_tree[..., None]
    mu = per_tree.mean(axis=0)                                            # [P, D]
    dev = per_tree - mu
    cov = np.einsum("tpd,tpe->pde", dev, dev) / max(len(rf.estimators_) - 1, 1)
    cov += 1e-6 * np.eye(cov.shape[-1])
    uncertainty = np.linalg.slogdet(cov)[1]                               # [P]

    bandwidth = max(1e-3, float(np.nanstd(Y)) * S ** (-1.0 / (Y.shape[1] + 4)))
    kde = KernelDensity(bandwidth=bandwidth).fit(Y)
    rarity = -kde.score_samples(mu)                                       # [P]

    novelty = _zscore(rarity) + settings.lam * _zscore(uncertainty)
    weight = novelty - novelty.min() + 0.1 * (np.ptp(novelty) + 1e-9)

    # Greedy farthest-point selection, distances to what is observed and already chosen.
    dist = cKDTree(Y).query(mu, k=1)[0]
    chosen: list[int] = []
    for _ in range(min(n, len(pool))):
        i = int(np.argmax(weight * dist))
        chosen.append(i)
        dist = np.minimum(dist, np.linalg.norm(mu - mu[i], axis=1))
        dist[i] = -1.0
    if report is not None:
        report.novelty += len(chosen)
        report.pool += len(pool)
        report.mean_rarity = float(rarity[chosen].mean())
        report.mean_uncertainty = float(uncertainty[chosen].mean())
    return pool[chosen]


def hull_fill(rng: np.random.Generator, X: np.ndarray, Y: np.ndarray, n: int, pairs: list[tuple[int, int]],
              settings: NoveltySettings, report: ProposalReport | None = None) -> np.ndarray:
    """Convex-hull interpolation. For each 2-D metric subspace (pairs of columns of Y), the
    grid cells whose centres lie inside the observed points' hull are taken in order of
    occupancy (empty first); each is filled by blending the compositions of its nearest
    observed neighbours, weighted by inverse distance. Returns up to n [n', M, K]."""
    if n <= 0 or not pairs:
        return np.zeros((0, *X.shape[1:]), np.float32)
    G = settings.hull_grid
    queues = []
    for i, j in pairs:
        pts = Y[:, [i, j]]
        lo, hi = pts.min(axis=0), pts.max(axis=0)
        if np.any(hi - lo < 1e-6) or len(np.unique(pts, axis=0)) < 4:
            continue
        try:
            tri = Delaunay(pts)
        except QhullError:
            continue
        edges = [np.linspace(lo[d], hi[d], G + 1) for d in range(2)]
        cx, cy = [(e[:-1] + e[1:]) / 2 for e in edges]
        centres = np.stack(np.meshgrid(cx, cy, indexing="ij"), axis=-1).reshape(-1, 2)
        occupancy = np.histogram2d(pts[:, 0], pts[:, 1], bins=edges)[0].reshape(-1)
        inside = tri.find_simplex(centres) >= 0
        order = [c for c in np.lexsort((rng.random(len(centres)), occupancy)) if inside[c]]
        queues.append((cKDTree(pts), centres[order]))
    if not queues:
        return np.zeros((0, *X.shape[1:]), np.float32)
    out = []
    pos = [0] * len(queues)
    while len(out) < n and any(p < len(q[1]) for p, q in zip(pos, queues)):
        for qi, (tree, cells) in enumerate(queues):
            if len(out) >= n or pos[qi] >= len(cells):
                continue
            d, nn = tree.query(cells[pos[qi]], k=min(settings.neighbours, tree.n))
            pos[qi] += 1
            d, nn = np.atleast_1d(d), np.atleast_1d(nn)
            w = 1.0 / (d + 1e-3)
            w *= rng.dirichlet(np.ones(len(w)) * 4.0)
            out.append((w[:, None, None] * X[nn]).sum(axis=0) / w.sum())
    if report is not None:
        report.hull += len(out)
    return feasible(np.stack(out)) if out else np.zeros((0, *X.shape[1:]), np.float32)


def hybrid(rng: np.random.Generator, X: np.ndarray, Y: np.ndarray, n: int, pairs: list[tuple[int, int]],
           settings: NoveltySettings) -> tuple[np.ndarray, ProposalReport]:
    """A round's proposals: hull_fraction of n by hull filling, the rest by RF novelty."""
    report = ProposalReport()
    n_hull = int(round(n * settings.hull_fraction))
    hull = hull_fill(rng, X, Y, n_hull, pairs, settings, report)
    nov = novelty_select(rng, X, Y, n - len(hull), settings, report)
    return np.concatenate([nov, hull]).astype(np.float32), report
