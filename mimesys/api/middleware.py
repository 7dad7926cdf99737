"""The three middlewares, outermost first: errors → auth → body size.

- errors: the ONE place where exceptions become HTTP statuses. mimesys.errors exceptions
  carry `http_status` (and optionally `details`, merged into the body); aiohttp's own HTTP
  errors (404 route, 405 method, 413 from client_max_size) keep their status; anything
  else is a bug: logged with its traceback and answered 500 without internals.
  Error bodies are msgpack maps {"v", "error": message, **details}.
- auth: `Authorization: Bearer <token>` on every request, WebSocket upgrades included,
  compared in constant time (hmac.compare_digest). /healthz may be public (config). /metrics
  is a read-only scrape: public with api.public_metrics, else the run token or the metrics
  token (api.metrics_token_file), which opens /metrics and nothing else.
- size: a declared Content-Length above the limit is refused before reading (413);
  chunked bodies are cut off by aiohttp's client_max_size while reading (also 413).
"""

from __future__ import annotations

import asyncio
import hmac
import logging

from aiohttp import web

from ..errors import AuthError, MimesysError, PayloadTooLarge
from .responses import error_response

log = logging.getLogger(__name__)


@web.middleware
async def errors_middleware(request: web.Request, handler):
    try:
        return await handler(request)
    except MimesysError as e:
        if e.http_status == 503:
            # Load shed on purpose (scrapes or monitor clients over their cap): a line per
            # refusal would turn a flood into a log flood.
            log.debug("%s %s: %s", request.method, request.path, e)
        elif e.http_status >= 500:
            log.error("%s %s: %s", request.method, request.path, e)
        return error_response(e.http_status, str(e), getattr(e, "details", None))
    except web.HTTPException as e:
        if e.status < 400:
            raise
        if e.status == 413:
            return error_response(413, f"request body exceeds the limit of {request.app[MAX_BODY]} bytes")
        if e.text and not e.text.startswith(f"{e.status}:"):
            return error_response(e.status, e.text)
        return error_response(e.status, f"{e.reason}: {request.method} {request.path}")
    except (asyncio.CancelledError, ConnectionResetError):
        raise
    except Exception:
        log.exception("%s %s failed", request.method, request.path)
        return error_response(500, "internal error in the agent (its log has the details)")


def auth_middleware(token: bytes, public_healthz: bool, *, metrics_token: bytes | None = None,
                    public_metrics: bool = False):
    if not token or metrics_token == b"":
        raise ValueError("an empty API token would let everyone in")

    @web.middleware
    async def auth(request: web.Request, handler):
        scrape = request.path == "/metrics"
        if (public_healthz and request.path == "/healthz") or (public_metrics and scrape):
            return await handler(request)
        header = request.headers.get("Authorization")
        if header is None:
            raise AuthError("missing Authorization header; send 'Authorization: Bearer <token>'")
        scheme, _, credential = header.partition(" ")
        given = credential.strip().encode("utf-8", "surrogateescape")
        # Compare even for a wrong scheme, so timing does not tell the two failures apart.
        ok = hmac.compare_digest(given, token)
        read_only = metrics_token is not None and hmac.compare_digest(given, metrics_token)
        if scheme.lower() != "bearer" or not (ok or read_only):
            raise AuthError("invalid bearer token")
        if read_only and not ok and not scrape:
            raise AuthError("the metrics token only reads /metrics")
        return await handler(request)

    return auth


MAX_BODY = web.AppKey("max_body_bytes", int)


@web.middleware
async def size_middleware(request: web.Request, handler):
    limit = request.app[MAX_BODY]
    if request.content_length is not None and request.content_length > limit:
        raise PayloadTooLarge(f"request body of {request.content_length} bytes exceeds the limit of {limit} bytes")
    return await handler(request)
