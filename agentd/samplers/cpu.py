"""Per-core CPU utilization from /proc/stat.

Metrics: ``cpu.util.core<i>`` (fraction 0..1 of core i's time spent busy in the window) and
``cpu.util`` (mean over the cores read this window).

busy = wall time − idle − iowait − steal, over the window's measured length (the two readings'
monotonic stamps). iowait and steal are *not* busy: iowait is an idle core with IO outstanding
(the disk sampler and psi.io report that contention), and steal is time the hypervisor ran
someone else — neither is work this host's tasks did.

Why not user + nice + system + irq + softirq: the kernel (TICK_CPU_ACCOUNTING, the common
configuration) charges those by sampling what runs at each scheduler tick, and work that runs
between ticks goes uncounted — a paced sender, a server answering short requests, an IO loop
between waits. Idle and iowait it accounts exactly (NO_HZ: the idle loop stamps its own entry
and exit). Measured on a 2-vCPU VM: iperf3 pacing 2 Gbit/s over loopback for 10 s ran its
threads 1.1 s (schedstat); the busy fields counted 0.05 s, wall − idle − iowait − steal 1.2 s
(bench/results/cpu-accounting-2026-11-27). The runner's hold (stressors/runner.c, core_time) reads the
same quantity, so what it holds is what this sampler reports. Counters are USER_HZ ticks
(floored, at both ends of a window alike).
"""

from __future__ import annotations

import os

from mimesys.metrics import Availability

from .base import NoData, ProcFile, Raw, Sampler, availability_of, os_reason
from .registry import register

# /proc/stat cpu line fields (man 5 proc): user nice system idle iowait irq softirq steal guest guest_nice
_NOT_BUSY = (3, 4, 7)       # idle, iowait, steal
USER_HZ = os.sysconf("SC_CLK_TCK")


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
            if len(c) < 8 or len(p) < 8 or any(c[i] < p[i] for i in _NOT_BUSY) or elapsed_s <= 0:
                continue  # counters went backwards (hotplug) or a short line: no figure, not a wrong one
            not_busy_s = sum(c[i] - p[i] for i in _NOT_BUSY) / USER_HZ
            u = min(max(1.0 - not_busy_s / elapsed_s, 0.0), 1.0)
            out[f"cpu.util.core{key[3:]}"] = u
            utils.append(u)
        if utils:
            out["cpu.util"] = sum(utils) / len(utils)
        return out

    def close(self):
        if getattr(self, "_stat", None):
            self._stat.close()


register(CpuSampler)
