"""CPU hardware events, system-wide per CPU: cycles, instructions, LLC references and misses.

Metrics: ``perf.cycles_per_s``, ``perf.instructions_per_s``, ``llc.ref_per_s``,
``llc.miss_per_s`` — summed over online CPUs. LLC uses the kernel's generic
cache-references / cache-misses events, which the Intel driver maps to the architectural
"LLC Reference" / "LLC Misses" events (other vendors map them to their own last-level
event; the fingerprint records the CPU model).

Each event is probed alone first, so one the CPU lacks is unsupported with the kernel's
reason while the others still count. The available ones form one group per CPU (counted
together, consistent ratios); if the PMU cannot hold them as one group, each event gets its
own group and the kernel time-shares the counters — the derived rates are then scaled by
time_enabled / time_running (see agentd/perf/readformat.scaled_delta).
On a VM without a virtual PMU every open fails with ENOENT: all four are unsupported.
"""

from __future__ import annotations

from mimesys.metrics import Availability

from mimesys.hostpaths import online_cpus
from ..perf.events import (HW_CACHE_MISSES, HW_CACHE_REFERENCES, HW_CPU_CYCLES, HW_INSTRUCTIONS, PerfEventError,
                           PerfPermissionError, probe_event)
from .perfgroups import GroupSet, PerfGroupSampler
from .registry import register

EVENTS = ((HW_CPU_CYCLES, "perf.cycles_per_s"), (HW_INSTRUCTIONS, "perf.instructions_per_s"),
          (HW_CACHE_REFERENCES, "llc.ref_per_s"), (HW_CACHE_MISSES, "llc.miss_per_s"))


def _availability(e: PerfEventError) -> Availability:
    return Availability.PERMISSION_DENIED if isinstance(e, PerfPermissionError) else Availability.UNSUPPORTED


class PerfHardwareSampler(PerfGroupSampler):
    name = "perf_hw"

    def probe(self):
        cpus = online_cpus(self.hp)
        self._groups = GroupSet()
        specs, usable = [], []
        for ev, metric in EVENTS:
            try:
                probe_event(ev, cpu=cpus[0])
            except PerfEventError as e:
                specs.append(self.unavailable(metric, "1/s", str(e), _availability(e)))
                continue
            usable.append((ev, metric))
            specs.append(self.spec(metric, "1/s"))
        if not usable:
            return specs
        try:
            self._groups.add(cpus, [e for e, _ in usable], [m for _, m in usable])
        except PerfEventError:
            self._groups.close()
            try:  # the PMU cannot co-schedule them: one group per event, multiplexed
                for ev, metric in usable:
                    self._groups.add(cpus, [ev], [metric])
            except PerfEventError as e:
                self._groups.close()
                return [s if not s.available else self.unavailable(s.name, s.unit, str(e), _availability(e))
                        for s in specs]
        return specs


register(PerfHardwareSampler)
