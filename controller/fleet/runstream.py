"""Following one run's windows over the agent's WebSocket trace stream, with reconnection, and
putting them together as the RunResult: windows the stream missed ("gap") are read from the
recorded trace at the end; every frame is checked field by field before it is believed."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from typing import Callable

import aiohttp
import numpy as np

from mimesys import wire
from mimesys.backend import ExecutedWindow, RunOptions
from mimesys.errors import MimesysError, ValidationError
from mimesys.metrics import MetricSpec
from mimesys.plan import Plan
from mimesys.trace import Trace

from .connection import MAX_FRAME_BYTES
from .errors import AgentError, RunFailed


log = logging.getLogger(__name__)


@dataclass
class RunResult:
    trace: Trace                        # every executed window, repetition-major: row r * T + t
    windows: list[ExecutedWindow]       # the same windows with repetition/window indices
    run_id: str = ""
    agent: str = ""

    @classmethod
    def assemble(cls, got: dict[tuple[int, int], ExecutedWindow], header: dict, metrics: list[MetricSpec],
                 plan: Plan, options: RunOptions, run_id: str, *, agent_url: str, agent: str) -> RunResult:
        """The windows in order, their trace described by the stream's header frame."""
        windows = [got[k] for k in sorted(got)]
        trace = Trace(values=np.stack([w.values for w in windows]).astype(np.float32), metrics=metrics,
                      window_s=float(header.get("window_s", plan.window_s)),
                      window_start_ns=np.array([w.start_ns for w in windows], np.int64),
                      host_fingerprint=header.get("fingerprint", {}) or {},
                      simulated=bool(header.get("simulated", False)),
                      provenance={"kind": "run", "run_id": run_id, "agent": agent_url,
                                  "repetitions": options.repetitions, "plan_windows": plan.T})
        return cls(trace=trace, windows=windows, run_id=run_id, agent=agent)

    def values_by_repetition(self, plan_windows: int) -> np.ndarray:
        """[R, T, N] (NaN where a window never arrived)."""
        reps = 1 + max((w.repetition for w in self.windows), default=0)
        out = np.full((reps, plan_windows, self.trace.values.shape[1]), np.nan, np.float32)
        for w in self.windows:
            out[w.repetition, w.window] = w.values
        return out


class RunStream:
    """One run's frames, from the first on every (re)connection; windows are keyed by
    (repetition, window), so a reconnection keeps those already seen."""

    def __init__(self, client, run_id: str, plan: Plan, options: RunOptions,
                 on_window: Callable[[ExecutedWindow], None] | None):
        self.client, self.run_id, self.plan, self.options, self.on_window = client, run_id, plan, options, on_window
        self.got: dict[tuple[int, int], ExecutedWindow] = {}
        self.header: dict | None = None
        self.end: dict | None = None
        self.gap = False
        self.failures = 0

    async def follow(self) -> RunResult:
        c, run_id = self.client, self.run_id
        stall = max(c.stall_timeout_s, self.plan.window_s * (4 + self.options.warmup_windows))
        while self.end is None:
            try:
                async with c.session().ws_connect(f"{c.url}/v1/runs/{run_id}/trace", headers=c.headers,
                                                  heartbeat=30.0, max_msg_size=MAX_FRAME_BYTES, ssl=c.ssl) as ws:
                    await self._receive(ws, stall)
            except (aiohttp.ClientError, asyncio.TimeoutError, OSError, MimesysError) as e:
                if isinstance(e, AgentError):
                    raise
                c.raise_tls(e, f"run {run_id} trace stream")
                log.info("agent %s run %s: stream interrupted (%s: %s)", c.name, run_id, type(e).__name__, e)
            if self.end is not None:
                break
            await self._after_a_drop()
        if (end := self.end).get("state") != "done":
            raise RunFailed(c.name, f"run {run_id} ended {end.get('state')}: {end.get('error') or 'no reason'}",
                            status=0, details={"reason": end.get("reason")})
        return await self._result()

    async def _receive(self, ws, stall: float) -> None:
        """Frames until the end frame, or until the connection stops sending binary ones."""
        while True:
            msg = await ws.receive(timeout=stall)
            if msg.type != aiohttp.WSMsgType.BINARY:
                return
            frame = wire.unpack(msg.data, where=f"{self.client.name} run {self.run_id} frame")
            kind = frame.get("type")
            if kind == "header":
                self.header = frame
            elif kind == "window":
                self._window(frame)
            elif kind == "gap":
                self.gap = True
            elif kind == "end":
                self.end = frame
                return

    def _window(self, frame: dict) -> None:
        header = self.header
        n = len(header["metrics"]) if header and isinstance(header.get("metrics"), list) else None
        try:
            w = _window_from_frame(frame, n, self.plan, self.options)
        except ValidationError as e:
            # One bad frame costs that window (fetched from the recorded trace at the
            # end), not the run or the campaign.
            log.warning("agent %s run %s: %s", self.client.name, self.run_id, e)
            self.gap = True
            return
        key = (w.repetition, w.window)
        if key not in self.got:
            self.got[key] = w
            self.failures = 0
            if self.on_window is not None:
                self.on_window(w)

    async def _after_a_drop(self) -> None:
        """Back off before reconnecting, or give up; a stream that ended without an end frame
        may mean the run is over, so the agent is asked."""
        c = self.client
        self.failures += 1
        if self.failures > c.reconnects:
            raise AgentError(c.name, f"run {self.run_id}: lost the trace stream after {c.reconnects} "
                                     f"reconnects ({len(self.got)} windows received)")
        await asyncio.sleep(c.backoff_s * 2 ** (self.failures - 1))
        with contextlib.suppress(AgentError):
            st = await c.status(self.run_id)
            state = st.get("state")
            if state in ("failed", "cancelled"):
                self.end = {"state": state, "error": st.get("error"), "reason": st.get("reason")}
            elif state == "done" and self.failures >= 2:
                self.end, self.gap = {"state": "done"}, True     # the stream is gone; the recorded trace has it all

    async def _result(self) -> RunResult:
        """Every window, those the stream missed read from the recorded trace."""
        c, run_id, plan, options, got = self.client, self.run_id, self.plan, self.options, self.got
        header = self.header or {}
        metrics = [MetricSpec.from_dict(d) for d in header.get("metrics", [])]
        total = plan.T * options.repetitions
        if len(got) < total and (self.gap or options.record):
            trace = await c.recorded_trace(run_id)
            metrics = metrics or trace.metrics
            _fill_from_trace(got, trace, total, plan.T)
        if len(got) < total:
            raise AgentError(c.name, f"run {run_id}: received {len(got)} of {total} windows")
        return RunResult.assemble(got, header, metrics, plan, options, run_id, agent_url=c.url, agent=c.name)

