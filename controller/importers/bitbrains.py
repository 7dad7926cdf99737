"""Bitbrains GWA-T-12 per-VM files (`fastStorage/1.csv`, `Rnd/2013-7/1.csv`): a header line, then
semicolon-separated rows (tabs after the semicolons are ignored):

    Timestamp [ms]; CPU cores; CPU capacity provisioned [MHZ]; CPU usage [MHZ]; CPU usage [%];
    Memory capacity provisioned [KB]; Memory usage [KB]; Disk read throughput [KB/s];
    Disk write throughput [KB/s]; Network received throughput [KB/s];
    Network transmitted throughput [KB/s]

The timestamp header says ms but the published files hold Unix seconds (about 300 s apart);
values below 1e11 are read as seconds and the report says so. A row holds averages over the
interval up to the next row.

What becomes what (KB = 1024 bytes):
- CPU usage [%] / 100 -> `cpu.util` (fraction of the VM's provisioned capacity; no per-core data)
- Memory usage [KB] × 1024 -> `mem.used_B`
- Disk read / write throughput [KB/s] × 1024 -> `disk.read_Bps`, `disk.write_Bps`
- Network received / transmitted [KB/s] × 1024 -> `net.rx_Bps`, `net.tx_Bps`
- CPU cores, capacities -> the trace's host_fingerprint (cpus, cpu_mhz, mem_total_B)
- CPU usage [MHZ] is CPU usage [%] times capacity: dropped as redundant.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from mimesys.metrics import MetricSpec

from . import register
from .base import ImportReport, IntervalData, TraceImportError, build_trace, grid_from_timestamps, interval_bounds_from_rows

COLUMNS = ("Timestamp [ms]", "CPU cores", "CPU capacity provisioned [MHZ]", "CPU usage [MHZ]", "CPU usage [%]",
           "Memory capacity provisioned [KB]", "Memory usage [KB]", "Disk read throughput [KB/s]",
           "Disk write throughput [KB/s]", "Network received throughput [KB/s]",
           "Network transmitted throughput [KB/s]")
OUT = (("CPU usage [%]", "cpu.util", 0.01, "fraction"), ("Memory usage [KB]", "mem.used_B", 1024.0, "B"),
       ("Disk read throughput [KB/s]", "disk.read_Bps", 1024.0, "B/s"),
       ("Disk write throughput [KB/s]", "disk.write_Bps", 1024.0, "B/s"),
       ("Network received throughput [KB/s]", "net.rx_Bps", 1024.0, "B/s"),
       ("Network transmitted throughput [KB/s]", "net.tx_Bps", 1024.0, "B/s"))


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.rstrip("\n").split(";")]


def load(path: Path | str, *, window_s: float = 300.0) -> tuple:
    path = Path(path)
    report = ImportReport(source_format="bitbrains", source_path=str(path))
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise TraceImportError(path, f"cannot read: {e}") from None
    numbered = [(n, l) for n, l in enumerate(lines, 1) if l.strip()]
    if not numbered:
        raise TraceImportError(path, "empty file", line=1, expected="the GWA-T-12 header line")
    hline, head = numbered[0]
    header = _cells(head)
    if [h.lower() for h in header] != [c.lower() for c in COLUMNS]:
        raise TraceImportError(path, f"header {head[:60]!r}...", line=hline,
                               expected="; ".join(COLUMNS))
    rows, ns = [], []
    for n, l in numbered[1:]:
        cells = _cells(l)
        if len(cells) != len(COLUMNS):
            raise TraceImportError(path, f"{len(cells)} fields", line=n, expected=f"{len(COLUMNS)} fields separated by ';'")
        try:
            rows.append([float(c) for c in cells])
        except ValueError:
            j = next(i for i, c in enumerate(cells) if not _isnum(c))
            raise TraceImportError(path, f"{COLUMNS[j]} is {cells[j]!r}", line=n, expected="a number") from None
        ns.append(n)
    if not rows:
        raise TraceImportError(path, "no data rows", line=hline + 1)
    a = np.array(rows)
    ts = a[:, 0]
    if np.nanmax(ts) < 1e11:
        report.note("timestamps are Unix seconds although the header says [ms] (as in the published dataset)")
    else:
        ts = ts / 1000.0
    grid_from_timestamps(ts, path, ns)
    idx = {c: i for i, c in enumerate(COLUMNS)}
    values = np.stack([a[:, idx[src]] * scale for src, _, scale, _ in OUT], axis=1)
    for src, dst, scale, _ in OUT:
        report.map(f"{src}{' / 100' if scale == 0.01 else ' x 1024'}", dst)
    report.drop("CPU usage [MHZ]", "redundant: CPU usage [%] x capacity")
    report.drop("CPU cores, CPU capacity provisioned, Memory capacity provisioned", "kept in host_fingerprint, not a metric")
    specs = [MetricSpec(dst, unit, source="bitbrains") for _, dst, _, unit in OUT]
    fp = {"cpus": int(a[0, 1]), "cpu_mhz": float(a[0, 2]), "mem_total_B": float(a[0, 5]) * 1024,
          "source": "bitbrains GWA-T-12 VM (provisioned, not measured)"}
    data = IntervalData(interval_bounds_from_rows(ts), values, specs)
    trace = build_trace(data, window_s, report, path, provenance={"rows": len(rows)}, host_fingerprint=fp)
    return trace, report


def _isnum(c: str) -> bool:
    try:
        float(c)
        return True
    except ValueError:
        return False


register("bitbrains", load, "Bitbrains GWA-T-12 per-VM CSV (semicolon-separated)")
