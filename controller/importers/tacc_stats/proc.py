"""The kernel's own counters in a tacc_stats record (cpu, block, net, mem, ps) as agentd's
metrics; each takes the interval's Deriver (deriver.py) and fills `out` (the package
docstring says what becomes what)."""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from ..base import EXCLUDED_DISK as _EXCLUDED_DISK
from ..base import EXCLUDED_NET as _EXCLUDED_NET


def cpu(der, prev, cur, dt, out):
    utils = []
    for dev, s, pv, cv, line in der.pairs(prev, cur, "cpu"):
        where = f"line {line} cpu {dev}"
        busy = sum(der.delta(s, pv, cv, k, where) for k in ("user", "nice", "system", "irq", "softirq")
                   if s.index(k) is not None)
        total = busy + sum(der.delta(s, pv, cv, k, where) for k in ("idle", "iowait", "steal")
                           if s.index(k) is not None)
        if not np.isfinite(total) or total <= 0:
            continue  # no ticks in a very short interval: nothing measured, stays NaN
        if all((f.unit or "").lower() == "cs" for f in s.fields):
            der.coverage.add(dev, total / 100.0, dt)
        u = min(max(busy / total, 0.0), 1.0)
        out[f"cpu.util.core{der.rank[dev]}"] = u
        utils.append(u)
    if utils:
        out["cpu.util"] = float(np.mean(utils))
    der.report.map("cpu user+nice+system+irq+softirq / +idle+iowait", "cpu.util.core<rank>, cpu.util (mean)")


def block(der, prev, cur, dt, out):
    sums = defaultdict(float)
    busy = []
    for dev, s, pv, cv, line in der.pairs(prev, cur, "block"):
        if _EXCLUDED_DISK.search(dev):
            der.excluded["block"].add(dev)
            continue
        der.used["block"].add(dev)
        where = f"line {line} block {dev}"
        for src, dst in (("rd_sectors", "disk.read_Bps"), ("wr_sectors", "disk.write_Bps"),
                         ("rd_ios", "disk.read_iops"), ("wr_ios", "disk.write_iops")):
            sums[dst] += der.delta(s, pv, cv, src, where) / dt
        if s.index("io_ticks") is not None:
            busy.append(min(der.delta(s, pv, cv, "io_ticks", where) / 1000.0 / dt, 1.0))
    out.update(sums)
    if busy:
        out["disk.busy"] = float(np.max(busy)) if np.isfinite(busy).all() else float("nan")


def net(der, prev, cur, dt, out):
    sums = defaultdict(float)
    for dev, s, pv, cv, line in der.pairs(prev, cur, "net"):
        if _EXCLUDED_NET.search(dev):
            der.excluded["net"].add(dev)
            continue
        der.used["net"].add(dev)
        where = f"line {line} net {dev}"
        for src, dst in (("rx_bytes", "net.rx_Bps"), ("tx_bytes", "net.tx_Bps"),
                         ("rx_packets", "net.rx_pps"), ("tx_packets", "net.tx_pps")):
            sums[dst] += der.delta(s, pv, cv, src, where) / dt
    out.update(sums)


def mem(der, cur, out):
    s = der.f.schemas["mem"]
    iu, ifp = s.index("MemUsed"), s.index("FilePages")
    if iu is None or ifp is None:
        der.report.drop("mem", "no MemUsed/FilePages fields")
        return
    kb = s.fields[iu].unit_bytes if s.fields[iu].unit else 1024
    used = cache = 0.0
    for dev, (vals, _line) in cur.data.get("mem", {}).items():
        used += (vals[iu] - vals[ifp]) * kb
        cache += vals[ifp] * kb
    out["mem.used_B"], out["mem.cache_B"] = used, cache
    der.report.map("mem MemUsed−FilePages, FilePages (KB, summed over NUMA nodes)", "mem.used_B, mem.cache_B")


def ps(der, prev, cur, dt, out):
    for dev, s, pv, cv, line in der.pairs(prev, cur, "ps"):
        out["perf.ctx_switches_per_s"] = der.delta(s, pv, cv, "ctxt", f"line {line} ps") / dt
        der.report.map("ps ctxt", "perf.ctx_switches_per_s")
    der.report.drop("ps processes, load_*, nr_running, nr_threads", "no counterpart in agentd's metric schema")
