"""CSV with documented columns: the format `Trace.write_csv` writes, and what a user can write
by hand.

    window,start_s,cpu.util.core0,cpu.util,disk.read_Bps,...      (window-indexed)
    timestamp,cpu.util,mem.bw_Bps,...                            (timestamped, any spacing)

- The first line is the header. Exactly one time column: `window` (consecutive integers
  from 0; each row is one window of the file's length: `--window`, or the spacing of the
  optional `start_s` column when present) or `timestamp` (seconds, strictly increasing, any
  origin, any spacing).
- A `timestamp` row holds the values over [its timestamp, the next row's timestamp); the
  last row covers the median spacing. Rows are then resampled onto W-second windows
  (time-weighted, see base.py).
- Every other column is a metric in agentd's naming scheme (`cpu.util.core0`,
  `disk.read_Bps`, `mem.bw_Bps`, ...): lower-case, dot-separated. Its unit follows from the
  name (`_Bps` B/s, `_per_s` 1/s, `_B` bytes, `cpu.util*` fraction). A column whose name is
  not in that scheme is dropped and reported.
- Empty cells, `nan` and `NaN` are "not measured" (NaN); anything else must be a number.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from agentd.metrics import MetricSpec

from . import register
from .base import (METRIC_NAME, ImportReport, IntervalData, TraceImportError, build_trace, grid_from_timestamps,
                   interval_bounds_from_rows, unit_for)

_NAN = {"", "nan", "NaN", "NAN"}


def _float(cell: str, path, line: int, column: str) -> float:
    cell = cell.strip()
    if cell in _NAN:
        return float("nan")
    try:
        v = float(cell)
    except ValueError:
        raise TraceImportError(path, f"column {column!r} is {cell!r}", line=line, expected="a number or empty") from None
    if not np.isfinite(v):
        raise TraceImportError(path, f"column {column!r} is {cell!r}", line=line, expected="a finite number or empty")
    return v


def load(path: Path | str, *, window_s: float = 1.0) -> tuple:
    path = Path(path)
    report = ImportReport(source_format="csv", source_path=str(path))
    try:
        fh = path.open(newline="", encoding="utf-8")
    except OSError as e:
        raise TraceImportError(path, f"cannot read: {e.strerror}") from None
    with fh:
        rows = list(enumerate(csv.reader(fh), 1))
    rows = [(n, r) for n, r in rows if r and any(c.strip() for c in r)]
    if not rows:
        raise TraceImportError(path, "empty file", line=1, expected="a header line")
    hline, header = rows[0]
    header = [h.strip() for h in header]
    if len(set(header)) != len(header):
        dup = sorted({h for h in header if header.count(h) > 1})
        raise TraceImportError(path, f"duplicate columns {dup}", line=hline)
    time_cols = [h for h in ("window", "timestamp") if h in header]
    if len(time_cols) != 1:
        raise TraceImportError(path, f"header {header[:4]}...", line=hline,
                               expected="exactly one of the columns 'window' or 'timestamp'")
    tcol = time_cols[0]
    metric_cols = []
    for j, h in enumerate(header):
        if h in ("window", "timestamp", "start_s"):
            continue
        if METRIC_NAME.match(h):
            metric_cols.append((j, h))
            report.map(h, h)
        else:
            report.drop(h, "not a metric name in agentd's scheme (e.g. cpu.util.core0, disk.read_Bps)")
    if not metric_cols:
        raise TraceImportError(path, "no metric columns", line=hline, expected="columns named like cpu.util, mem.bw_Bps")
    data = rows[1:]
    if len(data) < 1:
        raise TraceImportError(path, "no data rows", line=hline + 1)
    tj = header.index(tcol)
    times, lines, vals = [], [], []
    for n, r in data:
        if len(r) != len(header):
            raise TraceImportError(path, f"{len(r)} cells", line=n, expected=f"{len(header)} cells as in the header")
        times.append(_float(r[tj], path, n, tcol))
        vals.append([_float(r[j], path, n, h) for j, h in metric_cols])
        lines.append(n)
    t = np.array(times)
    if np.isnan(t).any():
        i = int(np.argmax(np.isnan(t)))
        raise TraceImportError(path, f"column {tcol!r} is empty", line=lines[i], expected="a value in every row")
    file_window = window_s
    if tcol == "window":
        expect = np.arange(len(t))
        if not np.array_equal(t, expect):
            i = int(np.argmax(t != expect))
            raise TraceImportError(path, f"window {t[i]:g}", line=lines[i], expected=f"window {i} (consecutive from 0)")
        if "start_s" in header and len(t) > 1:
            sj = header.index("start_s")
            starts = np.array([_float(r[sj], path, n, "start_s") for n, r in data])
            if np.isfinite(starts).all():
                file_window = float(np.median(np.diff(starts)))
                report.note(f"window length {file_window:g} s taken from the start_s column")
        t = t * file_window
    else:
        grid_from_timestamps(t, path, lines)
    bounds = interval_bounds_from_rows(t) if tcol == "timestamp" else np.append(t, t[-1] + file_window)
    specs = [MetricSpec(h, unit_for(h), source="csv") for _, h in metric_cols]
    idata = IntervalData(bounds, np.array(vals, dtype=np.float64), specs)
    trace = build_trace(idata, window_s, report, path, provenance={"rows": len(data), "time_column": tcol})
    return trace, report


register("csv", load, "CSV: a 'window' or 'timestamp' column, then metrics named in agentd's scheme")
