"""Activity a plan adds where the target was idle: the failure DTW alone under-reports when a
metric's scale is large (a plan that floods loopback at 2× the target's peak while the target
sent nothing).

A metric is idle in the target when its 95th percentile is below IDLE_SHARE of the metric's
full scale (the same scale the DTW uses: 1 for fractions, the host's peak, else the larger
series' maximum); the executed trace adds activity there when its mean exceeds IDLE_SHARE of
that scale. Reported per metric as shares of the scale.
"""

from __future__ import annotations

import numpy as np

from .dtw import full_scale

IDLE_SHARE = 0.05


def added_activity(target, executed, metrics: list[str], *, peaks: dict | None = None) -> dict[str, dict]:
    """metric -> {"target_p95": share, "executed_mean": share} for every metric the target left
    idle and the executed trace did not."""
    peaks = peaks or {}
    units = {m.name: m.unit for m in target.metrics}
    out = {}
    for name in metrics:
        if name not in target.names or name not in executed.names:
            continue
        a, b = target.column(name), executed.column(name)
        a, b = a[np.isfinite(a)], b[np.isfinite(b)]
        if len(a) < 2 or len(b) < 2:
            continue
        s, _ = full_scale(units.get(name, ""), a, b, peaks.get(name))
        if s <= 0:
            continue
        p95, mean = float(np.percentile(a, 95)) / s, float(np.mean(b)) / s
        if p95 < IDLE_SHARE and mean > IDLE_SHARE:
            out[name] = {"target_p95": round(p95, 4), "executed_mean": round(mean, 4)}
    return out
