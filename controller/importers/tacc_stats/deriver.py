"""One interval's metrics from two consecutive tacc_stats records: counters' deltas (wrapping
at a declared width, a reset read as NaN), which devices were summed or left out, and which
type's mapping (proc.py, uncore.py) each record type goes to."""

from __future__ import annotations

from collections import defaultdict

from ..base import CpuCoverage, ImportReport
from . import proc, uncore
from .textfile import Record, SchemaField, TaccStatsFile, TypeSchema


def _delta(prev: int, cur: int, f: SchemaField) -> int | None:
    """Counter increase between two reads; None when a counter without a declared width went down
    (a reset, not a wrap)."""
    if f.width is not None:
        return (cur - prev) % (1 << f.width)
    return cur - prev if cur >= prev else None


class Deriver:
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
        if any(uncore.is_imc(t) for t in present):
            names += ["mem.bw_Bps", "mem.bw_read_Bps", "mem.bw_write_Bps"]
        if any(uncore.is_llc(t) for t in present):
            names.append("llc.ref_per_s")
        if "ps" in present:
            names.append("perf.ctx_switches_per_s")
        return names

    def pairs(self, prev: Record, cur: Record, typ: str):
        """(device, schema, prev values, cur values, line) for devices in both records."""
        schema = self.f.schemas[typ]
        for dev, (vals, line) in cur.data.get(typ, {}).items():
            p = prev.data.get(typ, {}).get(dev)
            if p is not None:
                yield dev, schema, p[0], vals, line

    def delta(self, schema: TypeSchema, pv, cv, key: str, where: str) -> float:
        i = schema.index(key)
        if i is None:
            return float("nan")
        d = _delta(pv[i], cv[i], schema.fields[i])
        if d is None:
            self.resets.append(f"{where} {key}")
            return float("nan")
        return float(d) * schema.fields[i].unit_bytes

    def interval(self, prev: Record, cur: Record) -> dict[str, float]:
        dt = cur.timestamp - prev.timestamp
        out: dict[str, float] = {}
        present = set(cur.data) | set(prev.data)
        for typ in sorted(present):
            if typ == "cpu":
                proc.cpu(self, prev, cur, dt, out)
            elif typ == "block":
                proc.block(self, prev, cur, dt, out)
            elif typ == "net":
                proc.net(self, prev, cur, dt, out)
            elif typ == "mem":
                proc.mem(self, cur, out)
            elif typ == "ps":
                proc.ps(self, prev, cur, dt, out)
            elif uncore.is_imc(typ):
                uncore.imc(self, typ, prev, cur, dt, out)
            elif uncore.is_llc(typ):
                uncore.llc(self, typ, prev, cur, dt, out)
            else:
                self.report.drop(f"{typ} (all fields)", "no counterpart in agentd's metric schema")
        return out


def _core_key(dev: str):
    return (0, int(dev)) if dev.isdigit() else (1, dev)
