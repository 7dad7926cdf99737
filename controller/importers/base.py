"""What every trace importer shares: the error it raises, the report it returns, and the one
resampling method that puts irregular samples onto a grid of W-second windows.

An importer turns a foreign file into interval data: N metrics measured over n consecutive
intervals [t_i, t_{i+1}) (rates computed from counter differences, or gauges), then
`resample_intervals` puts them on the window grid. The importer never guesses a value it
did not read: a metric that is missing for an interval is NaN there, never 0.

Resampling (time-weighted, documented here once for every format):

    windows k = 0 .. T-1 span [t_0 + k W, t_0 + (k+1) W),  T = floor((t_n - t_0) / W)
    value[k, m] = sum_i overlap(i, k) * rate[i, m] / sum_i overlap(i, k)

where overlap(i, k) is the length of time interval i shares with window k and the sums run
over the intervals whose rate for metric m is not NaN. A rate (bytes/s, a fraction of CPU
time) is constant within its interval by construction (it is a difference of cumulative
counters divided by the interval's length), so this is exact: the window gets the amount
that the counters accumulated during it, under the only assumption the data allows
(uniform within an interval). Gauges (memory used) are treated the same way: the value
read at the end of an interval stands for that interval. A window that no non-NaN interval
overlaps is NaN. The tail after the last whole window (less than W seconds) is dropped and
reported.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from agentd.errors import TraceError
from agentd.metrics import MetricSpec
from agentd.trace import Trace


# Devices left out of disk and network totals, by name, as agentd's samplers leave them out
# (they decide from /sys, which a foreign file does not carry).
EXCLUDED_DISK = re.compile(
    r"^(loop|ram|zram|dm-|md|nbd|sr|fd)"                        # virtual: IO re-issued below, or memory
    r"|^nvme\d+c\d+n\d+$"                                        # NVMe multipath path: duplicates nvmeXnY
    r"|^(sd|vd|xvd|hd)[a-z]+\d+$|^(nvme\d+n\d+|mmcblk\d+)p\d+$")   # partitions
EXCLUDED_NET = re.compile(
    r"^(lo$|vnet|virbr|veth|docker|br-|br\d|tap|tun|cali|flannel|cni|vxlan|kube|macvtap|ovs)")
METRIC_NAME = re.compile(r"^[a-z][a-z0-9_]*(\.[A-Za-z0-9_]+)+$")


class TraceImportError(TraceError):
    """A foreign trace file is malformed. The message names the file, the line (1-based) when
    there is one, and what was expected there."""

    def __init__(self, path, message: str, *, line: int | None = None, expected: str | None = None):
        where = f"{path}:{line}" if line is not None else f"{path}"
        text = f"{where}: {message}"
        if expected:
            text += f" (expected {expected})"
        super().__init__(text)
        self.path, self.line, self.expected = str(path), line, expected


@dataclass
class ImportReport:
    """What an import (and a mapping onto a host) did, for the person who asked for it."""

    source_format: str = ""
    source_path: str = ""
    mapped: list[tuple[str, str]] = field(default_factory=list)     # (source field(s), target metric and how)
    dropped: list[tuple[str, str]] = field(default_factory=list)    # (source field, why)
    missing: list[tuple[str, str]] = field(default_factory=list)    # (target metric, why it is NaN)
    scaled: list[tuple[str, str]] = field(default_factory=list)     # (metric, factor and from what)
    notes: list[str] = field(default_factory=list)

    def map(self, source: str, target: str) -> None:
        if (source, target) not in self.mapped:
            self.mapped.append((source, target))

    def drop(self, source: str, why: str) -> None:
        if not any(s == source for s, _ in self.dropped):
            self.dropped.append((source, why))

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    def to_dict(self) -> dict:
        return {"source_format": self.source_format, "source_path": self.source_path,
                "mapped": [list(x) for x in self.mapped], "dropped": [list(x) for x in self.dropped],
                "missing": [list(x) for x in self.missing], "scaled": [list(x) for x in self.scaled],
                "notes": list(self.notes)}

    def render(self) -> str:
        lines = [f"imported {self.source_path} as {self.source_format}"]
        for title, rows in (("mapped", self.mapped), ("scaled", self.scaled), ("dropped", self.dropped),
                            ("missing (NaN)", self.missing)):
            if rows:
                lines.append(f"{title}:")
                lines += [f"  {a}  ->  {b}" if title == "mapped" else f"  {a}: {b}" for a, b in rows]
        if self.notes:
            lines.append("notes:")
            lines += [f"  {n}" for n in self.notes]
        return "\n".join(lines)


@dataclass
class IntervalData:
    """Metrics over consecutive intervals, before resampling.

    bounds_s: float64 [n+1], strictly increasing interval boundaries (seconds, any origin)
    values:   float64 [n, N], per-interval rate or gauge, NaN = not measured in that interval
    """

    bounds_s: np.ndarray
    values: np.ndarray
    metrics: list[MetricSpec]


def resample_intervals(data: IntervalData, window_s: float, report: ImportReport | None = None) -> np.ndarray:
    """Time-weighted average of interval values on the window grid (see module docstring).
    Returns float32 [T, N]."""
    b = np.asarray(data.bounds_s, dtype=np.float64)
    v = np.asarray(data.values, dtype=np.float64)
    if b.ndim != 1 or len(b) < 2 or v.shape[0] != len(b) - 1:
        raise ValueError(f"bounds [{len(b)}] and values {v.shape} do not describe intervals")
    if not (np.diff(b) > 0).all():
        raise ValueError("interval bounds must be strictly increasing")
    span = b[-1] - b[0]
    T = int(math.floor(span / window_s + 1e-9))
    if report is not None:
        tail = span - T * window_s
        if tail > 1e-6:
            report.note(f"dropped the last {tail:.3f} s after window {T - 1}: shorter than one window of {window_s} s")
    N = v.shape[1]
    out = np.full((T, N), np.nan, dtype=np.float64)
    if T == 0:
        return out.astype(np.float32)
    edges = b[0] + window_s * np.arange(T + 1)
    # overlap[i, k] = |[b_i, b_{i+1}) ∩ [e_k, e_{k+1})|: dense [n, T]; import sizes are small.
    lo = np.maximum(b[:-1, None], edges[None, :-1])
    hi = np.minimum(b[1:, None], edges[None, 1:])
    overlap = np.clip(hi - lo, 0.0, None)
    finite = np.isfinite(v)
    weights = overlap.T @ finite.astype(np.float64)            # [T, N]
    sums = overlap.T @ np.where(finite, v, 0.0)                 # [T, N]
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.where(weights > 0, sums / np.where(weights > 0, weights, 1.0), np.nan)
    return out.astype(np.float32)


def grid_from_timestamps(timestamps_s: np.ndarray, path, lines: list[int] | None = None) -> np.ndarray:
    """Interval bounds from sample timestamps; raises naming the line of the first timestamp that
    does not increase."""
    ts = np.asarray(timestamps_s, dtype=np.float64)
    bad = np.nonzero(np.diff(ts) <= 0)[0]
    if len(bad):
        i = int(bad[0]) + 1
        raise TraceImportError(path, f"timestamp {float(ts[i]):g} does not increase over the previous {float(ts[i - 1]):g}",
                               line=lines[i] if lines else None, expected="strictly increasing timestamps")
    return ts


def unit_for(name: str) -> str:
    """The unit agentd's naming scheme implies for a metric name."""
    last = name.rsplit(".", 1)[-1]
    if name.startswith("cpu.util") or last in ("busy",) or last.endswith("_frac"):
        return "fraction"
    if last.endswith("_Bps"):
        return "B/s"
    if last.endswith("_per_s") or last.endswith("_iops") or last.endswith("_pps"):
        return "1/s"
    if last.endswith("_B"):
        return "B"
    if last.endswith("_ns"):
        return "ns"
    if name.startswith("psi."):
        return "percent"
    return ""


