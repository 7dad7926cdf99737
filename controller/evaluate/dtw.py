"""DTW distance between a target and an executed metric series, normalized to [0, 1].

Exact definition, per metric (computed by dtaidistance's C implementation):

1. Scale. s = the metric's full scale: 1 for fractions (unit "fraction": cpu.util*, disk.busy,
   psi.*); otherwise the host's calibrated peak for that metric when one is given; otherwise
   max(target ∪ executed) over the windows compared (0 < s; if both series are all zero the
   distance is 0). Values become x / s, clipped to [0, 1]. All metrics here are non-negative
   rates or gauges, so the lower end of the range is 0, not min(): a flat trace at 90 % of
   the peak is not stretched to look like noise between 0 and 1.
2. NaN windows (not measured) are removed from each series separately; a metric with fewer
   than 2 measured windows on either side is not evaluated (NaN, with the reason).
3. DTW with a Sakoe-Chiba band of `window` windows (at least the difference in length):
   D = sqrt(sum over the optimal warping path P of (a_i − b_j)^2)   (dtaidistance's definition).
4. Normalized distance d = D / sqrt(|P|): the root mean square of the aligned differences,
   in [0, 1] because each |a_i − b_j| <= 1. d = 0.1 means the aligned series differ by about
   10 % of the metric's full scale (the MIMESYS paper's reading of its normalized DTW).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from dtaidistance import dtw

DEFAULT_BAND = 10   # windows: the warping may shift events by up to 10 s at W = 1 s


@dataclass(frozen=True)
class DtwResult:
    distance: float          # normalized, [0, 1]; NaN when not evaluable
    raw: float               # dtaidistance's D on the scaled series
    path_len: int
    scale: float
    scale_from: str          # "fraction" | "peak" | "max"
    reason: str = ""         # why NaN


def full_scale(unit: str, target: np.ndarray, executed: np.ndarray, peak: float | None) -> tuple[float, str]:
    if unit == "fraction":
        return 1.0, "fraction"
    if peak is not None and peak > 0:
        return float(peak), "peak"
    both = np.concatenate([target[np.isfinite(target)], executed[np.isfinite(executed)]])
    m = float(both.max()) if both.size else 0.0
    return m, "max"


def normalized_dtw(target, executed, *, unit: str = "", peak: float | None = None,
                   band: int | None = DEFAULT_BAND) -> DtwResult:
    """target [T1], executed [T2] -> DtwResult (see module docstring)."""
    a = np.asarray(target, dtype=np.float64)
    b = np.asarray(executed, dtype=np.float64)
    a, b = a[np.isfinite(a)], b[np.isfinite(b)]
    if len(a) < 2 or len(b) < 2:
        side = "target" if len(a) < 2 else "executed"
        return DtwResult(math.nan, math.nan, 0, math.nan, "", f"fewer than 2 measured windows in the {side} trace")
    s, src = full_scale(unit, a, b, peak)
    if s <= 0:
        return DtwResult(0.0, 0.0, max(len(a), len(b)), 0.0, src)
    a = np.clip(a / s, 0.0, 1.0)
    b = np.clip(b / s, 0.0, 1.0)
    kw = {}
    if band is not None:
        kw["window"] = max(int(band), abs(len(a) - len(b)) + 1)
    path, raw = dtw.warping_path_fast(a, b, include_distance=True, **kw)
    L = len(path)
    return DtwResult(float(raw) / math.sqrt(L), float(raw), L, s, src)


def compare(target_trace, executed_trace, metrics: list[str], *, peaks: dict | None = None,
            band: int | None = DEFAULT_BAND) -> dict[str, DtwResult]:
    """Per metric name -> DtwResult. A metric missing from either trace, or unmeasured on the
    executing host (all NaN), is NaN with its reason."""
    peaks = peaks or {}
    units = {m.name: m.unit for m in target_trace.metrics}
    units.update({m.name: m.unit for m in executed_trace.metrics})
    avail = {m.name: m for m in executed_trace.metrics}
    out = {}
    for name in metrics:
        if name not in target_trace.names:
            out[name] = DtwResult(math.nan, math.nan, 0, math.nan, "", "not in the target trace")
            continue
        if name not in executed_trace.names:
            out[name] = DtwResult(math.nan, math.nan, 0, math.nan, "", "not in the executed trace")
            continue
        spec = avail[name]
        if not spec.available:
            out[name] = DtwResult(math.nan, math.nan, 0, math.nan, "",
                                  f"{spec.availability.value} on the executing host: {spec.reason}")
            continue
        out[name] = normalized_dtw(target_trace.column(name), executed_trace.column(name), unit=units.get(name, ""),
                                   peak=peaks.get(name), band=band)
    return out
