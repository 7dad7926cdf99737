"""Prometheus range-query JSON (`/api/v1/query_range` answers) with node_exporter metric names.

Input: one answer object `{"status": "success", "data": {"resultType": "matrix", "result":
[{"metric": {"__name__": ..., labels}, "values": [[ts, "value"], ...]}, ...]}}`, or a JSON list
of such answers (one per query). The series are the raw counters and gauges (query them by
name, e.g. `node_cpu_seconds_total`); rates are computed here, per pair of consecutive samples
of a series, so the windows get exact counter differences. A counter that decreases was reset
and restarted from 0: its increase is its new value (Prometheus' own rule).

What becomes what:
- node_cpu_seconds_total{cpu, mode}: per cpu, busy = user + nice + system + irq + softirq over
  all modes (idle, iowait, steal included) -> `cpu.util.core<r>` (r = rank of the cpu label),
  `cpu.util` = mean over cores (the busy modes over all modes: agentd's cpu sampler counts wall
  time less idle, iowait and steal instead, which the tick-sampled busy modes under-count for
  paced work; see agentd/samplers/cpu.py). Not here: a query_range answer stamps each value with
  its step, not its scrape's time, so wall-based rates would carry up to a scrape interval of
  jitter per step; the report says what share of the wall time the modes add up to over the
  whole series and warns where a core's fall short (base.CpuCoverage)
- node_disk_read_bytes_total, node_disk_written_bytes_total, node_disk_reads_completed_total,
  node_disk_writes_completed_total {device} -> `disk.read_Bps`, `disk.write_Bps`,
  `disk.read_iops`, `disk.write_iops` (sums over whole physical disks), node_disk_io_time_seconds_total
  -> `disk.busy` (max over disks)
- node_network_{receive,transmit}_{bytes,packets}_total {device} -> `net.rx_Bps`, `net.tx_Bps`,
  `net.rx_pps`, `net.tx_pps` (loopback and virtual interfaces excluded)
- node_memory_{MemTotal,MemFree,Buffers,Cached,SReclaimable}_bytes -> `mem.used_B` =
  MemTotal − MemFree − Buffers − Cached − SReclaimable, `mem.cache_B` = Buffers + Cached
  (node_exporter has no per-CPU free-page counts, which the agent's sampler leaves out: after a
  large free on Linux ≥ 6.7 this `mem.used_B` stays high for seconds where the agent's drops)
- node_context_switches_total -> `perf.ctx_switches_per_s`
- node_pressure_{cpu,io,memory}_waiting_seconds_total -> `psi.<res>.some`,
  node_pressure_{io,memory}_stalled_seconds_total -> `psi.<res>.full` (seconds stalled per
  second: the same fraction of the window agentd's psi sampler derives from total=)
Every other series is dropped and reported. One host at a time: when the answer holds several
`instance` labels, `--machine INSTANCE` picks one.

Live: `fetch(url, start, end, step)` asks a running Prometheus server's /api/v1/query_range
for exactly the series above, in pages of at most `page_points` steps (the server refuses
more than 11,000 points per series), joins the pages and imports the result like a file.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from mimesys.metrics import MetricSpec

from . import register
from .base import (EXCLUDED_DISK, EXCLUDED_NET, MAX_IMPORT_CELLS, MAX_IMPORT_WINDOWS, CpuCoverage, ImportReport, IntervalData,
                   TraceImportError, build_trace, unit_for)

_BUSY_MODES = {"user", "nice", "system", "irq", "softirq"}
_DISK = {"node_disk_read_bytes_total": "disk.read_Bps", "node_disk_written_bytes_total": "disk.write_Bps",
         "node_disk_reads_completed_total": "disk.read_iops", "node_disk_writes_completed_total": "disk.write_iops"}
_NET = {"node_network_receive_bytes_total": "net.rx_Bps", "node_network_transmit_bytes_total": "net.tx_Bps",
        "node_network_receive_packets_total": "net.rx_pps", "node_network_transmit_packets_total": "net.tx_pps"}
_MEM = ("MemTotal", "MemFree", "Buffers", "Cached", "SReclaimable")
_PSI = {f"node_pressure_{res}_{kind}_seconds_total": f"psi.{res}.{'some' if kind == 'waiting' else 'full'}"
        for res in ("cpu", "io", "memory") for kind in ("waiting", "stalled")}


def _series(doc, path) -> list[dict]:
    answers = doc if isinstance(doc, list) else [doc]
    out = []
    for k, ans in enumerate(answers):
        where = f"answer {k}" if isinstance(doc, list) else "the answer"
        if not isinstance(ans, dict) or ans.get("status") != "success":
            raise TraceImportError(path, f"{where} has status {ans.get('status') if isinstance(ans, dict) else type(ans).__name__!r}",
                                   expected='{"status": "success", "data": {...}}')
        data = ans.get("data") or {}
        if not isinstance(data, dict) or data.get("resultType") != "matrix":
            raise TraceImportError(path, f"{where} has resultType "
                                         f"{data.get('resultType') if isinstance(data, dict) else None!r}",
                                   expected='"matrix" (a range query, /api/v1/query_range)')
        for j, s in enumerate(data.get("result") or []):
            if not isinstance(s, dict) or not isinstance(s.get("metric"), dict) \
                    or not isinstance(s.get("values"), (list, np.ndarray)):
                raise TraceImportError(path, f"{where}, result {j} lacks metric/values",
                                       expected='{"metric": {...}, "values": [[ts, "v"], ...]}')
            try:
                vals = s["values"] if isinstance(s["values"], np.ndarray) else \
                    np.array([[float(t), float(v)] for t, v in s["values"]], dtype=np.float64).reshape(-1, 2)
            except (TypeError, ValueError) as e:
                raise TraceImportError(path, f"{where}, result {j} ({s['metric'].get('__name__')}): bad sample ({e})",
                                       expected='[unix_seconds, "number"] pairs') from None
            out.append({"name": s["metric"].get("__name__", ""), "labels": s["metric"], "samples": vals})
    return out


def _samples_array(values):
    """[[ts, "v"], ...] as float64 [n, 2] at C speed, or None when it is not exactly that (the
    caller then reports the bad sample by index)."""
    if not values:
        return None
    try:
        a = np.array(values, dtype=object)
        if a.ndim != 2 or a.shape[1] != 2 or any(type(x) is bool for x in a[:, 0]):
            return None
        return a.astype(np.float64)
    except (TypeError, ValueError):
        return None


def _compact_series(obj: dict):
    """json object_hook: a series' sample list becomes one float64 array as soon as it is
    parsed, so a day of samples never lives as millions of Python lists at once (issue 22)."""
    vals = obj.get("values")
    if "metric" in obj and isinstance(vals, list):
        arr = _samples_array(vals)
        if arr is not None:
            obj["values"] = arr
    return obj


def load(path: Path | str, *, window_s: float = 1.0, machine: str | None = None) -> tuple:
    path = Path(path)
    try:
        doc = json.loads(path.read_bytes(), object_hook=_compact_series)
    except OSError as e:
        raise TraceImportError(path, f"cannot read: {e.strerror}") from None
    except RecursionError:
        raise TraceImportError(path, "not JSON this importer reads: nested too deeply",
                               expected="a Prometheus query_range answer") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        line = getattr(e, "lineno", None)
        raise TraceImportError(path, f"not JSON: {getattr(e, 'msg', e)}", line=line,
                               expected="a Prometheus query_range answer") from None
    return load_answers(doc, path, window_s=window_s, machine=machine)


def increases(v: np.ndarray) -> np.ndarray:
    """A counter's increase between consecutive samples; one that went down was reset and
    restarted from 0, so its increase is its new value (Prometheus' own rule)."""
    return np.where(v[1:] >= v[:-1], v[1:] - v[:-1], v[1:])


def load_answers(doc, path, *, window_s: float = 1.0, machine: str | None = None) -> tuple:
    """Import parsed query_range answer(s); `path` names the source in messages and the report."""
    report = ImportReport(source_format="prometheus", source_path=str(path))
    series = _host_series(doc, path, machine)
    grid = _sample_grid(series, path)
    families = _read_families(series, grid, report)
    cols = dict(families.single)
    cols.update(_cpu_columns(families, report))
    cols.update(_device_columns(families))
    cols.update(_memory_columns(families.mem, report))
    for kind in ("disk", "net"):
        if families.excluded_devices[kind]:
            report.drop(f"{kind} devices {' '.join(sorted(families.excluded_devices[kind]))}",
                        "partition, loopback or virtual device (counted elsewhere)")
    if not cols:
        raise TraceImportError(path, "none of the series is a node_exporter metric this importer knows",
                               expected="node_cpu_seconds_total, node_disk_*_total, node_network_*_total, node_memory_*_bytes, "
                                        "node_pressure_*_seconds_total")
    names = list(cols)
    specs = [MetricSpec(k, unit_for(k), source="prometheus") for k in names]
    data = IntervalData(grid, np.stack([cols[k] for k in names], axis=1), specs)
    trace = build_trace(data, window_s, report, path, provenance={"series": len(series)})
    return trace, report


def _host_series(doc, path, machine: str | None) -> list[dict]:
    """The answer's series of one host: `machine`'s instance, or the only one there is."""
    series = _series(doc, path)
    if not series:
        raise TraceImportError(path, "no series in the answer", expected="at least one result")
    instances = sorted({s["labels"].get("instance", "") for s in series})
    if machine is not None:
        series = [s for s in series if s["labels"].get("instance", "") == machine]
        if not series:
            raise TraceImportError(path, f"no series with instance={machine!r}", expected=f"one of {instances}")
    elif len(instances) > 1:
        raise TraceImportError(path, f"series from {len(instances)} instances ({', '.join(instances[:5])})",
                               expected="--machine INSTANCE to pick one host")
    return series


def _sample_grid(series: list[dict], path) -> np.ndarray:
    """Every sample time of every series, sorted: the trace's n = len(grid) - 1 intervals."""
    grid = np.unique(np.concatenate([s["samples"][:, 0] for s in series]))
    if len(grid) < 2:
        raise TraceImportError(path, "fewer than two sample times; rates need two")
    n = len(grid) - 1
    # Every series becomes a grid-long column (rates, per-CPU sums): bounded before any is made.
    if len(series) * n > MAX_IMPORT_CELLS:
        raise TraceImportError(path, f"{len(series)} series × {n} sample intervals = {len(series) * n} values, "
                                     f"more than {MAX_IMPORT_CELLS}",
                               expected="fewer series (--machine) or a coarser --step / a shorter range")
    return grid


def grid_rate(samples: np.ndarray, grid: np.ndarray, counter: bool = True) -> np.ndarray:
    """Per grid interval [n]: counter increase / dt between this series' samples (or the gauge
    value at the end of the interval), NaN where the series has no sample pair."""
    out = np.full(len(grid) - 1, np.nan)
    t, v = samples[:, 0], samples[:, 1]
    if len(t) < 2:
        return out
    dt = np.diff(t)
    if (dt >= 0).all():
        # Sorted samples (what Prometheus answers): pair a covers grid intervals
        # [idx[a], idx[a + 1]), which tile the series' span: one vectorized pass.
        idx = np.searchsorted(grid, t)
        counts = np.diff(idx)
        keep = counts > 0
        if counter:
            inc = increases(v)
            val = inc[keep] / dt[keep]
        else:
            val = v[1:][keep]
        out[idx[0]:idx[-1]] = np.repeat(val, counts[keep])
        return out
    for a in range(len(t) - 1):      # unsorted samples: pair by pair, later pairs win
        i0, i1 = np.searchsorted(grid, t[a]), np.searchsorted(grid, t[a + 1])
        if counter:
            inc = v[a + 1] - v[a] if v[a + 1] >= v[a] else v[a + 1]
            out[i0:i1] = inc / (t[a + 1] - t[a])
        else:
            out[i0:i1] = v[a + 1]
    return out


@dataclass
class _Families:
    """The series read into what each metric family needs, on the grid's n intervals."""

    n: int
    single: dict[str, np.ndarray] = field(default_factory=dict)   # columns of one series each: ctx switches, PSI
    cpu_busy: dict[str, np.ndarray] = field(init=False)           # per cpu label: the busy modes' rate
    cpu_total: dict[str, np.ndarray] = field(init=False)          # ... and every mode's
    modes_s: dict[str, float] = field(default_factory=lambda: defaultdict(float))  # per cpu: every mode's seconds
    span_s: dict[str, float] = field(default_factory=lambda: defaultdict(float))   # ... and the wall time they span
    sums: dict[str, np.ndarray] = field(default_factory=dict)     # disk and net columns, summed over devices
    busy_disks: list[np.ndarray] = field(default_factory=list)
    mem: dict[str, np.ndarray] = field(default_factory=dict)      # node_memory_<field>_bytes by field
    excluded_devices: dict[str, set] = field(default_factory=lambda: defaultdict(set))

    def __post_init__(self):
        self.cpu_busy = defaultdict(lambda: np.zeros(self.n))
        self.cpu_total = defaultdict(lambda: np.zeros(self.n))


def _read_families(series: list[dict], grid: np.ndarray, report: ImportReport) -> _Families:
    """Each series into its family (reported as mapped), or dropped with the reason."""
    f = _Families(len(grid) - 1)
    for s in series:
        name, labels, samples = s["name"], s["labels"], s["samples"]
        if name == "node_cpu_seconds_total":
            _read_cpu(f, labels, samples, grid)
            report.map("node_cpu_seconds_total{mode}", "cpu.util.core<rank>, cpu.util")
        elif name in _DISK or name == "node_disk_io_time_seconds_total" or name in _NET:
            _read_device(f, name, labels, samples, grid, report)
        elif name.startswith("node_memory_") and name[12:-6] in _MEM and name.endswith("_bytes"):
            f.mem[name[12:-6]] = grid_rate(samples, grid, counter=False)
        elif name == "node_context_switches_total":
            f.single["perf.ctx_switches_per_s"] = grid_rate(samples, grid)
            report.map(name, "perf.ctx_switches_per_s")
        elif name in _PSI:
            f.single[_PSI[name]] = np.clip(grid_rate(samples, grid), 0, 1)
            report.map(name, f"{_PSI[name]} (stalled seconds per second)")
        else:
            report.drop(name or "(unnamed series)", "no counterpart in agentd's metric schema")
    return f


def _read_cpu(f: _Families, labels: dict, samples: np.ndarray, grid: np.ndarray) -> None:
    r, cid = grid_rate(samples, grid), labels.get("cpu", "?")
    f.cpu_total[cid] += r
    t, v = samples[:, 0], samples[:, 1]
    if len(t) > 1 and (np.diff(t) > 0).all():
        f.modes_s[cid] += float(increases(v).sum())
        f.span_s[cid] = max(f.span_s[cid], float(t[-1] - t[0]))
    if labels.get("mode") in _BUSY_MODES:
        f.cpu_busy[cid] += r


def _read_device(f: _Families, name: str, labels: dict, samples: np.ndarray, grid: np.ndarray,
                 report: ImportReport) -> None:
    """A disk's or a NIC's counter, added to the sum over devices (disk.busy: kept per disk)."""
    kind = "net" if name in _NET else "disk"
    dev = labels.get("device", "")
    if (EXCLUDED_NET if kind == "net" else EXCLUDED_DISK).search(dev):
        f.excluded_devices[kind].add(dev)
        return
    r = grid_rate(samples, grid)
    if name == "node_disk_io_time_seconds_total":
        f.busy_disks.append(np.minimum(r, 1.0))
        report.map(name, "disk.busy (max over disks)")
        return
    metric = _NET[name] if kind == "net" else _DISK[name]
    f.sums[metric] = f.sums.get(metric, 0) + r
    report.map(name, f"{metric} (sum over {'NICs' if kind == 'net' else 'disks'})")


def _cpu_columns(f: _Families, report: ImportReport) -> dict[str, np.ndarray]:
    """cpu.util.core<rank> (busy modes over all modes, cpus in label order) and their mean."""
    if not f.cpu_total:
        return {}
    cols = {}
    ids = sorted(f.cpu_total, key=lambda c: (0, int(c)) if c.isascii() and c.isdigit() else (1, c))
    utils = []
    for r, cid in enumerate(ids):
        with np.errstate(invalid="ignore", divide="ignore"):
            u = np.clip(np.where(f.cpu_total[cid] > 0, f.cpu_busy[cid] / f.cpu_total[cid], np.nan), 0, 1)
        cols[f"cpu.util.core{r}"] = u
        utils.append(u)
    with np.errstate(all="ignore"):
        cols["cpu.util"] = np.nanmean(np.stack(utils), axis=0) if utils else np.full(f.n, np.nan)
    coverage = CpuCoverage()
    for cid in ids:
        coverage.add(cid, f.modes_s[cid], f.span_s[cid])
    coverage.note(report)
    return cols


def _device_columns(f: _Families) -> dict[str, np.ndarray]:
    cols = {k: f.sums[k] for k in ("disk.read_Bps", "disk.write_Bps", "disk.read_iops", "disk.write_iops",
                                   "net.rx_Bps", "net.tx_Bps", "net.rx_pps", "net.tx_pps") if k in f.sums}
    if f.busy_disks:
        cols["disk.busy"] = np.max(np.stack(f.busy_disks), axis=0)
    return cols


def _memory_columns(mem: dict[str, np.ndarray], report: ImportReport) -> dict[str, np.ndarray]:
    """mem.used_B (needs every field of _MEM) and mem.cache_B (Buffers + Cached)."""
    cols = {}
    if not mem:
        return cols
    if all(k in mem for k in _MEM):
        cols["mem.used_B"] = mem["MemTotal"] - mem["MemFree"] - mem["Buffers"] - mem["Cached"] - mem["SReclaimable"]
        report.map("node_memory_{MemTotal,MemFree,Buffers,Cached,SReclaimable}_bytes", "mem.used_B")
    else:
        report.missing.append(("mem.used_B", f"needs node_memory_*_bytes for {', '.join(_MEM)}; "
                                             f"have {', '.join(sorted(mem))}"))
    if "Buffers" in mem and "Cached" in mem:
        cols["mem.cache_B"] = mem["Buffers"] + mem["Cached"]
        report.map("node_memory_{Buffers,Cached}_bytes", "mem.cache_B")
    return cols


# -- live: a running Prometheus server ------------------------------------------------------
SERIES = ("node_cpu_seconds_total", *_DISK, "node_disk_io_time_seconds_total", *_NET,
          *(f"node_memory_{m}_bytes" for m in _MEM), "node_context_switches_total", *_PSI)
MAX_POINTS = 11_000   # Prometheus refuses a range query with more points per series
MIN_STEP_S = 0.001    # Prometheus' own resolution; a smaller step never advances a Unix time
MAX_PAGE_BYTES = 256 << 20   # one query_range answer: 10 000 points x ~100 series is ~40 MB
MAX_FETCH_SAMPLES = 1 << 25  # samples kept over every page of one import (~0.5 GiB as (t, v) pairs)


def pages(start: float, end: float, step: float, page_points: int = 10_000) -> list[tuple[float, float]]:
    """[start, end] in pages of at most page_points samples each; pages share no sample time."""
    if not all(math.isfinite(x) for x in (start, end, step)) or step < MIN_STEP_S or end < start:
        raise ValueError(f"need finite start <= end and step >= {MIN_STEP_S} s (start={start}, end={end}, "
                         f"step={step})")
    if not 1 <= page_points <= MAX_POINTS:
        raise ValueError(f"page_points must be in [1, {MAX_POINTS}], got {page_points}")
    if (end - start) / step >= MAX_IMPORT_WINDOWS:
        raise ValueError(f"[{start}, {end}] at step {step} s is more than {MAX_IMPORT_WINDOWS} samples per series; "
                         f"use a larger --step or a shorter range")
    out, t = [], start
    while t <= end:
        last = min(end, t + (page_points - 1) * step)
        out.append((t, last))
        t = last + step
    return out


def fetch(url: str, start: float, end: float, step: float, *, machine: str | None = None,
          page_points: int = 10_000, timeout_s: float = 60.0, window_s: float | None = None) -> tuple:
    """Import [start, end] at `step` seconds from the Prometheus server at `url`."""
    base = url.rstrip("/") + "/api/v1/query_range"
    sel = f'instance="{machine}"' if machine else ""
    query = "{" + ",".join(x for x in (f'__name__=~"{"|".join(SERIES)}"', sel) if x) + "}"
    try:
        page_ranges = pages(start, end, step, page_points)
    except ValueError as e:
        raise TraceImportError(url, str(e)) from None
    merged: dict[tuple, dict] = {}
    kept = 0
    for a, b in page_ranges:
        result = _fetch_page(base, query, a, b, step, timeout_s)
        for j, s in enumerate(result):
            if not (isinstance(s, dict) and isinstance(s.get("metric"), dict)
                    and isinstance(s.get("values"), (list, np.ndarray))
                    and all(isinstance(v, str) for v in s["metric"].values())):
                raise TraceImportError(base, f"the answer for [{a}, {b}], result {j}: not a series",
                                       expected='{"metric": {"label": "value"}, "values": [[ts, "v"], ...]}')
            key = tuple(sorted(s["metric"].items()))
            merged.setdefault(key, {"metric": s["metric"], "parts": []})["parts"].append(s["values"])
            kept += len(s["values"])
        # Every page is kept until the last one is in (a series spans them): bounded as it grows,
        # not after a server has answered page after page of series.
        if kept > MAX_FETCH_SAMPLES:
            raise TraceImportError(base, f"more than {MAX_FETCH_SAMPLES} samples by [{a}, {b}] "
                                         f"({len(merged)} series so far)",
                                   expected="fewer series (--machine) or a coarser --step / a shorter range")
    if not merged:
        raise TraceImportError(base, f"no node_exporter series between {start} and {end}"
                                     + (f" for instance {machine!r}" if machine else ""),
                               expected="a server scraping node_exporter (" + ", ".join(SERIES[:2]) + ", ...)")
    for m in merged.values():   # the pages of one series, joined (arrays when every page parsed as one)
        parts = [p for p in m.pop("parts") if len(p)]
        m["values"] = (np.concatenate(parts) if parts and all(isinstance(p, np.ndarray) for p in parts) else
                       [x for p in parts for x in (p.tolist() if isinstance(p, np.ndarray) else p)])
    doc = {"status": "success", "data": {"resultType": "matrix", "result": list(merged.values())}}
    trace, report = load_answers(doc, url, window_s=window_s or step, machine=machine)
    trace.provenance.update({"prometheus_url": url, "start": start, "end": end, "step": step,
                             "pages": len(pages(start, end, step, page_points))})
    return trace, report


def _fetch_page(base: str, query: str, a: float, b: float, step: float, timeout_s: float) -> list:
    """One query_range page [a, b]: its data.result list, every failure a TraceImportError naming the page."""
    import urllib.error
    import urllib.parse
    import urllib.request

    q = urllib.parse.urlencode({"query": query, "start": repr(a), "end": repr(b), "step": repr(step)})
    try:
        with urllib.request.urlopen(f"{base}?{q}", timeout=timeout_s) as r:
            raw = r.read(MAX_PAGE_BYTES + 1)      # bounded: the server's answer is not trusted
        if len(raw) > MAX_PAGE_BYTES:
            raise TraceImportError(base, f"the answer for [{a}, {b}] exceeds {MAX_PAGE_BYTES} bytes",
                                   expected="fewer series (--machine) or fewer points per page (--page-points)")
        ans = json.loads(raw, object_hook=_compact_series)
    except urllib.error.HTTPError as e:
        try:
            err = json.loads(e.read()).get("error", "")
        except Exception:
            err = ""
        raise TraceImportError(base, f"HTTP {e.code} for [{a}, {b}]: {err or e.reason}") from None
    except (urllib.error.URLError, OSError) as e:
        raise TraceImportError(base, f"no answer for [{a}, {b}]: {getattr(e, 'reason', e)}") from None
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as e:
        raise TraceImportError(base, f"the answer for [{a}, {b}] is not JSON: {type(e).__name__}") from None
    if not isinstance(ans, dict) or ans.get("status") != "success":
        status = ans.get("status") if isinstance(ans, dict) else type(ans).__name__
        error = ans.get("error", "") if isinstance(ans, dict) else ""
        raise TraceImportError(base, f"status {status!r} for [{a}, {b}]: {str(error)[:200]}")
    result = (ans.get("data") or {}).get("result") if isinstance(ans.get("data"), dict) else None
    if not isinstance(result, list):
        raise TraceImportError(base, f"the answer for [{a}, {b}] has no data.result list",
                               expected='{"status": "success", "data": {"resultType": "matrix", "result": [...]}}')
    return result


register("prometheus", load, "Prometheus query_range JSON with node_exporter metric names (or --url: live)")
