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
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from mimesys.errors import TraceError
from mimesys.metrics import MetricSpec
from mimesys.trace import Trace


# Devices left out of disk and network totals, by name, as agentd's samplers leave them out
# (they decide from /sys, which a foreign file does not carry).
EXCLUDED_DISK = re.compile(
    r"^(loop|ram|zram|dm-|md|nbd|sr|fd)"                        # virtual: IO re-issued below, or memory
    r"|^nvme\d+c\d+n\d+$"                                        # NVMe multipath path: duplicates nvmeXnY
    r"|^(sd|vd|xvd|hd)[a-z]+\d+$|^(nvme\d+n\d+|mmcblk\d+)p\d+$")   # partitions
EXCLUDED_NET = re.compile(
    r"^(lo$|vnet|virbr|veth|docker|br-|br\d|tap|tun|cali|flannel|cni|vxlan|kube|macvtap|ovs)")
METRIC_NAME = re.compile(r"^[a-z][a-z0-9_]*(\.[A-Za-z0-9_]+)+$")
MAX_IMPORT_WINDOWS = 31 * 24 * 3600     # a month of 1 s windows
# windows × metrics of one imported trace (float32: 512 MiB). The output's two sizes come from the
# file (its time span and its columns): a 2-row CSV a month apart with 1000 columns would ask 30 GB.
MAX_IMPORT_CELLS = 1 << 27
EARLIEST_DATE_S = 946_684_800.0        # 2000-01-01: a first timestamp from then to now is a Unix date
MAX_DECOMPRESSED_BYTES = 4 << 30         # a gzipped input may expand to at most this


def read_maybe_gzip(path: Path | str, *, max_bytes: int | None = None) -> bytes:
    """A file's bytes, gunzipped if it is gzip, never expanding past max_bytes (a gzip bomb is
    a clear error, not an exhausted host)."""
    import zlib
    max_bytes = MAX_DECOMPRESSED_BYTES if max_bytes is None else max_bytes
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise TraceImportError(path, f"cannot read: {e.strerror}") from None
    if raw[:2] != b"\x1f\x8b":
        return raw
    d = zlib.decompressobj(wbits=31)
    out = []
    total = 0
    data = raw
    try:
        while data:
            chunk = d.decompress(data, 1 << 20)
            total += len(chunk)
            if total > max_bytes:
                raise TraceImportError(path, f"gzip data expands past {max_bytes >> 20} MiB",
                                       expected="a smaller file (or raise the limit)")
            out.append(chunk)
            data = d.unconsumed_tail
            if d.eof:
                data = d.unused_data   # concatenated gzip members
                if data:
                    d = zlib.decompressobj(wbits=31)
    except zlib.error as e:
        raise TraceImportError(path, f"corrupt gzip data: {e}") from None
    if not d.eof:
        raise TraceImportError(path, "truncated gzip data")
    return b"".join(out)


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


# CPU time coverage: what share of the wall time a core's /proc/stat modes add up to, summed
# over the trace's intervals (the sum telescopes: tick rounding and the jitter between a
# record's timestamp and its counters' read stay at the ends), over at least this much time.
COVERAGE_MIN_S = 30.0
COVERAGE_WARN = 0.97


class CpuCoverage:
    """Per source core, the /proc/stat modes' seconds summed against the wall time they span.

    Idle and iowait are counted exactly (NO_HZ), the busy modes by sampling at each tick, so work
    that runs between ticks is missing from the modes' sum: short of the wall time by just that
    (measured on a VM: iperf3 paced at 2 Gbit/s, 1.1 s of CPU in 10 s, 0.05 s of it in the busy
    modes). The importers keep busy / all modes (self-consistent within one read, where a
    record's timestamp is not) and say here when the source's modes fall short of the wall."""

    def __init__(self):
        self.modes_s: dict[str, float] = {}
        self.wall_s: dict[str, float] = {}

    def add(self, core: str, modes_s: float, wall_s: float) -> None:
        if wall_s > 0 and math.isfinite(modes_s) and modes_s >= 0:
            self.modes_s[core] = self.modes_s.get(core, 0.0) + modes_s
            self.wall_s[core] = self.wall_s.get(core, 0.0) + wall_s

    def note(self, report: ImportReport) -> None:
        long = [c for c, w in self.wall_s.items() if w >= COVERAGE_MIN_S]
        if not long:
            return
        share = {c: self.modes_s[c] / self.wall_s[c] for c in long}
        worst = min(share, key=share.get)
        total = sum(self.modes_s[c] for c in long) / sum(self.wall_s[c] for c in long)
        text = (f"cpu: the source's /proc/stat modes add up to {total:.4f} of the wall time "
                f"(core {worst}: {share[worst]:.4f})")
        if share[worst] < COVERAGE_WARN:
            text += ("; the busy modes, counted at ticks, miss CPU time that ran between them, so "
                     "cpu.util.core<r> (busy / all modes) reads low where they do; agentd's sampler counts "
                     "wall time less idle, iowait and steal")
        report.note(text)


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
    if not np.isfinite(b).all():
        raise ValueError("interval bounds must be finite")
    if not (np.diff(b) > 0).all():
        raise ValueError("interval bounds must be strictly increasing")
    span = b[-1] - b[0]
    T = int(math.floor(span / window_s + 1e-9))
    if report is not None:
        tail = span - T * window_s
        if tail > 1e-6:
            report.note(f"dropped the last {tail:.3f} s after window {T - 1}: shorter than one window of {window_s} s")
    N = v.shape[1]
    if T == 0:
        return np.full((0, N), np.nan, dtype=np.float32)
    edges = b[0] + window_s * np.arange(T + 1)
    # O(n + T): integrate each metric (and the time it was measured) up to every interval bound,
    # read those running integrals off at the window edges by linear interpolation (exact: the
    # integrand is constant within an interval), and difference. A dense [n, T] overlap matrix
    # would be 60 GB for a day at 1 Hz.
    finite = np.isfinite(v)
    dt = np.diff(b)[:, None]
    cum_w = np.concatenate([np.zeros((1, N)), np.cumsum(dt * finite, axis=0)])                    # [n+1, N]
    cum_s = np.concatenate([np.zeros((1, N)), np.cumsum(dt * np.where(finite, v, 0.0), axis=0)])  # [n+1, N]
    out = np.empty((T, N), dtype=np.float32)
    for m in range(N):
        weights = np.diff(np.interp(edges, b, cum_w[:, m]))
        sums = np.diff(np.interp(edges, b, cum_s[:, m]))
        ok = weights > 1e-9 * window_s
        out[:, m] = np.where(ok, sums / np.where(ok, weights, 1.0), np.nan)
    return out


