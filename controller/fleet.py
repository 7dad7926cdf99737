"""The fleet client: talk to mimesys agents over their HTTP API (docs/design.md "HTTP API").

    fleet = Fleet.from_file("fleet.toml")
    probes = await fleet.probe()                       # /v1/info of every agent, concurrently
    identity = fleet.check_hosts(probes)               # one hardware fingerprint, or FleetError
    report = await fleet.run_jobs(jobs, on_result)     # fan out; a failing agent's job moves on
    result = await fleet.clients[0].run(plan, RunOptions(repetitions=3))   # RunResult(trace, windows)

Fleet file (TOML; token and CA files are relative to the fleet file):

    allow_mixed_hosts = false          # optional: refuse agents whose hardware differs
    [[agent]]
    url = "https://10.0.0.5:7433"
    token_file = "tokens/host5"        # optional: see controller/tokens.py for the lookup order
    name = "host5"                     # optional, defaults to the URL
    tls_sha256 = "F8:64:39:..."        # optional: pin the agent's certificate (`mimesys-agent tls init`)
    ca_file = "ca/host5.crt"           # optional: or verify it (chain and name) against this CA
    allow_plain_http = false           # optional: true silences the warning for an http:// URL

`tls_sha256` accepts exactly one certificate whatever signed it (self-signed agents);
`ca_file` accepts any certificate the CA signed for the URL's host name. One or the other
(an https:// URL with neither uses the system's CAs); both apply to https:// URLs only.
An http:// URL to a host that is not loopback sends the bearer token in clear text: the
client warns once per agent on stderr unless the entry says `allow_plain_http = true`.
An entry without token_file gets a token from the environment only when its URL is loopback
(controller/tokens.py).

Streaming: a run's windows arrive on WS /v1/runs/{id}/trace. The agent replays the run's
frames from the first on every connection, so after a dropped connection the client
reconnects and keeps the windows it has not seen yet (keyed by repetition and window);
windows the agent's bounded buffer no longer holds ("gap") are read from trace.h5 at the
end. Cancelling the coroutine that awaits `run()` cancels the run on the agent.

Reassignment: `run_jobs` gives each agent one job at a time. When an agent fails or
disconnects for good mid-run, its job goes back to the queue for another agent (the failed
run is cancelled where the agent is still reachable); a job's result is delivered once,
identified by the job id, however many agents ran it.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Awaitable, Callable

import aiohttp
import numpy as np

from agentd import wire
from agentd.backend import ExecutedWindow, RunOptions
from agentd.config import read_toml
from agentd.tls import normalize_sha256
from agentd.errors import ConfigError, MimesysError, ValidationError
from agentd.metrics import MetricSpec
from agentd.plan import Plan
from agentd.trace import Trace

log = logging.getLogger(__name__)

# Fingerprint keys that differ between machines of the same hardware (or between two
# calibrations of one machine); everything else must match for a dataset to mix hosts.
VOLATILE_FINGERPRINT_KEYS = frozenset({"calibrated_peaks", "hostname", "boot_id", "uptime_s", "collected_at",
                                       "catalog_hash", "online_cpus"})


class FleetError(MimesysError):
    """The fleet cannot do what was asked (no agent left, mixed hosts, bad fleet file)."""


class AgentError(FleetError):
    """An agent answered with an error; `status` is the HTTP status (0 = no answer)."""

    def __init__(self, agent: str, message: str, status: int = 0, details: dict | None = None):
        super().__init__(f"agent {agent}: {message}")
        self.agent, self.status, self.details = agent, status, details or {}

    @property
    def retryable(self) -> bool:
        """True when another attempt (here or on another agent) may succeed; False when the
        request itself is wrong (a bad plan fails everywhere)."""
        return self.status == 0 or self.status in (401, 403, 409, 429) or self.status >= 500


class RunFailed(AgentError):
    """The run ended in state failed/cancelled on the agent."""


class AgentBusy(AgentError):
    """409: the agent is executing another run (`running` names it)."""

    def __init__(self, agent: str, message: str, running: str):
        super().__init__(agent, message, 409, {"running": running})
        self.running = running


class TLSIdentityError(AgentError):
    """The agent's certificate is not the pinned one, or does not verify: never retried."""

    @property
    def retryable(self) -> bool:
        return False


