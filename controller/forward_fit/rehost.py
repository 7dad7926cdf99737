"""A first-order model carried to another host by the two hosts' calibrations.

Every host runs `mimesys-agent calibrate` before its first plan: each stressor alone on one
thread (bytes/s, operations/s, the CPU share the runner measured) and the host's peaks per
resource. The ratio of host B's figures to host A's, for the same stressor measured the same
way, says how B's device and CPUs answer where A's did: a throttled disk reads at a tenth of
the rate, a CPU quota gives a thread less of its core. `rehost` scales A's profile by those
ratios — the m3 idea of a fast approximate model of the new host, with A's learned correction
on top and `forward adapt`'s map fitted on B's few samples after that:

- response[m, n] of a metric in m's resource group (disk for a disk stressor, ...): × B/A of
  m's bytes/s for B/s metrics, of its operations/s for 1/s metrics; cpu.util (host-wide) and
  the per-core shares own[m], other[m]: × B/A of m's CPU share (clipped to a core);
- capacity[n]: × B/A of the host peak of n's family (`disk.vda.read_Bps` -> `disk.read_Bps`)
  where both calibrations have one, else × the ratio of the largest solo responses on n (B's
  ceiling where no peak was measured); fractions stay at 1;
- a segment's dead time (FirstOrder.dead): B's, where B's calibration measured it;
- idle, noise, interrupt routing (fixed) and the memory footprints are A's: B's idle level is
  B's to show and the correction / adaptation learn it.

A stressor either calibration lacks keeps A's figures (reported in `report["kept"]`).
"""

from __future__ import annotations

import numpy as np

from mimesys.calibration import segment_dead_s
from mimesys.forward.contention import CLASS_GROUP, metric_group
from mimesys.forward.cores import core_index
from mimesys.forward.firstorder import FirstOrder

from .profile import segment_dead

RATE_OF_UNIT = {"B/s": "bytes_per_s", "1/s": "ops_per_s"}


def peak_family(metric: str) -> str:
    """`disk.vda.read_Bps` -> `disk.read_Bps`: the name calibration peaks use."""
    parts = metric.split(".")
    return f"{parts[0]}.{parts[-1]}" if len(parts) > 2 else metric


def _ratio(x, y) -> float | None:
    """y / x for a figure of A (x) and of B (y); None where either is missing or unusable."""
    if x is None or y is None or not np.isfinite(x) or not np.isfinite(y) or x <= 0 or y < 0:
        return None
    return float(y) / float(x)


def rehost(first: FirstOrder, cal_a: dict, cal_b: dict, window_s: float | None = None) -> tuple[FirstOrder, dict]:
    """A's first order, A's and B's calibration documents -> (B's first order, report).
    window_s: the model's window, for B's segment dead times (A's kept without it)."""
    st_a, st_b = cal_a.get("stressors") or {}, cal_b.get("stressors") or {}
    R, own, other = first.response.copy(), first.own.copy(), first.other.copy()
    classes = first.classes or [None] * first.M
    ratios, kept = {}, []
    for m, name in enumerate(first.catalog_names):
        one_a = ((st_a.get(name) or {}).get("one_thread")) or {}
        one_b = ((st_b.get(name) or {}).get("one_thread")) or {}
        r = {key: _ratio(one_a.get(key), one_b.get(key)) for key in ("bytes_per_s", "ops_per_s", "cpu_fraction")}
        r = {k: v for k, v in r.items() if v is not None}
        if not r:
            kept.append(name)
            continue
        ratios[name] = {k: round(v, 4) for k, v in r.items()}
        group = CLASS_GROUP.get(classes[m]) if classes[m] else None
        for n, metric in enumerate(first.metric_names):
            key = RATE_OF_UNIT.get(first.units[n])
            if group is not None and metric_group(metric) == group and key in r:
                R[m, n] *= r[key]
            elif metric.startswith("cpu.") and core_index(metric) is None and "cpu_fraction" in r:
                R[m, n] *= r["cpu_fraction"]
        if "cpu_fraction" in r:
            own[m] = min(1.0, own[m] * r["cpu_fraction"])
            other[m] = min(1.0, other[m] * r["cpu_fraction"])
    peaks_a, peaks_b = cal_a.get("peaks") or {}, cal_b.get("peaks") or {}
    cap = first.capacity.copy()
    cap_ratio = {}
    for n, metric in enumerate(first.metric_names):
        if first.fraction[n] or not np.isfinite(cap[n]):
            continue
        fam = peak_family(metric)
        q = _ratio(peaks_a.get(fam), peaks_b.get(fam))
        if q is None:
            hi_a, hi_b = float(first.response[:, n].max(initial=0.0)), float(R[:, n].max(initial=0.0))
            q = _ratio(hi_a, hi_b)
        if q is not None:
            cap[n] = max(first.idle[n], cap[n] * q)
            cap_ratio[metric] = round(q, 4)
    moved = FirstOrder(list(first.metric_names), list(first.units), list(first.catalog_names),
                       list(first.thread_cores), first.idle.copy(), R, own, other, cap,
                       {g: list(idx) for g, idx in first.groups.items()}, None,
                       list(first.classes) if first.classes else None,
                       None if first.footprint is None else first.footprint.copy(),
                       None if first.noise is None else first.noise.copy(), first.fixed.copy(),
                       dead_on(first, cal_b, window_s))
    return moved, {"stressor_ratios": ratios, "capacity_ratios": cap_ratio, "kept": kept}


def dead_on(first: FirstOrder, cal_b: dict, window_s: float | None) -> np.ndarray:
    """[M] B's segment dead times (a share of the window) where B's calibration measured them:
    what a segment loses is how B's device answers; A's elsewhere."""
    measured = segment_dead_s(cal_b)
    if not window_s or not measured:
        return first.dead.copy()
    on_b = np.array([n in measured for n in first.catalog_names])
    return np.where(on_b, segment_dead(first.catalog_names, measured, window_s), first.dead)
