"""What else ran on the host while a bench measured: the hypervisor's steal and the CPU time of
every process outside the bench's own trees, per interval (bench/results/colocation-floor/README.md:
on the shared 2-vCPU VM other sessions' processes, not steal, are what move a measurement, and
in either direction, so a disturbed measurement is taken again rather than corrected).

Used by the colocation benches (around the neighbour) and the fidelity bench (around a target's
recording: a target recorded beside someone else's load is a different target)."""

from __future__ import annotations

import os
import threading
import time

CLK = os.sysconf("SC_CLK_TCK")
NCPU = os.cpu_count() or 1


def cpu_times(reaped: bool = False) -> dict[int, tuple[int, float]]:
    """pid -> (parent pid, CPU seconds of the process itself; with `reaped` also those of the
    children it reaped, which counts a child's time a second time once its parent reaps it)."""
    out = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as fh:
                    s = fh.read()
            except OSError:
                continue
            f = s[s.rindex(")") + 2:].split()
            out[int(d)] = (int(f[1]), sum(int(x) for x in f[11:15 if reaped else 13]) / CLK)
    return out


def descendants(procs: dict[int, tuple[int, float]], roots: list[int]) -> set[int]:
    kids: dict[int, list[int]] = {}
    for pid, (ppid, _) in procs.items():
        kids.setdefault(ppid, []).append(pid)
    seen, todo = set(), [r for r in roots if r in procs]
    while todo:
        p = todo.pop()
        if p not in seen:
            seen.add(p)
            todo.extend(kids.get(p, []))
    return seen


def _steal() -> float:
    with open("/proc/stat") as fh:
        return int(fh.readline().split()[8]) / CLK


class HostNoise(threading.Thread):
    """While the neighbour runs: per interval, the hypervisor's steal and the CPU time of every
    process that is neither the neighbour's (`own` roots and their descendants), nor the
    workload's, nor this bench's, nor a kernel thread, as % of the host's CPUs. It looks every
    `period` seconds. A process once seen in those trees stays theirs (a mix's command killed at
    the end of its phase is reparented to init while it dies); one that appeared since the last
    look counts in full; one that came and went between two looks is missed."""

    def __init__(self, own: list[int], interval: int, period: float = 1.0):
        super().__init__(daemon=True)
        self.own, self.interval, self.period = own, interval, period
        self.steal_pct: list[float] = []
        self.foreign_pct: list[float] = []
        self.known: set[int] = {2}
        self.done = threading.Event()

    def _look(self) -> tuple[float, dict[int, float]]:
        procs = cpu_times()
        self.known |= descendants(procs, [os.getpid(), *self.own])
        return _steal(), {p: c for p, (pp, c) in procs.items() if p not in self.known and pp != 2}

    def run(self) -> None:
        t, (steal, cpu) = time.monotonic(), self._look()
        t_int, s_sum, f_sum = t, 0.0, 0.0
        while not self.done.wait(max(0.0, t + self.period - time.monotonic())):
            t2, (steal2, cpu2) = time.monotonic(), self._look()
            s_sum += steal2 - steal
            f_sum += sum(c - cpu.get(p, 0.0) for p, c in cpu2.items() if c >= cpu.get(p, 0.0))
            t, steal, cpu = t2, steal2, cpu2
            if t - t_int >= self.interval - self.period / 2:
                span = (t - t_int) * NCPU
                self.steal_pct.append(s_sum / span * 100)
                self.foreign_pct.append(f_sum / span * 100)
                t_int, s_sum, f_sum = t, 0.0, 0.0


def host_noise_pct(run: dict) -> float:
    """The most, over the run's intervals, of steal + foreign CPU (% of the host's CPUs); 0 for a
    run recorded before the benches watched the host."""
    s, f = run.get("steal_pct") or [0.0], run.get("foreign_pct") or [0.0]
    return max((a + b for a, b in zip(s, f)), default=0.0)
