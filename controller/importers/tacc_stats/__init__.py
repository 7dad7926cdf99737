"""HPCPerfStats / tacc_stats raw text (`$tacc_stats 2.3.x` and `$hpcperfstats 2.4` headers),
plain or gzipped (as the archives keep them).

File layout: textfile.py (which reads it). One interval is derived by deriver.py, the kernel's
counters mapped by proc.py and the uncore's by uncore.py.

Rates come from the difference of consecutive records divided by their time difference
(`rate = delta / dt`); counters declared with W=<bits> wrap, so their delta is taken modulo
2^bits; a counter without W that goes down was reset (reboot, device re-plug) and that
interval reads NaN for it. Intervals are then put on the window grid by
`base.resample_intervals` (time-weighted; see there).

What becomes what (agentd's metric names):

- cpu (per core, /proc/stat ticks): busy = user + nice + system + irq + softirq, total =
  busy + idle + iowait (+ steal when present); `cpu.util.core<r>` = Δbusy/Δtotal, where r is
  the core's rank in ascending core id (ids 0..n-1 keep their number); `cpu.util` = mean over
  the cores measured in that interval. agentd's cpu sampler counts wall time less idle, iowait
  and steal instead (the busy fields, sampled at ticks, under-count paced work; see
  agentd/samplers/cpu.py). Not here: a record's timestamp is taken apart from its counters'
  reads, so at 1 s intervals the wall-based figure carries that jitter (the shared
  stats-num_vms_1_7.txt: the ticks of an interval are 0.85-1.03 of its wall time, the two
  figures differ by 0.007 median, 0.066 p99), and where the wall is long enough to tell, the
  servers' counters miss no time (HPCPerfStatsdDataSample, 300 s: ticks 0.9992-1.0000 of the
  wall, difference 0.0007 p99). The import report says what share of the wall time the modes
  cover, and warns where a core's fall short (base.CpuCoverage).
- block (/proc/diskstats): `disk.read_Bps` / `disk.write_Bps` = Σ Δrd_sectors / Δwr_sectors ×
  512 (the U= unit) / dt, `disk.read_iops` / `disk.write_iops` = Σ Δrd_ios / Δwr_ios / dt,
  `disk.busy` = max over devices Δio_ticks[ms] / 1000 / dt. Summed over whole physical disks
  only: partitions, NVMe multipath controller paths (`nvme3c3n1` duplicates `nvme3n1`) and
  virtual devices (loop, ram, zram, dm-*, md*, nbd) are excluded, as agentd does.
- net: `net.rx_Bps` / `net.tx_Bps` / `net.rx_pps` / `net.tx_pps` summed over NICs; loopback and
  virtual interfaces (vnet*, virbr*, veth*, docker*, br-*, tap*, tun*, ...) carry the same
  bytes a second time and are excluded.
- mem (per NUMA node, KB): `mem.used_B` = Σ (MemUsed − FilePages) × 1024, `mem.cache_B` =
  Σ FilePages × 1024. Per-node meminfo has no SReclaimable, so reclaimable slab counts as
  used here (agentd subtracts it); the difference is the node's reclaimable slab, a fraction
  of the `Slab` column (0.5 % of memory in the shared c220g2 trace).
- ps: `perf.ctx_switches_per_s` = Δctxt / dt (the kernel's context-switch count, the same
  events perf's context-switches software counter counts).
- intel_*_imc: each counter's event is decoded from its control register (event = bits 0-7,
  umask = bits 8-15); CAS_COUNT.RD (0x04/0x03) and CAS_COUNT.WR (0x04/0x0C) give
  `mem.bw_Bps` = Σ over channels (ΔRD + ΔWR) × 64 B / dt (one CAS moves one 64-byte line);
  `mem.bw_read_Bps` / `mem.bw_write_Bps` the RD / WR parts (agentd's mem_bw sampler names).
- intel_*_cbo / intel_*_cha: counters programmed with LLC_LOOKUP (event 0x34, any umask:
  data reads, writes) give `llc.ref_per_s` = Σ over boxes Δ / dt. LLC misses need a
  cache-state filter these files do not record, so `llc.miss_per_s` is not produced.
- everything else (numa, vm, proc, tmpfs, sysv_shm, vfs, hau, qpi, r2pci, ib*, other
  counters of the types above) has no counterpart in agentd's schema and is reported as
  dropped.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from mimesys.metrics import MetricSpec
from mimesys.trace import Trace

from .. import register
from ..base import MAX_IMPORT_CELLS, ImportReport, IntervalData, TraceImportError, build_trace, unit_for
from .deriver import Deriver
from .textfile import TaccStatsFile, parse_file

SOURCE = "tacc_stats"


def interval_data(f: TaccStatsFile, report: ImportReport) -> IntervalData:
    """Per-interval rates between consecutive records: bounds [n+1] (record timestamps), values [n, N]."""
    der = Deriver(f, report)
    names = der.names()
    col = {n: j for j, n in enumerate(names)}
    # records × (cores + devices): both the file's to choose, bounded before the table is made
    if (len(f.records) - 1) * len(names) > MAX_IMPORT_CELLS:
        raise TraceImportError(f.path, f"{len(f.records) - 1} intervals × {len(names)} metrics = "
                                       f"{(len(f.records) - 1) * len(names)} values, more than {MAX_IMPORT_CELLS}",
                               expected="a shorter file (split it by time)")
    vals = np.full((len(f.records) - 1, len(names)), np.nan)
    for i, (prev, cur) in enumerate(zip(f.records, f.records[1:])):
        for name, v in der.interval(prev, cur).items():
            vals[i, col[name]] = v
    if der.used["block"]:
        report.map(f"block {' '.join(sorted(der.used['block']))}: rd/wr_sectors x 512 B, rd/wr_ios, io_ticks",
                   "disk.read_Bps, disk.write_Bps, disk.read_iops, disk.write_iops (sums), disk.busy (max)")
    if der.excluded["block"]:
        report.drop(f"block {' '.join(sorted(der.excluded['block']))}",
                    "partition, NVMe multipath path or virtual device (its IO is already counted on a disk)")
    if der.used["net"]:
        report.map(f"net {' '.join(sorted(der.used['net']))}: rx/tx_bytes, rx/tx_packets",
                   "net.rx_Bps, net.tx_Bps, net.rx_pps, net.tx_pps (sums)")
    if der.excluded["net"]:
        report.drop(f"net {' '.join(sorted(der.excluded['net']))}",
                    "loopback or virtual interface (its bytes never leave the host or also cross a NIC)")
    if der.resets:
        report.note(f"{len(der.resets)} counter(s) went down without a declared width (reset); those "
                    f"intervals are NaN: {', '.join(der.resets[:5])}{' ...' if len(der.resets) > 5 else ''}")
    der.coverage.note(report)
    cores = der.cores
    if cores and cores != [str(i) for i in range(len(cores))]:
        report.note(f"source core ids {cores[0]}..{cores[-1]} (not 0..n-1) renumbered by ascending id: "
                    f"cpu.util.core<r> is the r-th smallest id")
    hosts = sorted({r.host for r in f.records if r.host})
    if len(hosts) > 1:
        report.note(f"records name {len(hosts)} different hostnames ({hosts[0]} ... {hosts[-1]}); the counters "
                    f"are treated as one host's, as the file's header ($hostname) says")
    specs = [MetricSpec(n, unit_for(n), source=f"{SOURCE}:{f.version}") for n in names]
    bounds = np.array([r.timestamp for r in f.records], dtype=np.float64)
    return IntervalData(bounds, vals, specs)


def load(path: Path | str, *, window_s: float = 1.0) -> tuple[Trace, ImportReport]:
    f = parse_file(path)
    report = ImportReport(source_format="tacc_stats", source_path=str(path))
    report.note(f"{f.version}, host {f.header.get('hostname', '?')}, {len(f.records)} records over "
                f"{f.records[-1].timestamp - f.records[0].timestamp:.1f} s")
    data = interval_data(f, report)
    return build_trace(data, window_s, report, path,
                       provenance={"source_version": f.version, "records": len(f.records),
                                   "window_start_clock": "CLOCK_REALTIME (the source's timestamps)"},
                       host_fingerprint=_fingerprint(f, sum(m.name.startswith("cpu.util.core") for m in data.metrics))), report


def _mem_total_B(f: TaccStatsFile) -> float | None:
    """MemTotal summed over NUMA nodes in the first record (what mapping scales memory by)."""
    s = f.schemas.get("mem")
    if s is None or s.index("MemTotal") is None or not f.records:
        return None
    i = s.index("MemTotal")
    kb = s.fields[i].unit_bytes if s.fields[i].unit else 1024
    nodes = f.records[0].data.get("mem", {})
    return float(sum(vals[i] for vals, _line in nodes.values()) * kb) if nodes else None


def _fingerprint(f: TaccStatsFile, cores: int) -> dict:
    uname = f.header.get("uname", "")
    return {"hostname": f.header.get("hostname", ""), "kernel": uname, "cpus": int(cores),
            "memory": {"total_B": _mem_total_B(f)},
            "source": "tacc_stats header and records (not measured here)"}


register("tacc_stats", load, "HPCPerfStats / tacc_stats raw text ($tacc_stats 2.3.x, $hpcperfstats 2.4)",
         aliases=("hpcperfstats",))
