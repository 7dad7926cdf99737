"""The plumbing under AgentClient: one agent's URL, token and HTTP session, requests whose
replies are read bounded, and a refused TLS identity turned into a clear, final error."""

from __future__ import annotations

import asyncio

import aiohttp

from mimesys import tracestream, wire
from mimesys.errors import MimesysError, ValidationError
from mimesys.trace import Trace

from .errors import AgentError, TLSIdentityError

MAX_REPLY_BYTES = 16 << 20     # a JSON-like reply (info, status) from an agent
MAX_TRACE_BYTES = 2 << 30      # the recorded trace of one run (its values)
MAX_FRAME_BYTES = 8 << 20      # one WebSocket frame (a window is a few KiB; the header carries the fingerprint)


class AgentConnection:
    """One agent's address and credentials. Cheap to build; the HTTP session opens on first use
    (inside the event loop)."""

    def __init__(self, url: str, token: str, *, name: str = "", session: aiohttp.ClientSession | None = None,
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

    async def _request(self, method: str, path: str, body: dict | None = None, *, timeout_s: float = 30.0) -> dict:
        data = wire.pack(body) if body is not None else None
        try:
            async with self.session().request(method, self.url + path, data=data, headers=self.headers,
                                              timeout=aiohttp.ClientTimeout(total=timeout_s), ssl=self.ssl) as resp:
                raw = await _read_bounded(resp, MAX_REPLY_BYTES, f"{self.name} {method} {path} reply")
                status = resp.status
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as e:
            self.raise_tls(e, f"{method} {path}")
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

    async def _get_trace(self, path: str, what_trace: str) -> Trace:
        """A trace streamed as bounded msgpack messages (mimesys/tracestream.py)."""
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
            self.raise_tls(e, what)
            raise AgentError(self.name, f"{what}: {e}") from None
        except ValidationError as e:
            raise AgentError(self.name, f"{what}: {e}") from None

    def raise_tls(self, e: BaseException, what: str) -> None:
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


class SharedSession:
    """One connection pool for many agents (hundreds of agents, few sockets each), handed to
    each client in place of its own session; closing it closes the clients too."""

    def __init__(self, clients: list[AgentConnection]):
        self.clients = clients
        self._session: aiohttp.ClientSession | None = None

    def share(self) -> None:
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


def _colon_hex(b: bytes) -> str:
    return ":".join(f"{x:02X}" for x in b)


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
