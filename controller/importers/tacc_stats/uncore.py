"""Intel uncore counters in a tacc_stats record (intel_*_imc, intel_*_cbo / intel_*_cha): each
counter's event is decoded from its control register, and the memory controllers' CAS counts
and the LLC boxes' lookups become agentd's mem.bw_* and llc.ref_per_s."""

from __future__ import annotations

import re

CACHE_LINE_B = 64
# (event, umask) as programmed by tacc_stats / hpcperfstats (Intel uncore manuals).
IMC_CAS_READ = (0x04, 0x03)
IMC_CAS_WRITE = (0x04, 0x0C)
LLC_LOOKUP_EVENT = 0x34


def _decode_ctl(value: int) -> tuple[int, int]:
    return value & 0xFF, (value >> 8) & 0xFF


def events(der, typ, prev, cur):
    """Per device: [(counter field index, (event, umask))] decoded from its control registers,
    CTRn paired with CTLn."""
    s = der.f.schemas[typ]
    ctl = [i for i, f in enumerate(s.fields) if f.control]
    ctr = [i for i, f in enumerate(s.fields) if f.event and re.fullmatch(r"CTR\d+", f.name)]
    for dev, _s, pv, cv, line in der.pairs(prev, cur, typ):
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


def imc(der, typ, prev, cur, dt, out):
    rd = wr = 0.0
    seen = False
    for dev, s, pv, cv, line, pairs in events(der, typ, prev, cur):
        for ci, ev in pairs:
            if ev in (IMC_CAS_READ, IMC_CAS_WRITE):
                b = der.delta(s, pv, cv, s.fields[ci].name, f"line {line} {typ} {dev}") * CACHE_LINE_B
                if ev == IMC_CAS_READ:
                    rd += b
                else:
                    wr += b
                seen = True
    if seen:
        for name, v in (("mem.bw_Bps", rd + wr), ("mem.bw_read_Bps", rd), ("mem.bw_write_Bps", wr)):
            out[name] = out.get(name, 0.0) + v / dt
        der.report.map(f"{typ} CAS_COUNT.RD + CAS_COUNT.WR (x 64 B, all channels)",
                        "mem.bw_Bps (and mem.bw_read_Bps, mem.bw_write_Bps)")
    der.report.drop(f"{typ} other counters (ACT_COUNT, PRE_COUNT, FIXED_CTR)", "no counterpart in agentd's metric schema")


def llc(der, typ, prev, cur, dt, out):
    total, seen = 0.0, False
    for dev, s, pv, cv, line, pairs in events(der, typ, prev, cur):
        for ci, (event, _umask) in pairs:
            if event == LLC_LOOKUP_EVENT:
                total += der.delta(s, pv, cv, s.fields[ci].name, f"line {line} {typ} {dev}")
                seen = True
    if seen:
        out["llc.ref_per_s"] = out.get("llc.ref_per_s", 0.0) + total / dt
        der.report.map(f"{typ} LLC_LOOKUP (event 0x34: data reads + writes, all boxes)", "llc.ref_per_s")
    der.report.drop(f"{typ} other counters (ring, occupancy)", "no counterpart in agentd's metric schema")


def is_imc(typ: str) -> bool:
    return bool(re.fullmatch(r"intel_\w+_imc", typ))


def is_llc(typ: str) -> bool:
    return bool(re.fullmatch(r"intel_\w+_(cbo|cha)", typ))
