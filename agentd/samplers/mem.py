"""Memory use from /proc/meminfo.

``mem.used_B``: MemTotal − MemFree − Buffers − Cached − SReclaimable, the "used" column of
free(1) (procps ≥ 3.3.10): memory held by processes and the kernel that is not cache.
``mem.cache_B``: Buffers + Cached, the page cache (file pages, including tmpfs/shmem, and
block-device buffers). Both are gauges: the value at the end of the window.
"""

from __future__ import annotations

from .base import ProcFile, Raw, Sampler, availability_of, os_reason
from .registry import register

_FIELDS = ("MemTotal", "MemFree", "Buffers", "Cached", "SReclaimable")


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
        return specs

    def read(self) -> Raw:
        return parse_meminfo(self._file.read_text())

    @staticmethod
    def derive(prev: Raw, cur: Raw, elapsed_s: float) -> dict[str, float]:
        out = {}
        try:
            out["mem.used_B"] = float(cur["MemTotal"] - cur["MemFree"] - cur["Buffers"] - cur["Cached"]
                                      - cur["SReclaimable"])
        except KeyError:
            pass
        if "Buffers" in cur and "Cached" in cur:
            out["mem.cache_B"] = float(cur["Buffers"] + cur["Cached"])
        return out

    def close(self):
        if getattr(self, "_file", None):
            self._file.close()


register(MemSampler)
