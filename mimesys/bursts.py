"""Burst and idle structure of a trace: Driple's per-resource statistics, for mimesys's resources.

Definitions (one resource series x_1..x_T, sample interval dt = the trace's window_s):

- Threshold. Relative to the host's peak P of that metric (1 for fractions such as
  `cpu.util.core3`, else the calibrated peak; without one, the caller's fallback, stated in
  `peak_from`). A burst starts at a sample with x ≥ HIGH·P and continues while x ≥ LOW·P
  (hysteresis: HIGH = 0.25, LOW = 0.15 by default), so a level hovering at the threshold is
  one burst, not a flicker of one-sample bursts.
- Burst: a maximal run of burst samples. Idle: a maximal run of the other measured samples
  (the gaps between bursts, and before the first / after the last).
- A NaN sample (not measured) belongs to neither: it ends the run it interrupts.
- Runs touching the start or the end of the trace are counted at their observed length (a
  lower bound of the true one): a short trace has few complete runs, and dropping the edge
  runs would leave most traces with no idle statistic at all.

Statistics per resource (`STATS`): burst duration median and p90 [s], idle duration median
and p90 [s], burst consumption = mean level during bursts [the metric's unit], plus the
number of bursts and the share of time in bursts (context, not scored). A statistic with no
run to measure (no burst at all: burst durations and consumption) is NaN.

Resources (`resource_metrics`): per-core CPU (`cpu.util.core<i>`), disk read/write bytes and
IOPS, network tx/rx bytes (the NICs' total, and loopback, where services on one host talk),
memory bandwidth where measured, GPU utilization and memory where a
GPU is present. A metric the trace does not carry, or never measured, is left out.

Comparison: `relative_errors` gives |b − a| / max(|a|, floor) per statistic, with floor =
one sample interval for durations and 1 % of the peak for consumption (so a near-zero target
does not turn noise into a huge error), capped at `ERROR_CAP` = 1; a statistic defined on one
side only scores the cap; on neither side it is not scored. `structure_error` is their mean —
the "burst-structure error" `mimesys evaluate` reports beside the DTW. `mape` is Driple's
measure for predictions (uncapped, over the pairs where both sides are defined).
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass

import numpy as np

from .errors import ValidationError

HIGH = 0.25
LOW = 0.15
ERROR_CAP = 1.0
CONSUMPTION_FLOOR = 0.01   # of the peak

STATS = ("burst_s_median", "burst_s_p90", "idle_s_median", "idle_s_p90", "burst_consumption")
DURATION_STATS = STATS[:4]

# metric name patterns that are resources (Driple's: GPU util / GPU memory / net tx / net rx)
RESOURCE_PATTERNS = (
    re.compile(r"^cpu\.util\.core\d+$"),
    re.compile(r"^disk\.(read|write)_(Bps|iops)$"),
    re.compile(r"^net\.(lo\.)?(tx|rx)_Bps$"),
    re.compile(r"^mem\.bw_Bps$"),
    re.compile(r"^gpu(\d+)?\.(util|mem_util)$"),
)


def is_resource(name: str) -> bool:
    return any(p.match(name) for p in RESOURCE_PATTERNS)


@dataclass(frozen=True)
class BurstStats:
    burst_s_median: float
    burst_s_p90: float
    idle_s_median: float
    idle_s_p90: float
    burst_consumption: float
    bursts: int
    burst_share: float        # share of the measured samples inside bursts
    peak: float
    peak_from: str

    def stats(self) -> dict[str, float]:
        return {k: getattr(self, k) for k in STATS}

    def to_dict(self) -> dict:
        return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in asdict(self).items()}


def runs(x: np.ndarray, peak: float, *, high: float = HIGH, low: float = LOW) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """x [T] -> (bursts, idles) as (start, length) in samples (see the module docstring)."""
    if not (0 <= low <= high):
        raise ValidationError(f"burst thresholds: need 0 <= low ({low}) <= high ({high})")
    if not (peak > 0 and math.isfinite(peak)):
        raise ValidationError(f"burst threshold needs a positive peak, got {peak}")
    hi, lo = high * peak, low * peak
    bursts: list[tuple[int, int]] = []
    idles: list[tuple[int, int]] = []
    state, start = None, 0          # None (in a NaN gap) | "burst" | "idle"
    for t, v in enumerate(np.asarray(x, np.float64)):
        if not math.isfinite(v):
            new = None
        elif state == "burst":
            new = "burst" if v >= lo else "idle"
        else:
            new = "burst" if v >= hi else "idle"
        if new != state:
            if state is not None:
                (bursts if state == "burst" else idles).append((start, t - start))
            state, start = new, t
    if state is not None:
        (bursts if state == "burst" else idles).append((start, len(x) - start))
    return bursts, idles


def _pct(lengths: list[int], q: float, dt: float) -> float:
    return float(np.percentile(np.asarray(lengths, np.float64) * dt, q)) if lengths else math.nan


def burst_stats(x, dt: float, peak: float, *, peak_from: str = "peak", high: float = HIGH,
                low: float = LOW) -> BurstStats:
    """One resource series -> its BurstStats (dt: sample interval in seconds)."""
    x = np.asarray(x, np.float64)
    if dt <= 0:
        raise ValidationError(f"burst statistics need a positive sample interval, got {dt}")
    bursts, idles = runs(x, peak, high=high, low=low)
    b_len = [n for _, n in bursts]
    i_len = [n for _, n in idles]
    inside = np.concatenate([x[s:s + n] for s, n in bursts]) if bursts else np.zeros(0)
    measured = int(np.isfinite(x).sum())
    return BurstStats(_pct(b_len, 50, dt), _pct(b_len, 90, dt), _pct(i_len, 50, dt), _pct(i_len, 90, dt),
                      float(inside.mean()) if inside.size else math.nan, len(bursts),
                      float(sum(b_len) / measured) if measured else math.nan, float(peak), peak_from)


def resource_metrics(trace) -> list[str]:
    """The resource metrics a trace measured (available and ≥ 1 finite sample), in its order."""
    out = []
    for j, m in enumerate(trace.metrics):
        if is_resource(m.name) and m.available and np.isfinite(trace.values[:, j]).any():
            out.append(m.name)
    return out


def peak_of(name: str, unit: str, peaks: dict | None, fallback: float | None) -> tuple[float, str]:
    """The peak a metric's threshold is relative to: 1 for fractions, else the host's peak, else
    `fallback` (e.g. the target's max, shared by both sides of a comparison)."""
    if unit == "fraction":
        return 1.0, "fraction"
    p = (peaks or {}).get(name)
    if isinstance(p, (int, float)) and p > 0 and math.isfinite(p):
        return float(p), "host peak"
    if fallback is not None and fallback > 0 and math.isfinite(fallback):
        return float(fallback), "series max"
    return math.nan, "none"


def trace_burst_stats(trace, *, peaks: dict | None = None, metrics: list[str] | None = None,
                      fallback_peaks: dict | None = None, high: float = HIGH,
                      low: float = LOW) -> dict[str, BurstStats]:
    """metric -> BurstStats for every resource metric of `trace` (or those named). The peak of
    a metric without a host peak is `fallback_peaks[name]`, else the trace's own max."""
    names = metrics if metrics is not None else resource_metrics(trace)
    units = {m.name: m.unit for m in trace.metrics}
    out = {}
    for name in names:
        if name not in units:
            continue
        x = trace.column(name)
        if not np.isfinite(x).any():
            continue
        own_max = float(np.nanmax(x))
        peak, src = peak_of(name, units[name], peaks, (fallback_peaks or {}).get(name, own_max))
        if not math.isfinite(peak):
            continue   # an all-zero series of a metric with no peak: nothing is a burst, no threshold exists
        out[name] = burst_stats(x, float(trace.window_s), peak, peak_from=src, high=high, low=low)
    return out


def comparison_peaks(target, others, peaks: dict | None) -> dict[str, float]:
    """Fallback peaks for a comparison: per metric without a host peak, the max over the target
    and every other trace, so both sides are thresholded at the same level."""
    out = {}
    for name in resource_metrics(target):
        vals = [target.column(name)] + [o.column(name) for o in others if name in o.names]
        m = max((float(np.nanmax(v)) for v in vals if np.isfinite(v).any()), default=math.nan)
        if math.isfinite(m) and m > 0:
            out[name] = m
    return out


def _floor(stat: str, dt: float, peak: float) -> float:
    return dt if stat in DURATION_STATS else CONSUMPTION_FLOOR * peak


def relative_errors(ref: BurstStats, other: BurstStats | None, dt: float, *, cap: float | None = ERROR_CAP) -> dict[str, float]:
    """statistic -> |other − ref| / max(|ref|, floor), capped; one side undefined = the cap (or
    NaN uncapped); both undefined = NaN (not scored)."""
    out = {}
    for stat in STATS:
        a = getattr(ref, stat)
        b = getattr(other, stat) if other is not None else math.nan
        if math.isnan(a) and math.isnan(b):
            out[stat] = math.nan
        elif math.isnan(a) or math.isnan(b):
            out[stat] = cap if cap is not None else math.nan
        else:
            e = abs(b - a) / max(abs(a), _floor(stat, dt, ref.peak))
            out[stat] = min(e, cap) if cap is not None else e
    return out


def structure_error(ref: dict[str, BurstStats], other: dict[str, BurstStats], dt: float) -> float:
    """The burst-structure error: mean capped relative error over every statistic of every
    resource of the reference that either side defines; NaN when nothing is scored."""
    errs = [e for name, s in ref.items() for e in relative_errors(s, other.get(name), dt).values() if not math.isnan(e)]
    return float(np.mean(errs)) if errs else math.nan


def mape(pairs: list[tuple[float, float]]) -> float:
    """Driple's mean absolute percentage error, in percent, over (measured, predicted) pairs
    where both are defined and the measured value is not zero; NaN when none is."""
    e = [abs(p - m) / abs(m) for m, p in pairs if not (math.isnan(m) or math.isnan(p)) and m != 0]
    return 100.0 * float(np.mean(e)) if e else math.nan
