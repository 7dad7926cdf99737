"""A run's frames, buffered for late readers: a WebSocket that connects after the run began
still receives the header and every window from the first, within `runs.stream_buffer_mib`;
a reader that falls behind what the log still holds gets a "gap" frame saying how many
windows it missed and should fetch the recorded trace instead.
"""

from __future__ import annotations

import asyncio
import collections
from typing import AsyncIterator

from mimesys import wire
from mimesys.backend import Backend, RunOptions
from mimesys.plan import Plan


class FrameLog:
    """Packed frames of one run, appended by the run task and followed by any number of readers.

    Bounded in bytes: when full, the oldest window frames are dropped (the header is kept
    apart and never dropped)."""

    def __init__(self, header: bytes, max_bytes: int):
        self.header = header
        self.max_bytes = max_bytes
        self._frames: collections.deque[bytes] = collections.deque()
        self._first = 0          # absolute index of _frames[0]
        self._bytes = 0
        self.closed = False
        self._changed = asyncio.Event()

    @property
    def dropped(self) -> int:
        return self._first

    def append(self, frame: bytes) -> None:
        self._frames.append(frame)
        self._bytes += len(frame)
        while self._bytes > self.max_bytes and len(self._frames) > 1:
            self._bytes -= len(self._frames.popleft())
            self._first += 1
        self._wake()

    def close(self, end_frame: bytes) -> None:
        self._frames.append(end_frame)  # the end frame is never evicted: nothing follows it
        self._bytes += len(end_frame)
        self.closed = True
        self._wake()

    def _wake(self) -> None:
        ev, self._changed = self._changed, asyncio.Event()
        ev.set()

    async def follow(self) -> AsyncIterator[bytes]:
        """The header, then every frame from the first still held, live until the end frame."""
        yield self.header
        i = 0
        while True:
            if i < self._first:
                yield wire.pack({"type": "gap", "missed": self._first - i,
                                 "hint": "frames were dropped from the bounded stream buffer; GET /v1/runs/{id}/trace.msgpack"})
                i = self._first
            while i < self._first + len(self._frames):
                yield self._frames[i - self._first]
                i += 1
            if self.closed:
                return
            changed = self._changed
            await changed.wait()


def header_frame(run_id: str, plan: Plan, options: RunOptions, backend: Backend) -> bytes:
    """A run's first frame: its metric schema, host and shape."""
    info = backend.info()
    return wire.pack({"type": "header", "metrics": [m.to_dict() for m in backend.metric_schema()],
                      "window_s": float(plan.window_s), "simulated": bool(info.simulated),
                      "fingerprint": info.fingerprint, "backend": info.name,
                      "run": {"run_id": run_id, "windows_total": plan.T * options.repetitions,
                              "plan_windows": plan.T, "repetitions": options.repetitions,
                              "warmup_windows": options.warmup_windows, "shape": [plan.M, plan.K],
                              "catalog_hash": plan.catalog_hash}})
