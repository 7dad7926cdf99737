"""How late the agent's event loop wakes up: the measure of a responsive agent.

Every handler, the run's window stream and /healthz share one asyncio loop; anything that
holds it (a decode, a compile, a GC pause, the hypervisor taking the CPU) delays all of them.
A watcher task asks to wake every `period_s` and records how late it woke, so operators see
stalls on /metrics (mimesys_event_loop_lag_seconds, a histogram, and its maximum) instead of
inferring them from timeouts, and the soak bench reads the agent's own figure.
"""

from __future__ import annotations

import asyncio
import time

from ..prometheus.telemetry import Histogram

# lag buckets (s): a healthy loop is in the first two; 0.1 s is the /healthz budget
BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


class LoopLag:
    def __init__(self, period_s: float = 0.05):
        self.period_s = period_s
        self.hist = Histogram(BUCKETS)
        self.max_s = 0.0
        self.max_at = 0.0                         # unix time of the worst lag
        self._task: asyncio.Task | None = None

    def add(self, lag_s: float) -> None:
        lag_s = max(0.0, lag_s)
        self.hist.observe(lag_s)
        if lag_s > self.max_s:
            self.max_s, self.max_at = lag_s, time.time()

    def cumulative(self) -> list[tuple[str, int]]:
        """[(upper bound, cumulative count)] with "+Inf" last, as Prometheus histograms want."""
        return self.hist.cumulative()

    @property
    def sum_s(self) -> float:
        return self.hist.sum_s

    @property
    def samples(self) -> int:
        return self.hist.count

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._watch(), name="loop-lag")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    async def _watch(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            due = loop.time() + self.period_s
            await asyncio.sleep(self.period_s)
            self.add(loop.time() - due)