def grid_from_timestamps(timestamps_s: np.ndarray, path, lines: list[int] | None = None) -> np.ndarray:
    """Interval bounds from sample timestamps; raises naming the line of the first timestamp that
    does not increase."""
    ts = np.asarray(timestamps_s, dtype=np.float64)
    nonfinite = np.nonzero(~np.isfinite(ts))[0]
    if len(nonfinite):
        i = int(nonfinite[0])
        raise TraceImportError(path, "timestamp is not a finite number", line=lines[i] if lines else None,
                               expected="seconds (a finite number)")
    bad = np.nonzero(~(np.diff(ts) > 0))[0]
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


def build_trace(data: IntervalData, window_s: float, report: ImportReport, path, *, provenance: dict,
                host_fingerprint: dict | None = None) -> Trace:
    """Resample interval data onto the window grid and wrap it as a Trace; an input shorter than
    one window is an error (an empty trace helps nobody)."""
    if not window_s > 0:
        raise TraceImportError(path, f"window {window_s} s", expected="a positive window length")
    b = np.asarray(data.bounds_s, dtype=np.float64)
    if len(b) and not np.isfinite(b).all():
        raise TraceImportError(path, "a timestamp is not a finite number", expected="finite timestamps")
    if len(b) >= 2 and (b[-1] - b[0]) / window_s > MAX_IMPORT_WINDOWS:
        raise TraceImportError(path, f"the samples span {b[-1] - b[0]:.0f} s = more than {MAX_IMPORT_WINDOWS} "
                               f"windows of {window_s} s", expected="a span the trace can hold (check the timestamps' unit)")
    N = len(data.metrics)
    if len(b) >= 2 and math.floor((b[-1] - b[0]) / window_s + 1e-9) * N > MAX_IMPORT_CELLS:
        T = int(math.floor((b[-1] - b[0]) / window_s + 1e-9))
        raise TraceImportError(path, f"{T} windows × {N} metrics = {T * N} values, more than {MAX_IMPORT_CELLS}",
                               expected="a shorter span, a longer --window or fewer columns")
    values = resample_intervals(data, window_s, report)
    span = float(data.bounds_s[-1] - data.bounds_s[0])
    if values.shape[0] == 0:
        raise TraceImportError(path, f"the samples span {span:.3f} s, shorter than one window of {window_s} s")
    empty = [m.name for j, m in enumerate(data.metrics) if np.isnan(values[:, j]).all()]
    for name in empty:
        report.missing.append((name, "no sample of it in the source"))
    start_ns = np.round((data.bounds_s[0] + window_s * np.arange(values.shape[0])) * 1e9).astype(np.int64)
    prov = {"source": str(path), "source_format": report.source_format, **provenance}
    # Sources that stamp samples with Unix time (node_exporter, tacc_stats, Bitbrains) give the
    # trace its wall-clock start like a recorded one; seconds from the trace's own start
    # (Alibaba's, a CSV's 0, 1, 2 ...) are not a date and are left as the source's clock.
    if "started_unix_s" not in prov:
        if EARLIEST_DATE_S <= float(b[0]) <= time.time() + 86400:
            prov["started_unix_s"] = float(b[0])
            prov.setdefault("window_start_clock", "CLOCK_REALTIME (the source's timestamps)")
        else:
            prov.setdefault("window_start_clock", "the source's (seconds, not a date)")
    return Trace(values=values, metrics=list(data.metrics), window_s=float(window_s), window_start_ns=start_ns,
                 host_fingerprint=dict(host_fingerprint or {}), provenance=prov)


def interval_bounds_from_rows(ts: np.ndarray) -> np.ndarray:
    """Rows that each hold the value over [t_i, t_{i+1}); the last row covers the median spacing.
    Returns bounds [n+1]."""
    ts = np.asarray(ts, dtype=np.float64)
    step = float(np.median(np.diff(ts))) if len(ts) > 1 else 1.0
    return np.append(ts, ts[-1] + step)
