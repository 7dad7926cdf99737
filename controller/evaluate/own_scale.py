"""Fidelity as a person reading the overlay judges it.

Two figures beside the device-scaled DTW (dtw.py), both on the *target's own* scale:

- `own_scale_scores`: the normalized DTW of each metric with the metric's full scale set to
  the target's own peak (1 for fractions), floored by the idle margin of mimesys/activity.py
  for cause metrics, values capped at 1. Traffic where the target had little costs in
  proportion to what the target had, not to what the device could do.
- `idle_window_additions`: per resource (disk reads, disk writes, loopback, NIC), the windows
  where the target left it idle — within ±`slack` windows, so a replay a second late is not
  blamed — and the executed trace shows it above max(idle threshold, 5 % of the target's own
  peak). The rule every planner keeps (mimesys/activity.py), checked on what was measured.
  `attribute_to_plan` splits them: windows where the plan drove that resource, and the host's
  own background (which a pure-CPU plan and the same workload run again show as well).

Summary figures: `resource_mean` = mean over per-core CPU, disk read/write bytes and loopback
bytes (each a metric family the issue that introduced this scored: CPU, disk, loopback).

Memory held (`memory_range_score`) is scored apart, on the target's *range*: both traces' used
memory less the target's least, DTW normalized by how far the target's rose above its least.
One offset for both, so memory a replay holds throughout (a stressor's buffers) counts in full;
the host's own drift between the two runs counts too, and shows in the floor (the same mix run
again) as much as in any replay.
`memory_added_by_plan` counts the windows where the plan held memory (Plan.mem_held_B) while
its target held none above the idle level the planner saw.
"""

from __future__ import annotations

import math

import numpy as np

from mimesys.activity import IDLE_FLOOR, idle_thresholds, resource_of
from mimesys.planners.memory import METRIC as MEMORY_METRIC, NOISE_FLOOR_B, least_of

from .dtw import DEFAULT_BAND, normalized_dtw

ADDED_SHARE = 0.05
RESOURCE_METRICS = ("disk.read_Bps", "disk.write_Bps", "net.lo.tx_Bps")


def own_scale(name: str, unit: str, target: np.ndarray) -> float:
    if unit == "fraction":
        return 1.0
    a = target[np.isfinite(target)]
    peak = float(a.max()) if a.size else 0.0
    floor = IDLE_FLOOR.get(unit, 0.0) if resource_of(name) is not None else 0.0
    return max(peak, floor, 1e-12)


def own_scale_scores(target, executed, metrics: list[str], *, band: int | None = DEFAULT_BAND,
                     scale_of=None) -> dict[str, float]:
    """metric -> normalized DTW on the target's own scale (NaN where either side lacks it).
    `scale_of`: the trace whose peaks set the scale instead (two replays of one plan compared
    on their target's scale)."""
    ref = target if scale_of is None else scale_of
    units = {m.name: m.unit for m in ref.metrics}
    out = {}
    for name in metrics:
        if name not in target.names or name not in executed.names or name not in ref.names:
            out[name] = math.nan
            continue
        a = target.column(name).astype(np.float64)
        s = own_scale(name, units.get(name, ""), ref.column(name).astype(np.float64))
        out[name] = normalized_dtw(a, executed.column(name), unit="", peak=s, band=band).distance
    return out


def resource_mean(scores: dict[str, float]) -> tuple[float, float]:
    """(per-core CPU mean, mean over the per-core CPU mean and each resource metric scored)."""
    cores = [v for k, v in scores.items() if k.startswith("cpu.util.core") and math.isfinite(v)]
    cpu = float(np.mean(cores)) if cores else math.nan
    parts = ([cpu] if cores else []) + [scores[k] for k in RESOURCE_METRICS if math.isfinite(scores.get(k, math.nan))]
    return cpu, float(np.mean(parts)) if parts else math.nan


