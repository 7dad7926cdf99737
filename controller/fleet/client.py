"""One agent over its HTTP API: AgentClient (requests, runs streamed over WebSocket with
reconnection, bounded reads of every reply and frame) and the RunResult a run returns."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from typing import Awaitable, Callable

import aiohttp
import numpy as np

from mimesys import tracestream, wire
from mimesys.backend import ExecutedWindow, RunOptions
from mimesys.errors import MimesysError, ValidationError
from mimesys.metrics import MetricSpec
from mimesys.plan import Plan
from mimesys.trace import Trace

from .errors import AgentBusy, AgentError, RunFailed, TLSIdentityError

log = logging.getLogger(__name__)


@dataclass
class RunResult:
    trace: Trace                        # every executed window, repetition-major: row r * T + t
    windows: list[ExecutedWindow]       # the same windows with repetition/window indices
    run_id: str = ""
    agent: str = ""

    def values_by_repetition(self, plan_windows: int) -> np.ndarray:
        """[R, T, N] (NaN where a window never arrived)."""
        reps = 1 + max((w.repetition for w in self.windows), default=0)
        out = np.full((reps, plan_windows, self.trace.values.shape[1]), np.nan, np.float32)
        for w in self.windows:
            out[w.repetition, w.window] = w.values
        return out


class AgentClient:
    """One agent. Cheap to build; the HTTP session opens on first use (inside the event loop)."""

    def __init__(self, url: str, token: str, *, name: str = "", session: aiohttp.ClientSession | None = None,
                 reconnects: int = 5, backoff_s: float = 0.2, stall_timeout_s: float = 60.0,
                 ssl=True, allow_plain_http: bool = False):
        self.url = url.rstrip("/")
        self.ssl = ssl            # aiohttp's ssl= for every request (AgentSpec.ssl)
        self.name = name or self.url
        # Every request carries the token: refused over plain HTTP to another host unless the
        # command line allowed it (controller/tokens.py).
        from ..tokens import check_plain_http
        check_plain_http(self.name, self.url, allowed=allow_plain_http)
        self._token = token
        self._session = session
        self._own_session = session is None
        self.reconnects = reconnects
        self.backoff_s = backoff_s
        self.stall_timeout_s = stall_timeout_s

    def __repr__(self) -> str:
        return f"AgentClient({self.name})"

    @property
    def headers(self) -> dict:
        return {"Authorization": f"Bearer {self._token}", "Content-Type": wire.CONTENT_TYPE,
                "Accept": wire.CONTENT_TYPE}

    def session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None, sock_connect=10))
            self._own_session = True
        return self._session

    async def close(self) -> None:
        if self._own_session and self._session is not None and not self._session.closed:
            await self._session.close()

    # -- plain requests -------------------------------------------------------------------
    async def _request(self, method: str, path: str, body: dict | None = None, *, timeout_s: float = 30.0) -> dict:
        data = wire.pack(body) if body is not None else None
        try:
            async with self.session().request(method, self.url + path, data=data, headers=self.headers,
                                              timeout=aiohttp.ClientTimeout(total=timeout_s), ssl=self.ssl) as resp:
                raw = await _read_bounded(resp, MAX_REPLY_BYTES, f"{self.name} {method} {path} reply")
                status = resp.status
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as e:
            self._raise_tls(e, f"{method} {path}")
            raise AgentError(self.name, f"{method} {path}: no answer: {type(e).__name__}: {e}") from None
        except ValidationError as e:
            raise AgentError(self.name, f"{method} {path}: {e}") from None
        try:
            obj = wire.unpack(raw, where=f"{self.name} {method} {path} reply") if raw else {}
        except MimesysError:
            obj = {"error": raw[:200].decode(errors="replace")}
        if status >= 400:
            details = {k: v for k, v in obj.items() if k not in ("v", "error")}
            raise AgentError(self.name, f"{method} {path}: HTTP {status}: {obj.get('error', '')}", status, details)
        return obj

    def _raise_tls(self, e: BaseException, what: str) -> None:
        """A certificate that is not the pinned one, or does not verify, is a clear, final error."""
        if isinstance(e, aiohttp.ServerFingerprintMismatch):
            raise TLSIdentityError(self.name, f"{what}: refused: the agent's TLS certificate has SHA-256 "
                                              f"{_colon_hex(e.got)}, but the fleet file pins tls_sha256 = "
                                              f"{_colon_hex(e.expected)} (a different or replaced certificate, "
                                              f"or not this agent)") from None
        if isinstance(e, aiohttp.ClientConnectorCertificateError):
            raise TLSIdentityError(self.name, f"{what}: refused: the agent's TLS certificate does not verify "
                                              f"({e.certificate_error}); set ca_file to the CA that signed it, "
                                              f"or pin it with tls_sha256") from None

    async def info(self) -> dict:
        return await self._request("GET", "/v1/info")

    async def status(self, run_id: str) -> dict:
        return await self._request("GET", f"/v1/runs/{run_id}")

    async def cancel(self, run_id: str) -> str:
        return (await self._request("DELETE", f"/v1/runs/{run_id}", timeout_s=10.0)).get("state", "")

    async def recorded_trace(self, run_id: str) -> Trace:
        """The run's recorded trace, streamed as bounded msgpack messages (mimesys/tracestream.py)."""
        return await self._get_trace(f"/v1/runs/{run_id}/trace.msgpack", f"the trace of run {run_id}")

    async def solo_profile(self) -> Trace:
        """The host's solo profile as the agent's `calibrate` recorded it (AgentError with status
        404, naming why, when the agent has none this host can use)."""
        return await self._get_trace("/v1/profile", "the solo profile")

    async def _get_trace(self, path: str, what_trace: str) -> Trace:
        what = f"GET {what_trace}"
        try:
            async with self.session().get(f"{self.url}{path}", headers=self.headers,
                                          timeout=aiohttp.ClientTimeout(total=120), ssl=self.ssl) as resp:
                if resp.status != 200:
                    raw = await _read_bounded(resp, MAX_REPLY_BYTES, f"{self.name} {what} reply")
                    try:
                        detail = wire.unpack(raw, where=f"{self.name} {what} reply").get("error", "") if raw else ""
                    except MimesysError:
                        detail = raw[:200].decode(errors="replace")
                    raise AgentError(self.name, f"{what}: HTTP {resp.status}: {detail}", resp.status)
                return await tracestream.read_stream(resp.content.iter_chunked(1 << 16),
                                                     f"{what_trace} from {self.name}", max_bytes=MAX_TRACE_BYTES)
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as e:
            self._raise_tls(e, what)
            raise AgentError(self.name, f"{what}: {e}") from None
        except ValidationError as e:
            raise AgentError(self.name, f"{what}: {e}") from None
        except ValidationError as e:
            raise AgentError(self.name, f"{what}: {e}") from None

    # -- runs -----------------------------------------------------------------------------
    async def start(self, plan: Plan, options: RunOptions) -> str:
        opts = {"repetitions": options.repetitions, "warmup_windows": options.warmup_windows,
                "record": options.record}
        if options.seed is not None:
            opts["seed"] = int(options.seed)
        # Raw arrays, not an HDF5 file: the agent has nothing to interpret (mimesys.untrusted).
        try:
            reply = await self._request("POST", "/v1/runs", {"plan": plan.to_wire(), "options": opts}, timeout_s=60.0)
        except AgentError as e:
            if e.status == 409 and e.details.get("running"):
                raise AgentBusy(self.name, str(e), str(e.details["running"])) from None
            raise
        return str(reply["run_id"])

    async def wait_idle(self, run_id: str, timeout_s: float, poll_s: float = 1.0) -> bool:
        """Wait until `run_id` (someone else's run) is no longer running. True if it ended."""
        deadline = asyncio.get_running_loop().time() + timeout_s
        while asyncio.get_running_loop().time() < deadline:
            try:
                if (await self.status(run_id)).get("state") != "running":
                    return True
            except AgentError as e:
                if e.status == 404:
                    return True
            await asyncio.sleep(poll_s)
        return False

    async def run_when_host_free(self, plan: Plan, options: RunOptions | None = None, *, wait_s: float = 900.0,
                                 **kw) -> RunResult:
        """`run`, retried while another process holds the host's run lock (a run that fails with
        reason host_busy), pausing up to 15 s between tries, for at most `wait_s` in all."""
        waited = 0.0
        while True:
            try:
                return await self.run(plan, options, **kw)
            except RunFailed as e:
                if e.details.get("reason") != "host_busy" or waited >= wait_s:
                    raise
            pause = min(0.5 * 2 ** min(int(waited // 10), 5), 15.0)
            log.info("agent %s: the host is running another process's plan; waiting %.1f s", self.name or self.url,
                     pause)
            await asyncio.sleep(pause)
            waited += pause

    async def run(self, plan: Plan, options: RunOptions | None = None, *,
                  on_window: Callable[[ExecutedWindow], None] | None = None,
                  on_start: Callable[[str], Awaitable[None] | None] | None = None) -> RunResult:
        """Execute `plan` on the agent and return every window. Raises AgentError/RunFailed
        (AgentBusy when another run occupies the agent). `on_start(run_id)` is awaited once
        the agent accepted the run, before its windows are followed."""
        options = options or RunOptions()
        run_id = await self.start(plan, options)
        try:
            if on_start is not None:
                out = on_start(run_id)
                if asyncio.iscoroutine(out):
                    await out
            return await self._follow(run_id, plan, options, on_window)
        except BaseException:
            # Cancelled by the caller, or the stream is lost for good: stop the run if we can.
            with contextlib.suppress(Exception):
                await asyncio.shield(self.cancel(run_id))
            raise

    async def _follow(self, run_id: str, plan: Plan, options: RunOptions, on_window) -> RunResult:
        got: dict[tuple[int, int], ExecutedWindow] = {}
        header: dict | None = None
        end: dict | None = None
        gap = False
        failures = 0
        stall = max(self.stall_timeout_s, plan.window_s * (4 + options.warmup_windows))
        while end is None:
            try:
                async with self.session().ws_connect(f"{self.url}/v1/runs/{run_id}/trace", headers=self.headers,
                                                     heartbeat=30.0, max_msg_size=MAX_FRAME_BYTES,
                                                     ssl=self.ssl) as ws:
                    while True:
                        msg = await ws.receive(timeout=stall)
                        if msg.type != aiohttp.WSMsgType.BINARY:
                            break
                        frame = wire.unpack(msg.data, where=f"{self.name} run {run_id} frame")
                        kind = frame.get("type")
                        if kind == "header":
                            header = frame
                        elif kind == "window":
                            n = len(header["metrics"]) if header and isinstance(header.get("metrics"), list) else None
                            try:
                                w = _window_from_frame(frame, n, plan, options)
                            except ValidationError as e:
                                # One bad frame costs that window (fetched from the recorded trace at the
                                # end), not the run or the campaign.
                                log.warning("agent %s run %s: %s", self.name, run_id, e)
                                gap = True
                                continue
                            key = (w.repetition, w.window)
                            if key not in got:
                                got[key] = w
                                failures = 0
                                if on_window is not None:
                                    on_window(w)
                        elif kind == "gap":
                            gap = True
                        elif kind == "end":
                            end = frame
                            break
            except (aiohttp.ClientError, asyncio.TimeoutError, OSError, MimesysError) as e:
                if isinstance(e, AgentError):
                    raise
                self._raise_tls(e, f"run {run_id} trace stream")
                log.info("agent %s run %s: stream interrupted (%s: %s)", self.name, run_id, type(e).__name__, e)
            if end is not None:
                break
            failures += 1
            if failures > self.reconnects:
                raise AgentError(self.name, f"run {run_id}: lost the trace stream after {self.reconnects} "
                                            f"reconnects ({len(got)} windows received)")
            await asyncio.sleep(self.backoff_s * 2 ** (failures - 1))
            # A stream that ends without an end frame may mean the run is over: ask.
            with contextlib.suppress(AgentError):
                st = await self.status(run_id)
                state = st.get("state")
                if state in ("failed", "cancelled"):
                    end = {"state": state, "error": st.get("error"), "reason": st.get("reason")}
                elif state == "done" and failures >= 2:
                    end, gap = {"state": "done"}, True     # the stream is gone; the recorded trace has it all
        if end.get("state") != "done":
            raise RunFailed(self.name, f"run {run_id} ended {end.get('state')}: {end.get('error') or 'no reason'}",
                            status=0, details={"reason": end.get("reason")})
        metrics = [MetricSpec.from_dict(d) for d in (header or {}).get("metrics", [])]
        total = plan.T * options.repetitions
        if len(got) < total and (gap or options.record):
            trace = await self.recorded_trace(run_id)
            metrics = metrics or trace.metrics
            for i in range(min(total, trace.T)):
                key = divmod(i, plan.T)
                if key not in got:
                    got[key] = ExecutedWindow(key[0], key[1], int(trace.window_start_ns[i]) if
                                              trace.window_start_ns is not None else 0, trace.values[i])
        if len(got) < total:
            raise AgentError(self.name, f"run {run_id}: received {len(got)} of {total} windows")
        windows = [got[k] for k in sorted(got)]
        trace = Trace(values=np.stack([w.values for w in windows]).astype(np.float32), metrics=metrics,
                      window_s=float((header or {}).get("window_s", plan.window_s)),
                      window_start_ns=np.array([w.start_ns for w in windows], np.int64),
                      host_fingerprint=(header or {}).get("fingerprint", {}) or {},
                      simulated=bool((header or {}).get("simulated", False)),
                      provenance={"kind": "run", "run_id": run_id, "agent": self.url,
                                  "repetitions": options.repetitions, "plan_windows": plan.T})
        return RunResult(trace=trace, windows=windows, run_id=run_id, agent=self.name)


def _colon_hex(b: bytes) -> str:
    return ":".join(f"{x:02X}" for x in b)


MAX_REPLY_BYTES = 16 << 20     # a JSON-like reply (info, status) from an agent
MAX_TRACE_BYTES = 2 << 30      # the recorded trace of one run (its values)
MAX_FRAME_BYTES = 8 << 20      # one WebSocket frame (a window is a few KiB; the header carries the fingerprint)


async def _read_bounded(resp, limit: int, where: str) -> bytes:
    """A response body, refusing one larger than `limit` as it arrives (not after buffering it)."""
    if resp.content_length is not None and resp.content_length > limit:
        raise ValidationError(f"{where}: {resp.content_length} bytes announced; at most {limit} accepted")
    chunks, total = [], 0
    async for chunk in resp.content.iter_chunked(1 << 16):
        total += len(chunk)
        if total > limit:
            raise ValidationError(f"{where}: more than {limit} bytes; refused")
        chunks.append(chunk)
    return b"".join(chunks)


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
