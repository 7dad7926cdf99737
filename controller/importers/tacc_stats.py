"""HPCPerfStats / tacc_stats raw text (`$tacc_stats 2.3.x` and `$hpcperfstats 2.4` headers),
plain or gzipped (as the archives keep them).

File layout (both versions)::

    $tacc_stats 2.3.5                  header: `$key value` lines
    !cpu user,E,U=cs nice,E,U=cs ...   schema: one `!type` line per type; each field is
                                       `name[,attr...]`: E = event (cumulative counter),
                                       C = control register, W=<bits> = counter width
                                       (wraps at 2^W), U=<unit> (e.g. 512B, KB, cs)
    <blank>
    1764551783.244789 0 node12...      record: `timestamp jobid [hostname]`
    %begin -                           mark lines (ignored)
    cpu 11 3368187 2 178556 ...        data: `type device value...` in schema order

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

import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from mimesys.metrics import MetricSpec
from mimesys.trace import Trace

from . import register
from .base import EXCLUDED_DISK as _EXCLUDED_DISK
from .base import EXCLUDED_NET as _EXCLUDED_NET
from .base import (MAX_IMPORT_CELLS, CpuCoverage, ImportReport, IntervalData, TraceImportError, build_trace,
                   read_maybe_gzip, unit_for)

SOURCE = "tacc_stats"
CACHE_LINE_B = 64
# (event, umask) as programmed by tacc_stats / hpcperfstats (Intel uncore manuals).
IMC_CAS_READ = (0x04, 0x03)
IMC_CAS_WRITE = (0x04, 0x0C)
LLC_LOOKUP_EVENT = 0x34

_KNOWN_HEADERS = ("tacc_stats", "hpcperfstats")


@dataclass(frozen=True)
class SchemaField:
    name: str
    event: bool = False
    control: bool = False
    width: int | None = None
    unit: str | None = None

    @property
    def unit_bytes(self) -> int:
        """Bytes per count for byte-like units (512B, KB, 4B, B); 1 otherwise."""
        m = re.fullmatch(r"(\d*)([KMG]?)B", self.unit or "", flags=re.IGNORECASE)
        if not m:
            return 1
        mult = int(m.group(1) or 1)
        return mult * {"": 1, "K": 1024, "M": 1024 ** 2, "G": 1024 ** 3}[m.group(2).upper()]


@dataclass
class TypeSchema:
    name: str
    fields: list[SchemaField]
    line: int

    def index(self, key: str) -> int | None:
        for i, f in enumerate(self.fields):
            if f.name == key:
                return i
        return None


@dataclass
class Record:
    timestamp: float
    line: int
    host: str
    # type -> device -> (values, line number)
    data: dict[str, dict[str, tuple[list[int], int]]] = field(default_factory=lambda: defaultdict(dict))


@dataclass
class TaccStatsFile:
    path: str
    version: str
    header: dict[str, str]
    schemas: dict[str, TypeSchema]
    records: list[Record]


def parse_schema_line(text: str, path, lineno: int) -> TypeSchema:
    parts = text[1:].split()
    if len(parts) < 2:
        raise TraceImportError(path, f"schema line {text!r} declares no fields", line=lineno,
                               expected="`!type field[,attr...] ...`")
    fields = []
    for spec in parts[1:]:
        name, *attrs = spec.split(",")
        event = control = False
        width = unit = None
        for a in attrs:
            if a == "E":
                event = True
            elif a == "C":
                control = True
            elif a.startswith("W="):
                try:
                    width = int(a[2:])
                except ValueError:
                    raise TraceImportError(path, f"counter width {a!r} of field {name!r} is not a number",
                                           line=lineno, expected="W=<bits>") from None
                if not 1 <= width <= 64:
                    raise TraceImportError(path, f"counter width {width} of field {name!r} outside 1..64", line=lineno)
            elif a.startswith("U="):
                unit = a[2:]
            else:
                raise TraceImportError(path, f"unknown attribute {a!r} of field {name!r}", line=lineno,
                                       expected="E, C, W=<bits> or U=<unit>")
        fields.append(SchemaField(name, event, control, width, unit))
    return TypeSchema(parts[0], fields, lineno)


def parse_file(path: Path | str) -> TaccStatsFile:
    """Read the whole file into header, schemas and records; raise TraceImportError naming the
    line of the first thing that is not what the format says."""
    path = Path(path)
    raw = read_maybe_gzip(path)   # archived stats files are usually gzipped; bounded
    try:
        text = raw.decode("utf-8", errors="strict")
    except UnicodeDecodeError as e:
        raise TraceImportError(path, f"not a text file: {e}") from None
    except (OSError, EOFError) as e:
        raise TraceImportError(path, f"cannot read: {getattr(e, 'strerror', None) or e}") from None
    header: dict[str, str] = {}
    schemas: dict[str, TypeSchema] = {}
    records: list[Record] = []
    version = ""
    cur: Record | None = None
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("%"):
            continue
        if lineno == 1 or not version:
            if not line.startswith("$") or line[1:].split()[0] not in _KNOWN_HEADERS:
                raise TraceImportError(path, f"first line is {line[:60]!r}", line=lineno,
                                       expected="a `$tacc_stats <version>` or `$hpcperfstats <version>` header")
        if line.startswith("$"):
            key, _, value = line[1:].partition(" ")
            header[key] = value.strip()
            if key in _KNOWN_HEADERS:
                version = f"{key} {value.strip()}"
            continue
        if line.startswith("!"):
            s = parse_schema_line(line, path, lineno)
            schemas[s.name] = s
            continue
        tokens = line.split()
        if re.fullmatch(r"\d+(\.\d*)?", tokens[0]):
            ts = float(tokens[0])
            if records and ts <= records[-1].timestamp:
                raise TraceImportError(path, f"record timestamp {tokens[0]} does not increase over "
                                       f"{records[-1].timestamp:.6f} (line {records[-1].line})", line=lineno,
                                       expected="records in time order")
            cur = Record(ts, lineno, tokens[2] if len(tokens) > 2 else "")
            records.append(cur)
            continue
        if cur is None:
            raise TraceImportError(path, f"data line {line[:60]!r} before any record", line=lineno,
                                   expected="a record line `timestamp jobid hostname` first")
        typ = tokens[0]
        schema = schemas.get(typ)
        if schema is None:
            raise TraceImportError(path, f"type {typ!r} has no schema line", line=lineno,
                                   expected=f"a `!{typ} ...` line in the header; declared: {', '.join(sorted(schemas))}")
        if len(tokens) < 2:
            raise TraceImportError(path, f"{typ} line has no device", line=lineno, expected="`type device value...`")
        dev, vals = tokens[1], tokens[2:]
        if len(vals) != len(schema.fields):
            raise TraceImportError(
                path, f"{typ} {dev}: {len(vals)} values", line=lineno,
                expected=f"{len(schema.fields)} values ({' '.join(f.name for f in schema.fields)}) as declared "
                         f"by the !{typ} schema line {schema.line}")
        try:
            ints = [int(v) for v in vals]
        except ValueError:
            bad = next(i for i, v in enumerate(vals) if not re.fullmatch(r"-?\d+", v))
            raise TraceImportError(path, f"{typ} {dev}: field {schema.fields[bad].name!r} is {vals[bad]!r}",
                                   line=lineno, expected="an integer") from None
        cur.data[typ][dev] = (ints, lineno)
    if not version:
        raise TraceImportError(path, "empty file", line=1, expected="a `$tacc_stats` or `$hpcperfstats` header")
    if len(records) < 2:
        raise TraceImportError(path, f"{len(records)} record(s); rates need at least two",
                               line=records[0].line if records else None)
    return TaccStatsFile(str(path), version, header, schemas, records)


def _delta(prev: int, cur: int, f: SchemaField) -> int | None:
    """Counter increase between two reads; None when a counter without a declared width went down
    (a reset, not a wrap)."""
    if f.width is not None:
        return (cur - prev) % (1 << f.width)
    return cur - prev if cur >= prev else None


def _decode_ctl(value: int) -> tuple[int, int]:
    return value & 0xFF, (value >> 8) & 0xFF


class _Deriver:
    """Computes one interval's metrics from two records; collects what it mapped and dropped."""

    def __init__(self, f: TaccStatsFile, report: ImportReport):
        self.f, self.report = f, report
        self.cores = sorted({d for r in f.records for d in r.data.get("cpu", {})}, key=_core_key)
        self.rank = {d: i for i, d in enumerate(self.cores)}
        self.resets: list[str] = []
        self.coverage = CpuCoverage()
        self.used = defaultdict(set)      # "block"/"net" -> devices summed
        self.excluded = defaultdict(set)  # "block"/"net" -> devices left out

    def names(self) -> list[str]:
        present = {t for r in self.f.records for t in r.data}
        names: list[str] = []
        if "cpu" in present:
            names += [f"cpu.util.core{i}" for i in range(len(self.cores))] + ["cpu.util"]
        if "block" in present:
            names += ["disk.read_Bps", "disk.write_Bps", "disk.read_iops", "disk.write_iops", "disk.busy"]
        if "net" in present:
            names += ["net.rx_Bps", "net.tx_Bps", "net.rx_pps", "net.tx_pps"]
        if "mem" in present:
            names += ["mem.used_B", "mem.cache_B"]
        if any(_is_imc(t) for t in present):
            names += ["mem.bw_Bps", "mem.bw_read_Bps", "mem.bw_write_Bps"]
        if any(_is_llc(t) for t in present):
            names.append("llc.ref_per_s")
        if "ps" in present:
            names.append("perf.ctx_switches_per_s")
        return names

    # -- helpers ---------------------------------------------------------------------------
    def _pairs(self, prev: Record, cur: Record, typ: str):
        """(device, schema, prev values, cur values, line) for devices in both records."""
        schema = self.f.schemas[typ]
        for dev, (vals, line) in cur.data.get(typ, {}).items():
            p = prev.data.get(typ, {}).get(dev)
            if p is not None:
                yield dev, schema, p[0], vals, line

    def _d(self, schema: TypeSchema, pv, cv, key: str, where: str) -> float:
        i = schema.index(key)
        if i is None:
            return float("nan")
        d = _delta(pv[i], cv[i], schema.fields[i])
        if d is None:
            self.resets.append(f"{where} {key}")
            return float("nan")
        return float(d) * schema.fields[i].unit_bytes

    # -- per type ---------------------------------------------------------------------------
    def interval(self, prev: Record, cur: Record) -> dict[str, float]:
        dt = cur.timestamp - prev.timestamp
        out: dict[str, float] = {}
        present = set(cur.data) | set(prev.data)
        for typ in sorted(present):
            if typ == "cpu":
                self._cpu(prev, cur, dt, out)
            elif typ == "block":
                self._block(prev, cur, dt, out)
            elif typ == "net":
                self._net(prev, cur, dt, out)
            elif typ == "mem":
                self._mem(cur, out)
            elif typ == "ps":
                self._ps(prev, cur, dt, out)
            elif _is_imc(typ):
                self._imc(typ, prev, cur, dt, out)
            elif _is_llc(typ):
                self._llc(typ, prev, cur, dt, out)
            else:
                self.report.drop(f"{typ} (all fields)", "no counterpart in agentd's metric schema")
        return out

    def _cpu(self, prev, cur, dt, out):
        utils = []
        for dev, s, pv, cv, line in self._pairs(prev, cur, "cpu"):
            where = f"line {line} cpu {dev}"
            busy = sum(self._d(s, pv, cv, k, where) for k in ("user", "nice", "system", "irq", "softirq")
                       if s.index(k) is not None)
            total = busy + sum(self._d(s, pv, cv, k, where) for k in ("idle", "iowait", "steal")
                               if s.index(k) is not None)
            if not np.isfinite(total) or total <= 0:
                continue  # no ticks in a very short interval: nothing measured, stays NaN
            if all((f.unit or "").lower() == "cs" for f in s.fields):
                self.coverage.add(dev, total / 100.0, dt)
            u = min(max(busy / total, 0.0), 1.0)
            out[f"cpu.util.core{self.rank[dev]}"] = u
            utils.append(u)
        if utils:
            out["cpu.util"] = float(np.mean(utils))
        self.report.map("cpu user+nice+system+irq+softirq / +idle+iowait", "cpu.util.core<rank>, cpu.util (mean)")

    def _block(self, prev, cur, dt, out):
        sums = defaultdict(float)
        busy = []
        for dev, s, pv, cv, line in self._pairs(prev, cur, "block"):
            if _EXCLUDED_DISK.search(dev):
                self.excluded["block"].add(dev)
                continue
            self.used["block"].add(dev)
            where = f"line {line} block {dev}"
            for src, dst in (("rd_sectors", "disk.read_Bps"), ("wr_sectors", "disk.write_Bps"),
                             ("rd_ios", "disk.read_iops"), ("wr_ios", "disk.write_iops")):
                sums[dst] += self._d(s, pv, cv, src, where) / dt
            if s.index("io_ticks") is not None:
                busy.append(min(self._d(s, pv, cv, "io_ticks", where) / 1000.0 / dt, 1.0))
        out.update(sums)
        if busy:
            out["disk.busy"] = float(np.max(busy)) if np.isfinite(busy).all() else float("nan")

    def _net(self, prev, cur, dt, out):
        sums = defaultdict(float)
        for dev, s, pv, cv, line in self._pairs(prev, cur, "net"):
            if _EXCLUDED_NET.search(dev):
                self.excluded["net"].add(dev)
                continue
            self.used["net"].add(dev)
            where = f"line {line} net {dev}"
            for src, dst in (("rx_bytes", "net.rx_Bps"), ("tx_bytes", "net.tx_Bps"),
                             ("rx_packets", "net.rx_pps"), ("tx_packets", "net.tx_pps")):
                sums[dst] += self._d(s, pv, cv, src, where) / dt
        out.update(sums)

    def _mem(self, cur, out):
        s = self.f.schemas["mem"]
        iu, ifp = s.index("MemUsed"), s.index("FilePages")
        if iu is None or ifp is None:
            self.report.drop("mem", "no MemUsed/FilePages fields")
            return
        kb = s.fields[iu].unit_bytes if s.fields[iu].unit else 1024
        used = cache = 0.0
        for dev, (vals, _line) in cur.data.get("mem", {}).items():
            used += (vals[iu] - vals[ifp]) * kb
            cache += vals[ifp] * kb
        out["mem.used_B"], out["mem.cache_B"] = used, cache
        self.report.map("mem MemUsed−FilePages, FilePages (KB, summed over NUMA nodes)", "mem.used_B, mem.cache_B")

    def _ps(self, prev, cur, dt, out):
        for dev, s, pv, cv, line in self._pairs(prev, cur, "ps"):
            out["perf.ctx_switches_per_s"] = self._d(s, pv, cv, "ctxt", f"line {line} ps") / dt
            self.report.map("ps ctxt", "perf.ctx_switches_per_s")
        self.report.drop("ps processes, load_*, nr_running, nr_threads", "no counterpart in agentd's metric schema")

    def _events(self, typ, prev, cur):
        """Per device: [(counter field index, (event, umask))] decoded from its control registers,
        CTRn paired with CTLn."""
        s = self.f.schemas[typ]
        ctl = [i for i, f in enumerate(s.fields) if f.control]
        ctr = [i for i, f in enumerate(s.fields) if f.event and re.fullmatch(r"CTR\d+", f.name)]
        for dev, _s, pv, cv, line in self._pairs(prev, cur, typ):
            pairs = []
            for ci in ctr:
                n = s.fields[ci].name[3:]
                li = s.index(f"CTL{n}")
                if li is None or li not in ctl:
                    continue
                if pv[li] != cv[li]:
                    continue  # reprogrammed during the interval: the difference means nothing
                pairs.append((ci, _decode_ctl(cv[li])))
            yield dev, s, pv, cv, line, pairs

    def _imc(self, typ, prev, cur, dt, out):
        rd = wr = 0.0
        seen = False
        for dev, s, pv, cv, line, pairs in self._events(typ, prev, cur):
            for ci, ev in pairs:
                if ev in (IMC_CAS_READ, IMC_CAS_WRITE):
                    b = self._d(s, pv, cv, s.fields[ci].name, f"line {line} {typ} {dev}") * CACHE_LINE_B
                    if ev == IMC_CAS_READ:
                        rd += b
                    else:
                        wr += b
                    seen = True
        if seen:
            for name, v in (("mem.bw_Bps", rd + wr), ("mem.bw_read_Bps", rd), ("mem.bw_write_Bps", wr)):
                out[name] = out.get(name, 0.0) + v / dt
            self.report.map(f"{typ} CAS_COUNT.RD + CAS_COUNT.WR (x 64 B, all channels)",
                            "mem.bw_Bps (and mem.bw_read_Bps, mem.bw_write_Bps)")
        self.report.drop(f"{typ} other counters (ACT_COUNT, PRE_COUNT, FIXED_CTR)", "no counterpart in agentd's metric schema")

    def _llc(self, typ, prev, cur, dt, out):
        total, seen = 0.0, False
        for dev, s, pv, cv, line, pairs in self._events(typ, prev, cur):
            for ci, (event, _umask) in pairs:
                if event == LLC_LOOKUP_EVENT:
                    total += self._d(s, pv, cv, s.fields[ci].name, f"line {line} {typ} {dev}")
                    seen = True
        if seen:
            out["llc.ref_per_s"] = out.get("llc.ref_per_s", 0.0) + total / dt
            self.report.map(f"{typ} LLC_LOOKUP (event 0x34: data reads + writes, all boxes)", "llc.ref_per_s")
        self.report.drop(f"{typ} other counters (ring, occupancy)", "no counterpart in agentd's metric schema")


def _core_key(dev: str):
    return (0, int(dev)) if dev.isdigit() else (1, dev)


def _is_imc(typ: str) -> bool:
    return bool(re.fullmatch(r"intel_\w+_imc", typ))


def _is_llc(typ: str) -> bool:
    return bool(re.fullmatch(r"intel_\w+_(cbo|cha)", typ))


def interval_data(f: TaccStatsFile, report: ImportReport) -> IntervalData:
    """Per-interval rates between consecutive records: bounds [n+1] (record timestamps), values [n, N]."""
    der = _Deriver(f, report)
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