def memory_range_score(target, executed, *, band: int | None = DEFAULT_BAND) -> dict | None:
    """{"dtw", "range_B", "added_windows"} for used memory, or None where either trace lacks it.
    added_windows: the target within the noise of its least (±1 window) and the replay above
    that least by more than max(noise, 5 % of the target's range)."""
    if MEMORY_METRIC not in target.names or MEMORY_METRIC not in executed.names:
        return None
    a = target.column(MEMORY_METRIC).astype(np.float64)
    least = least_of(a)
    a, b = a - least, executed.column(MEMORY_METRIC).astype(np.float64) - least
    if not np.isfinite(a).any() or not np.isfinite(b).any():
        return None
    finite = a[np.isfinite(a)]
    span = max(float(np.percentile(finite, 98)), NOISE_FLOOR_B)
    dtw = normalized_dtw(a, b, unit="", peak=span, band=band).distance
    T = min(len(a), len(b))
    quiet = np.array([np.all(~np.isfinite(a[max(0, t - 1):t + 2]) | (a[max(0, t - 1):t + 2] <= NOISE_FLOOR_B))
                      for t in range(T)])
    added = quiet & np.isfinite(b[:T]) & (b[:T] > max(NOISE_FLOOR_B, ADDED_SHARE * span))
    return {"dtw": float(dtw), "range_B": span, "added_windows": int(added.sum())}


def memory_added_by_plan(target, plan) -> int | None:
    """Windows where `plan` holds memory and its target held none above the idle level the
    planner used (the plan's provenance, planners/memory.py); None where either says nothing."""
    info = (plan.provenance or {}).get("memory_held")
    if plan.mem_held_B is None or not info or MEMORY_METRIC not in target.names:
        return None
    used = target.column(MEMORY_METRIC).astype(np.float64)
    T = min(len(used), plan.T)
    quiet = ~(used[:T] - float(info["idle_B"]) > float(info["noise_B"]))
    return int((quiet & (np.asarray(plan.mem_held_B)[:T] > 0)).sum())


def idle_window_additions(target, executed, *, slack: int = 1) -> dict[str, dict]:
    """resource -> {"idle_windows": n, "added_windows": n, "max_added_share": x} for every cause
    metric both traces have; share = executed / the target's own peak (or the idle threshold)."""
    units = {m.name: m.unit for m in target.metrics}
    out: dict[str, dict] = {}
    for name in target.names:
        r = resource_of(name)
        if r is None or name not in executed.names or len(name.split(".")) > 2 + (r == "net.lo"):
            continue   # cause metrics only, host-wide totals (not per device)
        a = target.column(name).astype(np.float64)
        b = executed.column(name).astype(np.float64)
        T = min(len(a), len(b))
        if T < 2 or not np.isfinite(a).any() or not np.isfinite(b).any():
            continue
        a, b = a[:T], b[:T]
        thr = float(idle_thresholds([name], [units.get(name, "")])[0])
        peak = float(np.nanmax(a))
        limit = max(thr, ADDED_SHARE * peak)
        # idle around t: every target window within ±slack at or below the threshold
        quiet = np.array([np.all(~np.isfinite(a[max(0, t - slack):t + slack + 1])
                                 | (a[max(0, t - slack):t + slack + 1] <= thr)) for t in range(T)])
        added = quiet & np.isfinite(b) & (b > limit)
        entry = out.setdefault(r, {"idle_windows": 0, "added_windows": 0, "max_added_share": 0.0, "windows": []})
        entry["idle_windows"] = max(entry["idle_windows"], int(quiet.sum()))
        entry["added_windows"] += int(added.sum())
        entry["windows"] = sorted(set(entry["windows"]) | {int(t) for t in np.flatnonzero(added)})
        if added.any():
            share = float(np.max(b[added]) / max(peak, thr))
            entry["max_added_share"] = round(max(entry["max_added_share"], share), 4)
    return out


def attribute_to_plan(additions: dict, plan, *, slack: int = 1) -> dict:
    """additions (idle_window_additions) with, per resource, `by_plan`: the added windows where
    the plan ran a stressor that drives that resource within ±slack windows (or, for a kernel
    whose effect lands later, within the writeback horizon before) — the rest is the host's own
    background (page-cache misses, journal commits), which a pure-CPU plan shows as well."""
    from mimesys import activity

    kernels = activity.catalog_kernels(plan.catalog_names)
    drives, delays = activity.stressor_drives(kernels), activity.stressor_delays(kernels)
    horizon = activity.writeback_windows(plan.window_s)
    used = np.asarray(plan.compositions).sum(axis=2) > 0                 # [T, M]
    for r, entry in additions.items():
        if r not in drives:
            continue
        now = used[:, drives[r]].any(axis=1)
        later = used[:, delays[r]].any(axis=1)
        by_plan = [t for t in entry.get("windows", [])
                   if now[max(0, t - slack):t + slack + 1].any() or later[max(0, t - horizon):t + 1].any()]
        entry["by_plan"] = len(by_plan)
    return additions
