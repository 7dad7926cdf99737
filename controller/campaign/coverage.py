"""How much of the resource space a dataset covers, as a number and as a picture.

Coverage = the number of occupied cells of a G x G grid laid over every pair of key
metrics, each metric scaled to [0, 1] by fixed bounds (calibrated peaks where the host has
them). Fixed bounds make numbers from two campaigns on the same host comparable.
"""

from __future__ import annotations

from itertools import combinations
from pathlib import Path

import numpy as np

# Smallest span a metric of this unit is scaled to: an idle NIC's few KB/s stay near 0
# instead of being stretched over the whole axis (also the spread filter's range floor).
UNIT_FLOOR = {"fraction": 0.02, "B/s": 1e6, "1/s": 100.0, "B": 1e6}

DEFAULT_KEY_METRICS = ("cpu.util", "mem.bw_Bps", "llc.miss_per_s", "disk.read_Bps", "disk.write_Bps",
                       "net.lo.tx_Bps", "net.tx_Bps", "psi.io.some")


def metric_bounds(names: list[str], units: list[str], observed: np.ndarray, peaks: dict | None = None) -> np.ndarray:
    """Upper bound per metric: 1 for fractions, else max(calibrated peak, observed max). [D]."""
    peaks = peaks or {}
    hi = np.ones(len(names))
    for j, (n, u) in enumerate(zip(names, units)):
        if u == "fraction":
            continue
        col = observed[:, j] if observed.size else np.array([])
        seen = float(np.nanmax(col)) if col.size and np.isfinite(col).any() else 0.0
        peak = peaks.get(n)
        hi[j] = max(seen, float(peak) if isinstance(peak, (int, float)) else 0.0, UNIT_FLOOR.get(u, 1e-9))
    return hi


def normalize(Y: np.ndarray, hi: np.ndarray) -> np.ndarray:
    return np.clip(np.nan_to_num(Y / hi, nan=0.0), 0.0, 1.0)


def coverage(Yn: np.ndarray, grid: int = 20) -> dict:
    """Yn: [S, D] in [0, 1]. Occupied cells over all metric pairs, and that as a fraction."""
    D = Yn.shape[1]
    pairs = list(combinations(range(D), 2))
    occupied = 0
    cells = np.clip((Yn * grid).astype(int), 0, grid - 1) if len(Yn) else np.zeros((0, D), int)
    for i, j in pairs:
        occupied += len(np.unique(cells[:, i] * grid + cells[:, j])) if len(cells) else 0
    total = len(pairs) * grid * grid
    return {"occupied_cells": int(occupied), "total_cells": int(total),
            "fraction": occupied / total if total else 0.0, "grid": grid, "pairs": len(pairs)}


def coverage_png(path: Path, Yn: np.ndarray, names: list[str], title: str, *, simulated: bool,
                 max_metrics: int = 6, compare: tuple[np.ndarray, str] | None = None,
                 bounds: np.ndarray | None = None) -> None:
    """Pairwise joint distributions (2-D histograms) of the first max_metrics key metrics.
    With `compare` = (Yn2, label), draws the second dataset's points over the first."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    D = min(Yn.shape[1], max_metrics)
    if bounds is not None:   # axes are value / bound; say what 1.0 is
        names = [f"{n} / {b:.3g}" for n, b in zip(names, bounds)]
    fig, axes = plt.subplots(D - 1, D - 1, figsize=(2.6 * (D - 1), 2.6 * (D - 1)), squeeze=False)
    for r in range(1, D):
        for c in range(D - 1):
            ax = axes[r - 1][c]
            if c >= r:
                ax.axis("off")
                continue
            if compare is None:
                ax.hist2d(Yn[:, c], Yn[:, r], bins=30, range=[[0, 1], [0, 1]], cmap="viridis", cmin=1)
            else:
                ax.scatter(compare[0][:, c], compare[0][:, r], s=2, alpha=0.35, color="tab:orange",
                           label=compare[1])
                ax.scatter(Yn[:, c], Yn[:, r], s=2, alpha=0.35, color="tab:blue")
            ax.set_xlim(0, 1)
            ax.set_ylim(0, 1)
            if r == D - 1:
                ax.set_xlabel(names[c], fontsize=8)
            if c == 0:
                ax.set_ylabel(names[r], fontsize=8)
            ax.tick_params(labelsize=6)
    if simulated:
        title += "\nSIMULATED HOST (not measurements)"
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)