def source_label(path: Path | str) -> str:
    return str(path)


def build_trace(data: IntervalData, window_s: float, report: ImportReport, path, *, provenance: dict,
                host_fingerprint: dict | None = None) -> Trace:
    """Resample interval data onto the window grid and wrap it as a Trace; an input shorter than
    one window is an error (an empty trace helps nobody)."""
    if not window_s > 0:
        raise TraceImportError(path, f"window {window_s} s", expected="a positive window length")
    values = resample_intervals(data, window_s, report)
    span = float(data.bounds_s[-1] - data.bounds_s[0])
    if values.shape[0] == 0:
        raise TraceImportError(path, f"the samples span {span:.3f} s, shorter than one window of {window_s} s")
    empty = [m.name for j, m in enumerate(data.metrics) if np.isnan(values[:, j]).all()]
    for name in empty:
        report.missing.append((name, "no sample of it in the source"))
    start_ns = np.round((data.bounds_s[0] + window_s * np.arange(values.shape[0])) * 1e9).astype(np.int64)
    prov = {"source": str(path), "source_format": report.source_format, **provenance}
    return Trace(values=values, metrics=list(data.metrics), window_s=float(window_s), window_start_ns=start_ns,
                 host_fingerprint=dict(host_fingerprint or {}), provenance=prov)


def interval_bounds_from_rows(ts: np.ndarray) -> np.ndarray:
    """Rows that each hold the value over [t_i, t_{i+1}); the last row covers the median spacing.
    Returns bounds [n+1]."""
    ts = np.asarray(ts, dtype=np.float64)
    step = float(np.median(np.diff(ts))) if len(ts) > 1 else 1.0
    return np.append(ts, ts[-1] + step)