@dataclass(frozen=True)
class AgentSpec:
    url: str
    token_file: Path | None
    name: str = ""
    ca_file: Path | None = None
    tls_sha256: bytes | None = None     # 32 bytes: the pinned certificate's SHA-256
    allow_plain_http: bool = False      # the operator accepts a clear-text token to this http:// URL

    def token(self, explicit: Path | None = None) -> str:
        from .tokens import agent_token
        return agent_token(self.name or self.url, explicit=explicit, fleet_entry=self.token_file,
                           fleet_url=self.url)

    def ssl(self):
        """What aiohttp's `ssl=` takes for this agent: a Fingerprint pin, a CA context, or True."""
        if not self.url.startswith("https://"):
            return True
        if self.tls_sha256 is not None:
            return aiohttp.Fingerprint(self.tls_sha256)
        if self.ca_file is not None:
            import ssl
            try:
                return ssl.create_default_context(cafile=str(self.ca_file))
            except (OSError, ssl.SSLError) as e:
                raise ConfigError(f"agent {self.name or self.url}: ca_file {self.ca_file}: {e}") from None
        return True

    def client(self, *, token_file: Path | None = None, **kw) -> "AgentClient":
        return AgentClient(self.url, self.token(token_file), name=self.name, ssl=self.ssl(),
                           allow_plain_http=self.allow_plain_http, **kw)


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


def hardware_identity(fingerprint: dict) -> dict:
    """The part of a fingerprint that says what hardware this is (volatile keys removed)."""
    return {k: v for k, v in (fingerprint or {}).items() if k not in VOLATILE_FINGERPRINT_KEYS}


def _diff_keys(a: dict, b: dict) -> list[str]:
    return sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))


class AgentClient:
    """One agent. Cheap to build; the HTTP session opens on first use (inside the event loop)."""

    def __init__(self, url: str, token: str, *, name: str = "", session: aiohttp.ClientSession | None = None,
                 reconnects: int = 5, backoff_s: float = 0.2, stall_timeout_s: float = 60.0,
                 ssl=True, allow_plain_http: bool = False):
        self.url = url.rstrip("/")
        self.ssl = ssl            # aiohttp's ssl= for every request (AgentSpec.ssl)
        self.name = name or self.url
        if not allow_plain_http:
            # Every request carries the token: say so once when it would cross a network unencrypted.
            from .tokens import warn_plain_http
            warn_plain_http(self.name, self.url)
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

    async def trace_h5(self, run_id: str) -> Trace:
        try:
            async with self.session().get(f"{self.url}/v1/runs/{run_id}/trace.h5", headers=self.headers,
                                          timeout=aiohttp.ClientTimeout(total=120), ssl=self.ssl) as resp:
                if resp.status != 200:
                    raise AgentError(self.name, f"GET trace.h5 of run {run_id}: HTTP {resp.status}", resp.status)
                raw = await _read_bounded(resp, MAX_TRACE_BYTES, f"{self.name} trace.h5 of run {run_id}")
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as e:
            self._raise_tls(e, f"GET trace.h5 of run {run_id}")
            raise AgentError(self.name, f"GET trace.h5 of run {run_id}: {e}") from None
        except ValidationError as e:
            raise AgentError(self.name, f"GET trace.h5 of run {run_id}: {e}") from None
        return Trace.read(raw, where=f"trace.h5 of run {run_id} from {self.name}")

    # -- runs -----------------------------------------------------------------------------
    async def start(self, plan: Plan, options: RunOptions) -> str:
        opts = {"repetitions": options.repetitions, "warmup_windows": options.warmup_windows,
                "record": options.record}
        if options.seed is not None:
            opts["seed"] = int(options.seed)
        # Raw arrays, not an HDF5 file: the agent has nothing to interpret (agentd.untrusted).
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
                                # One bad frame costs that window (fetched from trace.h5 at the
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
                    end, gap = {"state": "done"}, True     # the stream is gone; trace.h5 has it all
        if end.get("state") != "done":
            raise RunFailed(self.name, f"run {run_id} ended {end.get('state')}: {end.get('error') or 'no reason'}",
                            status=0, details={"reason": end.get("reason")})
        metrics = [MetricSpec.from_dict(d) for d in (header or {}).get("metrics", [])]
        total = plan.T * options.repetitions
        if len(got) < total and (gap or options.record):
            trace = await self.trace_h5(run_id)
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
MAX_TRACE_BYTES = 2 << 30      # trace.h5 of one run
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


# ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class FleetConfig:
    agents: tuple[AgentSpec, ...]
    allow_mixed_hosts: bool = False
    path: Path | None = None

    @classmethod
    def load(cls, path: Path | str) -> "FleetConfig":
        path = Path(path)
        doc = read_toml(path, "fleet")
        unknown = sorted(set(doc) - {"agent", "allow_mixed_hosts"})
        if unknown:
            raise ConfigError(f"{path}: unknown key(s) {unknown}; valid: agent, allow_mixed_hosts")
        allow = doc.get("allow_mixed_hosts", False)
        if not isinstance(allow, bool):
            raise ConfigError(f"{path}: allow_mixed_hosts must be true or false")
        entries = doc.get("agent")
        if not isinstance(entries, list) or not entries:
            raise ConfigError(f"{path}: no [[agent]] entries")
        agents, seen, names = [], set(), set()
        for i, e in enumerate(entries):
            where = f"{path}: agent #{i + 1}"
            if not isinstance(e, dict):
                raise ConfigError(f"{where}: expected a table")
            bad = sorted(set(e) - set(AGENT_KEYS))
            if bad:
                raise ConfigError(f"{where}: unknown key(s) {bad}; valid: {', '.join(AGENT_KEYS)}")
            url = e.get("url")
            if not isinstance(url, str) or not url.startswith(("http://", "https://")):
                raise ConfigError(f"{where}: url must be an http:// or https:// URL, got {url!r}")
            if url in seen:
                raise ConfigError(f"{where}: url {url} listed twice")
            seen.add(url)
            tf = e.get("token_file")
            if tf is not None and not isinstance(tf, str):
                raise ConfigError(f"{where}: token_file must be a path string")
            tpath = None if tf is None else (path.parent / tf if not Path(tf).is_absolute() else Path(tf))
            name = str(e.get("name") or url)
            if name in names:
                raise ConfigError(f"{where}: name {name!r} used twice (names select agents: --agent NAME)")
            names.add(name)
            ca, pin = e.get("ca_file"), e.get("tls_sha256")
            if ca is not None and not isinstance(ca, str):
                raise ConfigError(f"{where}: ca_file must be a path string")
            if pin is not None and not isinstance(pin, str):
                raise ConfigError(f"{where}: tls_sha256 must be a string of hex digits")
            if (ca is not None or pin is not None) and not url.startswith("https://"):
                raise ConfigError(f"{where}: ca_file / tls_sha256 apply to https:// URLs; {url} is plain HTTP")
            if ca is not None and pin is not None:
                raise ConfigError(f"{where}: set ca_file or tls_sha256, not both (a pin accepts one certificate "
                                  f"whoever signed it; a CA accepts what it signed)")
            ca_path = None if ca is None else (path.parent / ca if not Path(ca).is_absolute() else Path(ca))
            if ca_path is not None and not ca_path.is_file():
                raise ConfigError(f"{where}: ca_file {ca_path} does not exist")
            plain = e.get("allow_plain_http", False)
            if not isinstance(plain, bool):
                raise ConfigError(f"{where}: allow_plain_http must be true or false")
            if plain and not url.startswith("http://"):
                raise ConfigError(f"{where}: allow_plain_http applies to http:// URLs; {url} is HTTPS")
            agents.append(AgentSpec(url, tpath, name, ca_path,
                                    None if pin is None else normalize_sha256(pin, where), plain))
        return cls(tuple(agents), allow, path)

    def select(self, names: list[str] | tuple[str, ...]) -> "FleetConfig":
        """The agents named (in the fleet's order); an unknown name lists the known ones."""
        if not names:
            return self
        known = {a.name: a for a in self.agents}
        unknown = [n for n in names if n not in known]
        if unknown:
            raise ConfigError(f"{self.path}: no agent named {', '.join(map(repr, unknown))}; agents: "
                              f"{', '.join(known)}")
        return dataclasses.replace(self, agents=tuple(a for a in self.agents if a.name in names))


AGENT_KEYS = ("url", "token_file", "name", "ca_file", "tls_sha256", "allow_plain_http")


@dataclass
class Probe:
    client: AgentClient
    info: dict | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.info is not None


@dataclass
class Job:
    id: str
    plan: Plan
    options: RunOptions
    attempts: int = 0


@dataclass
class JobsReport:
    done: int = 0
    reassigned: int = 0
    duplicates_ignored: int = 0
    retired: list[str] = field(default_factory=list)
    per_agent: dict[str, int] = field(default_factory=dict)


