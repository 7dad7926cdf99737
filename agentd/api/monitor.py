"""Live host telemetry for any number of /v1/monitor clients from ONE sampling loop.

The loop runs while at least one client is connected: it takes one MonitorSample per
interval from the backend, packs it into a frame once, and offers the same bytes to every
client's bounded queue. A client that does not keep up loses its oldest queued frame
(the freshest telemetry wins); every loss is counted, per client and in /metrics, and each
frame carries a sequence number so a client can see the gap itself.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging

from mimesys import wire
from mimesys.backend import Backend
from mimesys.errors import MimesysError

from ..prometheus.telemetry import LatestSample

log = logging.getLogger(__name__)


class TooManyClients(MimesysError):
    http_status = 503


class Subscriber:
    def __init__(self, hub: "MonitorHub", maxlen: int):
        self._hub = hub
        self._queue: collections.deque[bytes] = collections.deque()
        self._maxlen = maxlen
        self._ready = asyncio.Event()
        self.missed = 0
        self.closed = False

    def offer(self, frame: bytes) -> None:
        if len(self._queue) >= self._maxlen:
            self._queue.popleft()
            self.missed += 1
            self._hub.missed_frames += 1
        self._queue.append(frame)
        self._ready.set()

    def end(self, frame: bytes) -> None:
        self._queue.append(frame)
        self.closed = True
        self._ready.set()

    async def get(self) -> bytes | None:
        """The next frame; None after the end frame has been taken."""
        while not self._queue:
            if self.closed:
                return None
            self._ready.clear()
            await self._ready.wait()
        return self._queue.popleft()


class MonitorHub:
    def __init__(self, backend: Backend, *, interval_s: float = 1.0, client_queue: int = 8,
                 max_clients: int = 1024):
        self.backend = backend
        self.interval_s = interval_s
        self.client_queue = client_queue
        self.max_clients = max_clients
        self.clients: set[Subscriber] = set()
        self.missed_frames = 0     # frames dropped for slow clients, over the agent's lifetime
        self.frames_sampled = 0    # samples taken by the loop
        self._task: asyncio.Task | None = None
        self._seq = 0
        self.latest = LatestSample()   # the newest sample, for the host gauges of /metrics
        self._held_until = 0.0         # loop.time() until which scrapes keep the loop sampling

    def header(self) -> bytes:
        info = self.backend.info()
        return wire.pack({"type": "header", "metrics": [m.to_dict() for m in self.backend.metric_schema()],
                          "window_s": self.interval_s, "simulated": bool(info.simulated),
                          "fingerprint": info.fingerprint, "backend": info.name})

    def subscribe(self) -> Subscriber:
        if len(self.clients) >= self.max_clients:
            raise TooManyClients(f"{len(self.clients)} monitor clients connected; the limit is "
                                 f"monitor.max_clients = {self.max_clients}")
        sub = Subscriber(self, self.client_queue)
        self.clients.add(sub)
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._loop(), name="monitor-loop")
        return sub

    def hold(self, seconds: float) -> None:
        """Keep sampling for `seconds` without a client (a /metrics scrape: the host gauges then
        stay fresh while someone scrapes, and the idle agent samples nothing when nobody does)."""
        self._held_until = asyncio.get_running_loop().time() + seconds
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._loop(), name="monitor-loop")

    def _held(self) -> bool:
        return asyncio.get_running_loop().time() < self._held_until

    def unsubscribe(self, sub: Subscriber) -> None:
        self.clients.discard(sub)
        if not self.clients and not self._held() and self._task is not None:
            # Nobody is watching: stop sampling (the agent's idle cost is then zero).
            self._task.cancel()
            self._task = None

    async def _loop(self) -> None:
        while True:
            try:
                async with contextlib.aclosing(self.backend.monitor(self.interval_s)) as samples:
                    async for sample in samples:
                        self._seq += 1
                        self.frames_sampled += 1
                        self.latest.update(sample.values)
                        frame = wire.pack({"type": "sample", "seq": self._seq,
                                           "timestamp_ns": int(sample.timestamp_ns),
                                           "values": wire.vec_to_bytes(sample.values)})
                        for sub in self.clients:
                            sub.offer(frame)
                        if not self.clients and not self._held():
                            self._task = None      # nobody watches or scrapes any more
                            return
                return
            except asyncio.CancelledError:
                raise
            except Exception:
                # One failing source must not end everyone's stream: log and start again.
                log.exception("monitor loop failed; restarting in %.1f s", self.interval_s)
                await asyncio.sleep(self.interval_s)

    async def close(self) -> None:
        end = wire.pack({"type": "end", "state": "agent shutting down"})
        for sub in list(self.clients):
            sub.end(end)
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
