"""Per-core CPU utilization from /proc/stat.

Metrics: ``cpu.util.core<i>`` (fraction 0..1 of core i's time spent busy in the window) and
``cpu.util`` (mean over the cores read this window).

busy = user + nice + system + irq + softirq. iowait and steal are *not* busy: iowait is an
idle core with IO outstanding (the disk sampler and psi.io report that contention), and
steal is time the hypervisor ran someone else — neither is work this host's tasks did.
guest/guest_nice are already counted inside user/nice, so they are not added again.
The denominator is the core's total ticks in the window (user..steal), not wall time, so a
window whose sampling was late by a few ms is still exact. Counters are USER_HZ ticks.
"""

from __future__ import annotations

from mimesys.metrics import Availability

from .base import NoData, ProcFile, Raw, Sampler, availability_of, os_reason
from .registry import register

# /proc/stat cpu line fields (man 5 proc): user nice system idle iowait irq softirq steal guest guest_nice
_BUSY = (0, 1, 2, 5, 6)
_TOTAL = (0, 1, 2, 3, 4, 5, 6, 7)


def parse_proc_stat(text: str) -> dict[str, tuple[int, ...]]:
    """'cpuN' -> the line's counters, for every per-core line (the aggregate 'cpu' is skipped)."""
    out = {}
    for line in text.splitlines():
        if not line.startswith("cpu"):
            if out:
                break  # the cpu lines come first; stop at 'intr'
            continue
        head, _, rest = line.partition(" ")
        if head == "cpu":
            continue
        out[head] = tuple(int(x) for x in rest.split())
    return out


class CpuSampler(Sampler):
    name = "cpu"

    def probe(self):
        try:
            self._stat = ProcFile(self.hp.p("stat"), 8192)
            cores = parse_proc_stat(self._stat.read_text())
        except OSError as e:
            return [self.unavailable("cpu.util", "fraction", os_reason(e, str(self.hp.p("stat"))), availability_of(e))]
        if not cores:
            return [self.unavailable("cpu.util", "fraction", f"{self.hp.p('stat')}: no per-cpu lines",
                                     Availability.UNSUPPORTED)]
        ids = sorted(int(k[3:]) for k in cores)
        return [self.spec(f"cpu.util.core{i}", "fraction") for i in ids] + [self.spec("cpu.util", "fraction")]

    def read(self) -> Raw:
        cores = parse_proc_stat(self._stat.read_text())
        if not cores:
            raise NoData("no per-cpu lines in /proc/stat")
        return cores

    @staticmethod
    def derive(prev: Raw, cur: Raw, elapsed_s: float) -> dict[str, float]:
        out: dict[str, float] = {}
        utils = []
        for key, c in cur.items():
            p = prev.get(key)
            if p is None:
                continue  # core came online this window: no baseline
            total = sum(c[i] - p[i] for i in _TOTAL if i < len(c))
            if total <= 0:
                continue  # no ticks elapsed (or counters went backwards after hotplug)
            busy = sum(c[i] - p[i] for i in _BUSY if i < len(c))
            u = min(max(busy / total, 0.0), 1.0)
            out[f"cpu.util.core{key[3:]}"] = u
            utils.append(u)
        if utils:
            out["cpu.util"] = sum(utils) / len(utils)
        return out

    def close(self):
        if getattr(self, "_stat", None):
            self._stat.close()


register(CpuSampler)