class Fleet:
    def __init__(self, clients: list[AgentClient], *, allow_mixed_hosts: bool = False, max_attempts: int = 5,
                 retire_after: int = 3, backoff_s: float = 0.5, busy_wait_s: float = 900.0):
        if not clients:
            raise FleetError("a fleet needs at least one agent")
        self.clients = clients
        self.allow_mixed_hosts = allow_mixed_hosts
        self.max_attempts = max_attempts
        self.retire_after = retire_after
        self.backoff_s = backoff_s
        self.busy_wait_s = busy_wait_s
        # Runs this controller started in an earlier life (e.g. before kill -9): when one still
        # occupies an agent, it is cancelled rather than waited for.
        self.owned_runs: set[str] = set()
        self._session: aiohttp.ClientSession | None = None

    @classmethod
    def from_file(cls, path: Path | str, *, allow_mixed_hosts: bool | None = None,
                  agents: list[str] | tuple[str, ...] = (), **kw) -> "Fleet":
        cfg = FleetConfig.load(path).select(agents)
        clients = [a.client() for a in cfg.agents]
        allow = cfg.allow_mixed_hosts if allow_mixed_hosts is None else allow_mixed_hosts
        return cls(clients, allow_mixed_hosts=allow, **kw)

    @classmethod
    def from_urls(cls, urls: list[str], token: str, **kw) -> "Fleet":
        return cls([AgentClient(u, token) for u in urls], **kw)

    async def __aenter__(self) -> "Fleet":
        self._share_session()
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    def _share_session(self) -> None:
        """One connection pool for the whole fleet (hundreds of agents, few sockets each)."""
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=0, limit_per_host=4),
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=10))
            for c in self.clients:
                c._session, c._own_session = self._session, False

    async def close(self) -> None:
        for c in self.clients:
            await c.close()
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def probe(self) -> list[Probe]:
        self._share_session()

        async def one(c: AgentClient) -> Probe:
            try:
                return Probe(c, await c.info())
            except MimesysError as e:
                return Probe(c, error=str(e))
        return list(await asyncio.gather(*(one(c) for c in self.clients)))

    def check_hosts(self, probes: list[Probe], *, bound: dict | None = None) -> dict:
        """The one hardware identity of the reachable agents (and of `bound`, a campaign's
        recorded identity). Differing hosts raise FleetError unless allow_mixed_hosts."""
        ok = [p for p in probes if p.ok]
        if not ok:
            raise FleetError("no agent answered: " + "; ".join(f"{p.client.name}: {p.error}" for p in probes))
        ref_name, ref = (("the campaign's recorded host", bound) if bound is not None else
                         (ok[0].client.name, hardware_identity(ok[0].info.get("fingerprint", {}))))
        catalogs = {p.info.get("catalog", {}).get("hash") for p in ok}
        if len(catalogs) > 1:
            raise FleetError(f"agents run different stressor catalogs: {sorted(map(str, catalogs))}")
        sims = {bool(p.info.get("simulated")) for p in ok}
        if len(sims) > 1:
            raise FleetError("the fleet mixes simulated and real agents; a dataset cannot mix them")
        for p in ok:
            ident = hardware_identity(p.info.get("fingerprint", {}))
            if ident != ref and not self.allow_mixed_hosts:
                raise FleetError(f"agent {p.client.name} has different hardware from {ref_name} "
                                 f"(fingerprint keys differ: {', '.join(_diff_keys(ident, ref))}); a dataset is "
                                 f"bound to one hardware fingerprint. Use separate campaigns, or allow mixing "
                                 f"explicitly (allow_mixed_hosts = true / --allow-mixed-hosts)")
        return ref

    async def _wait_host(self, c: AgentClient, waited_s: float) -> float | None:
        """Pause while another process holds c's host; the new total waited, or None once it
        exceeds busy_wait_s."""
        if waited_s >= self.busy_wait_s:
            log.warning("agent %s: its host stayed busy with another process's run for %.0f s: retired",
                        c.name, waited_s)
            return None
        pause = min(max(self.backoff_s, 0.5) * 2 ** min(int(waited_s // 10), 5), 15.0)
        log.info("agent %s: the host is running another process's plan; waiting %.1f s", c.name, pause)
        await asyncio.sleep(pause)
        return waited_s + pause

    async def run_jobs(self, jobs: list[Job], on_result: Callable[[Job, RunResult], Awaitable[None] | None],
                       *, agents: list[AgentClient] | None = None,
                       on_start: Callable[[Job, AgentClient, str], Awaitable[None] | None] | None = None
                       ) -> JobsReport:
        """Run every job once, one job per agent at a time. `on_result` is awaited exactly once
        per job id, in completion order. Raises FleetError if every agent is retired, or a job
        fails `max_attempts` times, or a job is rejected as invalid (a 4xx that is not retryable)."""
        self._share_session()
        agents = list(agents or self.clients)
        report = JobsReport(per_agent={c.name: 0 for c in agents})
        queue: list[Job] = list(reversed(jobs))
        done: set[str] = set()
        remaining = {j.id for j in jobs}
        changed = asyncio.Condition()
        fatal: list[BaseException] = []
        live = set(c.name for c in agents)

        async def take() -> Job | None:
            async with changed:
                while True:
                    if fatal or not remaining:
                        return None
                    if queue:
                        return queue.pop()
                    await changed.wait()

        async def give_back(job: Job) -> None:
            async with changed:
                queue.append(job)
                changed.notify_all()

        async def retire(c: AgentClient, why_all: str) -> None:
            report.retired.append(c.name)
            live.discard(c.name)
            if not live:
                fatal.append(FleetError(f"{why_all}; {len(remaining)} job(s) left"))
            async with changed:
                changed.notify_all()

        async def worker(c: AgentClient) -> None:
            consecutive = 0
            host_busy_s = 0.0
            while True:
                job = await take()
                if job is None:
                    return
                job.attempts += 1
                started = None if on_start is None else (lambda run_id, job=job: on_start(job, c, run_id))
                try:
                    result = await c.run(job.plan, job.options, on_start=started)
                except AgentBusy as e:
                    # Not this agent's failure: an orphan of ours is cancelled, anyone else's awaited.
                    job.attempts -= 1
                    await give_back(job)
                    if e.running in self.owned_runs:
                        log.info("agent %s runs %s, started by this campaign before a restart: cancelling",
                                 c.name, e.running)
                        with contextlib.suppress(AgentError):
                            await c.cancel(e.running)
                        self.owned_runs.discard(e.running)
                    elif not await c.wait_idle(e.running, self.busy_wait_s):
                        log.warning("agent %s stayed busy with run %s for %.0f s: retired", c.name, e.running,
                                    self.busy_wait_s)
                        await retire(c, "every agent failed or stayed busy")
                        return
                    continue
                except AgentError as e:
                    if isinstance(e, RunFailed) and e.details.get("reason") == "host_busy":
                        # Another process holds the host's run lock (another agent, a local replay):
                        # not this agent's failure; wait for the host with a growing pause.
                        job.attempts -= 1
                        await give_back(job)
                        host_busy_s = await self._wait_host(c, host_busy_s)
                        if host_busy_s is None:
                            await retire(c, "every agent failed or its host stayed busy")
                            return
                        continue
                    if not e.retryable:
                        fatal.append(FleetError(f"job {job.id} rejected by {c.name}: {e}"))
                        async with changed:
                            changed.notify_all()
                        return
                    consecutive += 1
                    log.warning("job %s failed on %s (attempt %d): %s", job.id, c.name, job.attempts, e)
                    if job.attempts >= self.max_attempts:
                        fatal.append(FleetError(f"job {job.id} failed {job.attempts} times; last: {e}"))
                    else:
                        report.reassigned += 1
                    await give_back(job)
                    if consecutive >= self.retire_after:
                        log.warning("agent %s retired after %d consecutive failures", c.name, consecutive)
                        await retire(c, "every agent failed")
                        return
                    await asyncio.sleep(self.backoff_s * 2 ** (consecutive - 1))
                    continue
                consecutive, host_busy_s = 0, 0.0
                if job.id in done:
                    report.duplicates_ignored += 1
                    continue
                done.add(job.id)
                out = on_result(job, result)
                if asyncio.iscoroutine(out):
                    await out
                report.done += 1
                report.per_agent[c.name] = report.per_agent.get(c.name, 0) + 1
                async with changed:
                    remaining.discard(job.id)
                    changed.notify_all()

        tasks = [asyncio.create_task(worker(c), name=f"fleet-{c.name}") for c in agents]
        try:
            await asyncio.gather(*tasks)
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        if fatal:
            raise fatal[0]
        return report
