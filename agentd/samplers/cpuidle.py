"""How often each core goes idle, from cpuidle: the sleep/wake pattern a busy fraction hides.

Metrics: ``cpu.idle_entries_per_s.core<i>`` (1/s): the times core i entered an idle state in
the window, per second. Each entry is counted in exactly one state, so the sum over
/sys/devices/system/cpu/cpu<i>/cpuidle/state<j>/usage is the core's idle entries.

Why: two workloads can keep a core busy the same fraction of a second in very different ways.
A key-value server's request loop at 55 % ran each core idle 12,000-17,000 times a second on
the 2-vCPU development VM; a stressor that runs 550 ms and sleeps 450 ms, once; an idle core,
~30 times. A neighbour feels the difference: with the guest's haltpoll idle driver a vCPU that
wakes often keeps polling instead of halting, so a ping-pong neighbour's wake-ups get faster
next to the first and not next to the second (bench/results/colocation-floor/README.md).

Off by default (``[samplers.cpuidle] enabled = true`` turns it on): no planner reproduces the
pattern yet, and a column every method misses would weigh in every score. A kernel without
cpuidle (CONFIG_CPU_IDLE off, idle=poll, some containers) has no such directory: the metric is
reported unsupported with that reason.
"""

from __future__ import annotations

import re

from mimesys.hostpaths import online_cpus

from .base import ProcFile, Raw, Sampler, availability_of, os_reason
from .registry import register

_STATE = re.compile(r"state\d+$")


class CpuIdleSampler(Sampler):
    name = "cpuidle"
    default_enabled = False

    def probe(self):
        self._files: dict[int, list[ProcFile]] = {}
        specs = []
        for cpu in online_cpus(self.hp):
            name = f"cpu.idle_entries_per_s.core{cpu}"
            d = self.hp.s(f"devices/system/cpu/cpu{cpu}/cpuidle")
            try:
                states = sorted(p for p in d.iterdir() if _STATE.match(p.name))
                if not states:
                    specs.append(self.unavailable(name, "1/s", f"{d}: no idle states"))
                    continue
                self._files[cpu] = [ProcFile(s / "usage", 64) for s in states]
            except OSError as e:
                specs.append(self.unavailable(name, "1/s", os_reason(e, str(d)), availability_of(e)))
                continue
            specs.append(self.spec(name, "1/s"))
        return specs

    def read(self) -> Raw:
        return {str(cpu): sum(int(f.read_text()) for f in files) for cpu, files in self._files.items()}

    @staticmethod
    def derive(prev: Raw, cur: Raw, elapsed_s: float) -> dict[str, float]:
        out = {}
        for cpu, c in cur.items():
            p = prev.get(cpu)
            if p is None or c < p or elapsed_s <= 0:
                continue     # a core that came online, or a counter reset: no figure, not a wrong one
            out[f"cpu.idle_entries_per_s.core{cpu}"] = (c - p) / elapsed_s
        return out

    def close(self):
        for files in getattr(self, "_files", {}).values():
            for f in files:
                f.close()


register(CpuIdleSampler)
