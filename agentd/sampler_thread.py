"""The host's SamplerSet on its own thread.

The SamplerSet is probed, read and closed on one dedicated thread, never on the event loop's:
pyroute2's synchronous netlink API (the net sampler) runs an asyncio loop of its own and fails
inside a running one, and reads (~0.6 ms here) then never stall the loop that serves hundreds
of WebSocket clients. Monitoring (/v1/monitor, `record`) reads it on its own absolute 1 Hz
grid; runs read it at window boundaries (window_alignment.py); both use its one pure derive.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import time
from typing import AsyncIterator

from mimesys.backend import MonitorSample


class SamplerThread:
    def __init__(self, samplers, thread: concurrent.futures.ThreadPoolExecutor | None = None):
        self.samplers = samplers
        self.thread = thread or concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="samplers")

    @classmethod
    def probe(cls, samplers_config, hostpaths) -> SamplerThread:
        """The configured samplers, probed on their new thread."""
        from .samplers import SamplerSet
        thread = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="samplers")
        try:
            return cls(thread.submit(SamplerSet.from_config, samplers_config, hostpaths).result(), thread)
        except BaseException:
            thread.shutdown()
            raise

    def serving_on(self, ports) -> None:
        self.thread.submit(self.samplers.serving_on, ports).result()

    async def read(self):
        """One RawSample, read on the sampler thread."""
        return await asyncio.get_running_loop().run_in_executor(self.thread, self.samplers.read)

    async def monitor(self, interval_s: float = 1.0) -> AsyncIterator[MonitorSample]:
        """One sample per interval on an absolute grid (lateness never accumulates)."""
        period = int(interval_s * 1e9)
        prev = await self.read()
        due = prev.monotonic_ns + period
        while True:
            await asyncio.sleep(max(0, due - time.monotonic_ns()) / 1e9)
            cur = await self.read()
            values = self.samplers.derive(prev, cur)
            yield MonitorSample(timestamp_ns=time.time_ns(), values=values)
            prev = cur
            due += period
            now = time.monotonic_ns()
            if due <= now:  # suspended or starved for a whole interval: skip, do not burst
                due = now + period - (now - due) % period

    def close_now(self) -> None:
        """Closes the samplers from outside the event loop (a backend that failed to start)."""
        self.thread.submit(self.samplers.close).result()
        self.thread.shutdown()

    async def close(self) -> None:
        if self.thread is not None:
            await asyncio.get_running_loop().run_in_executor(self.thread, self.samplers.close)
            self.thread.shutdown()
            self.thread = None
