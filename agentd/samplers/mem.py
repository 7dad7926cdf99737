"""Memory use from /proc/meminfo and /proc/zoneinfo.

``mem.used_B``: MemTotal − MemFree − Buffers − Cached − SReclaimable, the "used" column of
free(1) (procps ≥ 3.3.10), less the free pages the kernel keeps on its per-CPU lists: memory
held by processes and the kernel that is not cache.
``mem.cache_B``: Buffers + Cached, the page cache (file pages, including tmpfs/shmem, and
block-device buffers). Both are gauges: the value at the end of the window.

Why the per-CPU lists: MemFree counts only the buddy allocator's pages, and since Linux 6.7 a
CPU that frees many pages at once keeps them on its list (its `high` grows up to `high_max`,
504 MiB a CPU on the 24-GiB VM) and gives them back a little each second. Measured here: a
process that freed 400 MiB left 443 MiB on the lists, and MemFree rose by 40 MiB in 6 s, so
free(1)'s "used" showed an application's freed heap as held for tens of seconds. Those pages
are any allocation's at once (the lists are drained under pressure), so they are free to a
neighbour too. The counts are /proc/zoneinfo's `count:` lines under `pagesets`; without that
file (or when it is longer than its bound) the figure is free(1)'s.
"""

from __future__ import annotations

import os
import re

from .base import ProcFile, Raw, Sampler, availability_of, os_reason
from .registry import register

_FIELDS = ("MemTotal", "MemFree", "Buffers", "Cached", "SReclaimable")
_PCP_COUNT = re.compile(rb"^\s+count:\s+(\d+)$", re.M)
# /proc/zoneinfo is ~8 lines per CPU per zone: 1 MiB is thousands of CPUs
ZONEINFO_MAX_B = 1 << 20


def pcp_free_bytes(zoneinfo: bytes, page_size: int) -> int:
    """Bytes of free pages on the per-CPU lists, from /proc/zoneinfo."""
    return page_size * sum(int(n) for n in _PCP_COUNT.findall(zoneinfo))


def parse_meminfo(text: str, wanted=_FIELDS) -> dict[str, int]:
    """Field -> bytes (meminfo says kB and means KiB)."""
    out = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        if key in wanted:
            parts = rest.split()
            out[key] = int(parts[0]) * (1024 if len(parts) > 1 and parts[1] == "kB" else 1)
    return out


class MemSampler(Sampler):
    name = "mem"

    def probe(self):
        path = self.hp.p("meminfo")
        try:
            self._file = ProcFile(path, 8192)
            have = parse_meminfo(self._file.read_text())
        except OSError as e:
            reason = os_reason(e, str(path))
            return [self.unavailable(n, "B", reason, availability_of(e)) for n in ("mem.used_B", "mem.cache_B")]
        specs = []
        missing = [f for f in _FIELDS if f not in have]
        if missing:
            specs.append(self.unavailable("mem.used_B", "B", f"{path}: no {', '.join(missing)}"))
        else:
            specs.append(self.spec("mem.used_B", "B"))
        cache_missing = [f for f in ("Buffers", "Cached") if f not in have]
        if cache_missing:
            specs.append(self.unavailable("mem.cache_B", "B", f"{path}: no {', '.join(cache_missing)}"))
        else:
            specs.append(self.spec("mem.cache_B", "B"))
        self._zoneinfo = None
        try:
            zi = ProcFile(self.hp.p("zoneinfo"), 16384, max_bytes=ZONEINFO_MAX_B)
            if b"pagesets" in zi.read_bytes():
                self._zoneinfo = zi
            else:
                zi.close()
        except OSError:
            pass   # free(1)'s figure: the per-CPU lists uncounted
        return specs

    def read(self) -> Raw:
        raw = parse_meminfo(self._file.read_text())
        if self._zoneinfo is not None:
            try:
                raw["PcpFree"] = pcp_free_bytes(self._zoneinfo.read_bytes(), os.sysconf("SC_PAGE_SIZE"))
            except OSError:
                pass
        return raw

    @staticmethod
    def derive(prev: Raw, cur: Raw, elapsed_s: float) -> dict[str, float]:
        out = {}
        try:
            out["mem.used_B"] = float(cur["MemTotal"] - cur["MemFree"] - cur.get("PcpFree", 0) - cur["Buffers"]
                                      - cur["Cached"] - cur["SReclaimable"])
        except KeyError:
            pass
        if "Buffers" in cur and "Cached" in cur:
            out["mem.cache_B"] = float(cur["Buffers"] + cur["Cached"])
        return out

    def close(self):
        for f in (getattr(self, "_file", None), getattr(self, "_zoneinfo", None)):
            if f:
                f.close()


register(MemSampler)
