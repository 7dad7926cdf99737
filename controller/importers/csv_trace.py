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

from mimesys.metrics import MetricSpec

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


class _Rows:
    """Growable float64 [rows, columns] storage in blocks: a day at 1 Hz with 64 columns is
    44 MB of floats, not 5.5 million Python strings and floats (issue 22)."""

    def __init__(self, width: int, block: int = 4096):
        self.width, self.block = width, block
        self.done: list[np.ndarray] = []
        self.cur = np.empty((block, width))
        self.n = 0

    def append(self, row) -> None:
        if self.n == self.block:
            self.done.append(self.cur)
            self.cur, self.n = np.empty((self.block, self.width)), 0
        self.cur[self.n] = row
        self.n += 1

    def array(self) -> np.ndarray:
        out = np.concatenate(self.done + [self.cur[:self.n]]) if self.done else self.cur[:self.n].copy()
        self.done, self.cur = [], np.empty((0, self.width))
        return out


def _row_floats(cells: list[str], cols: list[int], names: list[str], path, line: int) -> list[float]:
    """The cells at `cols` as floats: one C-speed float() per cell when they all are plain
    finite numbers, else cell by cell for NaN cells and the error that names the bad one."""
    try:
        vals = [float(cells[j]) for j in cols]
        if all(v - v == 0 for v in vals):       # finite (inf - inf and nan - nan are nan)
            return vals
    except ValueError:
        pass
    return [_float(cells[j], path, line, h) for j, h in zip(cols, names)]


def load(path: Path | str, *, window_s: float = 1.0) -> tuple:
    path = Path(path)
    report = ImportReport(source_format="csv", source_path=str(path))
    try:
        fh = path.open(newline="", encoding="utf-8")
    except OSError as e:
        raise TraceImportError(path, f"cannot read: {e.strerror}") from None
    with fh:
        # One pass over the rows as they are read (never the whole file as Python objects).
        rows = ((n, r) for n, r in enumerate(csv.reader(fh), 1) if r and any(c.strip() for c in r))
        first = next(rows, None)
        if first is None:
            raise TraceImportError(path, "empty file", line=1, expected="a header line")
        hline, header = first
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
            raise TraceImportError(path, "no metric columns", line=hline,
                                   expected="columns named like cpu.util, mem.bw_Bps")
        tj = header.index(tcol)
        sj = header.index("start_s") if tcol == "window" and "start_s" in header else None
        # Stored per row: the time, then the metrics, then start_s when it matters.
        cols = [tj] + [j for j, _ in metric_cols] + ([sj] if sj is not None else [])
        names = [tcol] + [h for _, h in metric_cols] + (["start_s"] if sj is not None else [])
        table = _Rows(len(cols))
        lines = []
        for n, r in rows:
            if len(r) != len(header):
                raise TraceImportError(path, f"{len(r)} cells", line=n, expected=f"{len(header)} cells as in the header")
            table.append(_row_floats(r, cols, names, path, n))
            lines.append(n)
    if not lines:
        raise TraceImportError(path, "no data rows", line=hline + 1)
    table = table.array()
    t = table[:, 0].copy()
    vals = table[:, 1:1 + len(metric_cols)]
    if np.isnan(t).any():
        i = int(np.argmax(np.isnan(t)))
        raise TraceImportError(path, f"column {tcol!r} is empty", line=lines[i], expected="a value in every row")
    file_window = window_s
    if tcol == "window":
        expect = np.arange(len(t))
        if not np.array_equal(t, expect):
            i = int(np.argmax(t != expect))
            raise TraceImportError(path, f"window {t[i]:g}", line=lines[i],
                                   expected=f"window {i} (consecutive from 0)")
        if sj is not None and len(t) > 1:
            starts = table[:, -1]
            if np.isfinite(starts).all():
                file_window = float(np.median(np.diff(starts)))
                report.note(f"window length {file_window:g} s taken from the start_s column")
        t = t * file_window
    else:
        grid_from_timestamps(t, path, lines)
    bounds = interval_bounds_from_rows(t) if tcol == "timestamp" else np.append(t, t[-1] + file_window)
    specs = [MetricSpec(h, unit_for(h), source="csv") for _, h in metric_cols]
    idata = IntervalData(bounds, np.ascontiguousarray(vals), specs)
    del table
    trace = build_trace(idata, window_s, report, path, provenance={"rows": len(lines), "time_column": tcol})
    return trace, report


register("csv", load, "CSV: a 'window' or 'timestamp' column, then metrics named in agentd's scheme")
