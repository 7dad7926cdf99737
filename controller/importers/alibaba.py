"""Alibaba cluster-trace-v2018 `machine_usage.csv` (no header, one row per machine and sample):

    machine_id, time_stamp, cpu_util_percent, mem_util_percent, mem_gps, mkpi, net_in, net_out, disk_io_percent

time_stamp is seconds from the trace's start (about every 10 s, irregular). One machine is
imported (`--machine m_1932`; optional when the file holds a single machine). The dataset
normalizes everything but mkpi to [0, 100] of the machine's capacity and marks abnormal
values as -1 or 101; those read as NaN here.

What becomes what:
- cpu_util_percent / 100 -> `cpu.util` (no per-core data in this trace: the `cpu.util.core<i>`
  columns of a target host stay NaN unless a core mapping spreads it, see controller/mapping.py)
- mem_util_percent / 100 -> `mem.used_frac` (fraction of the machine's memory)
- mem_gps / 100 -> `mem.bw_frac` (fraction of the machine's memory bandwidth)
- net_in / 100, net_out / 100 -> `net.rx_frac`, `net.tx_frac` (fractions of its network capacity)
- disk_io_percent / 100 -> `disk.io_frac`
- mkpi -> `llc.mpki` (LLC misses per thousand instructions)
The `*_frac` metrics are fractions of an unknown machine's capacity, so they get their own
names; `controller/mapping.py` turns mem.bw_frac / net.*_frac into B/s on a target host with
calibrated peaks. Rows of one machine with the same time_stamp are averaged (reported).
"""

from __future__ import annotations

import csv
from collections import defaultdict
from pathlib import Path

import numpy as np

from mimesys.metrics import MetricSpec

from . import register
from .base import ImportReport, IntervalData, TraceImportError, build_trace, interval_bounds_from_rows

COLUMNS = ("machine_id", "time_stamp", "cpu_util_percent", "mem_util_percent", "mem_gps", "mkpi",
           "net_in", "net_out", "disk_io_percent")
# source column -> (metric, scale)
MAPPING = {
    "cpu_util_percent": ("cpu.util", 0.01),
    "mem_util_percent": ("mem.used_frac", 0.01),
    "mem_gps": ("mem.bw_frac", 0.01),
    "mkpi": ("llc.mpki", 1.0),
    "net_in": ("net.rx_frac", 0.01),
    "net_out": ("net.tx_frac", 0.01),
    "disk_io_percent": ("disk.io_frac", 0.01),
}
_PERCENT = {"cpu_util_percent", "mem_util_percent", "mem_gps", "net_in", "net_out", "disk_io_percent"}


def load(path: Path | str, *, window_s: float = 10.0, machine: str | None = None) -> tuple:
    path = Path(path)
    report = ImportReport(source_format="alibaba", source_path=str(path))
    by_machine: dict[str, list[tuple[int, list[str]]]] = defaultdict(list)
    try:
        fh = path.open(newline="", encoding="utf-8")
    except OSError as e:
        raise TraceImportError(path, f"cannot read: {e.strerror}") from None
    with fh:
        for n, row in enumerate(csv.reader(fh), 1):
            if not row or not any(c.strip() for c in row):
                continue
            if n == 1 and row[0].strip() == "machine_id":
                continue  # a header line some copies carry
            if len(row) != len(COLUMNS):
                raise TraceImportError(path, f"{len(row)} columns", line=n,
                                       expected=f"{len(COLUMNS)} columns: {', '.join(COLUMNS)}")
            if machine is None or row[0] == machine:
                by_machine[row[0]].append((n, row))
    if machine is None:
        if len(by_machine) != 1:
            some = ", ".join(sorted(by_machine)[:5])
            raise TraceImportError(path, f"{len(by_machine)} machines in the file ({some}{' ...' if len(by_machine) > 5 else ''})",
                                   expected="--machine MACHINE_ID to pick one")
        machine = next(iter(by_machine))
    rows = by_machine.get(machine)
    if not rows:
        raise TraceImportError(path, f"no rows for machine {machine!r}", expected="a machine_id present in the file")
    samples: dict[float, list[list[float]]] = defaultdict(list)
    abnormal = 0
    for n, row in rows:
        try:
            ts = float(row[1])
        except ValueError:
            raise TraceImportError(path, f"time_stamp is {row[1]!r}", line=n, expected="seconds (a number)") from None
        if not np.isfinite(ts):
            raise TraceImportError(path, f"time_stamp is {row[1]!r}", line=n, expected="seconds (a finite number)")
        vals = []
        for col, cell in zip(COLUMNS[2:], row[2:]):
            cell = cell.strip()
            if cell == "":
                vals.append(np.nan)
                continue
            try:
                v = float(cell)
            except ValueError:
                raise TraceImportError(path, f"{col} is {cell!r}", line=n, expected="a number or empty") from None
            if col in _PERCENT and not 0 <= v <= 100:
                abnormal += 1
                v = np.nan  # the dataset's markers for abnormal values (-1, 101)
            vals.append(v * MAPPING[col][1])
        samples[ts].append(vals)
    ts = np.array(sorted(samples))
    dup = sum(len(v) > 1 for v in samples.values())
    if dup:
        report.note(f"{dup} time stamps appear more than once for {machine}; their rows are averaged")
    with np.errstate(all="ignore"):
        values = np.array([np.nanmean(np.array(samples[t]), axis=0) if len(samples[t]) > 1 else samples[t][0]
                           for t in ts], dtype=np.float64)
    if abnormal:
        report.note(f"{abnormal} values outside [0, 100] (the dataset's abnormal markers) read as NaN")
    if len(ts) < 1:
        raise TraceImportError(path, f"no samples for machine {machine!r}")
    for col, (metric, scale) in MAPPING.items():
        report.map(f"{col}{' / 100' if scale == 0.01 else ''}", metric)
    specs = [MetricSpec(m, "fraction" if m.endswith("_frac") or m == "cpu.util" else "1/kinstr", source="alibaba")
             for m, _ in MAPPING.values()]
    data = IntervalData(interval_bounds_from_rows(ts), values, specs)
    trace = build_trace(data, window_s, report, path, provenance={"machine_id": machine, "rows": len(rows)},
                        host_fingerprint={"machine_id": machine, "source": "alibaba cluster-trace-v2018"})
    return trace, report


register("alibaba", load, "Alibaba cluster-trace-v2018 machine_usage.csv (one machine: --machine)")