def _fill_from_trace(got: dict[tuple[int, int], ExecutedWindow], trace: Trace, total: int, T: int) -> None:
    """Adds to `got` each of the first `total` windows of a recorded trace (row r * T + t) it lacks."""
    for i in range(min(total, trace.T)):
        key = divmod(i, T)
        if key not in got:
            got[key] = ExecutedWindow(key[0], key[1], int(trace.window_start_ns[i]) if
                                      trace.window_start_ns is not None else 0, trace.values[i])


def _int_field(frame: dict, key: str, lo: int, hi: int) -> int:
    v = frame.get(key)
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v < hi:
        raise ValidationError(f"window frame: {key} must be an integer in [{lo}, {hi})")
    return v


def _window_from_frame(frame: dict, n: int | None, plan: Plan | None = None,
                       options: RunOptions | None = None) -> ExecutedWindow:
    """A window frame checked field by field (types, ranges, sizes); ValidationError if not."""
    reps = options.repetitions if options is not None else 1 << 31
    T = plan.T if plan is not None else 1 << 31
    rep = _int_field(frame, "repetition", 0, reps)
    win = _int_field(frame, "window", 0, T)
    start = frame.get("start_ns", 0)
    if isinstance(start, bool) or not isinstance(start, int) or not 0 <= start < 1 << 63:
        raise ValidationError("window frame: start_ns must be a non-negative integer")
    ran = ops = None
    if "ran_ns" in frame and "shape" in frame:
        shape = frame["shape"]
        if not (isinstance(shape, list) and len(shape) == 2
                and all(isinstance(x, int) and not isinstance(x, bool) and 0 <= x <= 1 << 16 for x in shape)):
            raise ValidationError("window frame: shape must be two small non-negative integers")
        if plan is not None and tuple(shape) != (plan.M, plan.K):
            raise ValidationError(f"window frame: shape {shape} is not the plan's [{plan.M}, {plan.K}]")
        size = shape[0] * shape[1] * 8
        for key in ("ran_ns", "ops"):
            if key in frame and (not isinstance(frame[key], (bytes, bytearray)) or len(frame[key]) != size):
                raise ValidationError(f"window frame: {key} must be {size} bytes for shape {shape}")
        ran = np.frombuffer(frame["ran_ns"], "<i8").reshape(shape).astype(np.int64)
        ops = np.frombuffer(frame["ops"], "<i8").reshape(shape).astype(np.int64) if "ops" in frame else None
    return ExecutedWindow(repetition=rep, window=win, start_ns=start,
                          values=wire.vec_from_bytes(frame.get("values"), n, where="window frame values"),
                          ran_ns=ran, ops=ops)
