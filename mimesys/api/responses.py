"""The API's answers: a msgpack map (`reply`) or an error map (`error_response`), one shape for
the agent's API and the controller's inference server."""

from __future__ import annotations

from aiohttp import web

from .. import wire


def reply(obj: dict, status: int = 200) -> web.Response:
    return web.Response(status=status, body=wire.pack(obj), content_type=wire.CONTENT_TYPE)


def error_response(status: int, message: str, details: dict | None = None) -> web.Response:
    headers = {"WWW-Authenticate": 'Bearer realm="mimesys-agent"'} if status == 401 else None
    return web.Response(status=status, body=wire.pack({"error": message, **(details or {})}),
                        content_type=wire.CONTENT_TYPE, headers=headers)
