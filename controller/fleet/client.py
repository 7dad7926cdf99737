"""One agent over its HTTP API: AgentClient, its endpoints, and runs started, followed
(runstream.py) and cancelled when the caller gives up. The HTTP plumbing under it (token,
session, bounded replies, TLS errors) is connection.py's."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Awaitable, Callable

import aiohttp

from mimesys.backend import ExecutedWindow, RunOptions
from mimesys.plan import Plan
from mimesys.trace import Trace

from .connection import AgentConnection
from .errors import AgentBusy, AgentError, RunFailed
from .runstream import RunResult, RunStream

log = logging.getLogger(__name__)


class AgentClient(AgentConnection):
    """One agent. Cheap to build; the HTTP session opens on first use (inside the event loop)."""

    def __init__(self, url: str, token: str, *, name: str = "", session: aiohttp.ClientSession | None = None,
                 reconnects: int = 5, backoff_s: float = 0.2, stall_timeout_s: float = 60.0,
                 ssl=True, allow_plain_http: bool = False):
        super().__init__(url, token, name=name, session=session, ssl=ssl, allow_plain_http=allow_plain_http)
        self.reconnects = reconnects          # how a run's trace stream is followed (runstream.py)
        self.backoff_s = backoff_s
        self.stall_timeout_s = stall_timeout_s

    def __repr__(self) -> str:
        return f"AgentClient({self.name})"

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
            return await RunStream(self, run_id, plan, options, on_window).follow()
        except BaseException:
            # Cancelled by the caller, or the stream is lost for good: stop the run if we can.
            with contextlib.suppress(Exception):
                await asyncio.shield(self.cancel(run_id))
            raise
