"""Activity a plan adds where the target was idle: the failure DTW alone under-reports when a
metric's scale is large (a plan that floods loopback at 2× the target's peak while the target
sent nothing).

A metric is idle in the target when its 95th percentile is below IDLE_SHARE of the metric's
full scale (the same scale the DTW uses: 1 for fractions, the host's peak, else the larger
series' maximum); the executed trace adds activity there when its mean exceeds IDLE_SHARE of
that scale. Reported per metric as shares of the scale.

What the plan did and what the host did are told apart (`split_by_plan`): a metric observing a
resource (disk reads, disk writes, loopback, a real interface: mimesys/activity.py) was added by
the plan only if the plan ran a stressor whose kernel performs that resource's operation; the
rest is the host's own background (a shared host's other traffic, the journal), which a plan of
pure CPU shows as well. Derived signals (PSI, CPU) are the plan's: its work moves them.
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


def split_by_plan(added: dict[str, dict], plan) -> tuple[dict[str, dict], dict[str, dict]]:
    """(what the plan added, what the host's background did) of `added` (added_activity)."""
    from mimesys import activity

    drives = activity.stressor_drives(activity.catalog_kernels(list(plan.catalog_names)))
    used = (np.asarray(plan.compositions) > 0).any(axis=(0, 2))                # [M]
    by_plan, background = {}, {}
    for name, entry in added.items():
        r = activity.resource_of(name)
        (by_plan if r is None or (used & drives[r]).any() else background)[name] = entry
    return by_plan, background
