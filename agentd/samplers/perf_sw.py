"""Kernel software events, system-wide per CPU, through perf_event_open (pid = -1, cpu = i).

Metrics: ``perf.ctx_switches_per_s``, ``perf.migrations_per_s``, ``perf.page_faults_per_s``
— summed over all online CPUs. Software events are counted by the kernel itself, so they
work in VMs without a PMU and never multiplex. Counting everything that runs on a CPU needs
CAP_PERFMON/CAP_SYS_ADMIN or kernel.perf_event_paranoid <= 0; without that the metrics are
permission_denied with the kernel's errno string and the paranoid level.
Cost: 3 file descriptors per CPU, one read(2) per CPU per tick.
"""

from __future__ import annotations

from mimesys.metrics import Availability

from mimesys.hostpaths import online_cpus
from ..perf.events import SW_CONTEXT_SWITCHES, SW_CPU_MIGRATIONS, SW_PAGE_FAULTS, PerfEventError, PerfPermissionError
from .perfgroups import GroupSet, PerfGroupSampler
from .registry import register

EVENTS = ((SW_CONTEXT_SWITCHES, "perf.ctx_switches_per_s"), (SW_CPU_MIGRATIONS, "perf.migrations_per_s"),
          (SW_PAGE_FAULTS, "perf.page_faults_per_s"))


class PerfSoftwareSampler(PerfGroupSampler):
    name = "perf_sw"

    def probe(self):
        self._groups = GroupSet()
        try:
            self._groups.add(online_cpus(self.hp), [e for e, _ in EVENTS], [m for _, m in EVENTS])
        except PerfEventError as e:
            self._groups.close()
            av = Availability.PERMISSION_DENIED if isinstance(e, PerfPermissionError) else Availability.UNSUPPORTED
            return [self.unavailable(m, "1/s", str(e), av) for _, m in EVENTS]
        return [self.spec(m, "1/s") for _, m in EVENTS]


register(PerfSoftwareSampler)
