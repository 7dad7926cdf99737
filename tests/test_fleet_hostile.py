"""The fleet client against a hostile or broken agent (issue 16): replies and trace files are
read with a size bound, WebSocket frames are bounded and validated field by field, and one
malformed window frame costs that window (fetched from the recorded trace), not the run."""

from __future__ import annotations

import asyncio
import contextlib

import numpy as np
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from mimesys import wire
from mimesys.backend import RunOptions
from mimesys.errors import ValidationError
from mimesys.metrics import MetricSpec
from mimesys.trace import Trace
from controller.fleet import AgentClient, AgentError, _window_from_frame
from test_api import cpu_plan

TOKEN = "hostile-test-token-0123456789"
METRICS = [MetricSpec("cpu.util", "fraction")]


@contextlib.asynccontextmanager
async def fake_agent(routes):
    app = web.Application()
    for method, path, handler in routes:
        app.router.add_route(method, path, handler)
    async with TestServer(app, host="127.0.0.1") as server:
        yield str(server.make_url(""))


def test_an_oversized_reply_is_refused_as_it_arrives(monkeypatch):
    import controller.fleet.connection as fleet_connection
    monkeypatch.setattr(fleet_connection, "MAX_REPLY_BYTES", 1 << 20)

    async def huge(request):
        resp = web.StreamResponse()
        await resp.prepare(request)
        for _ in range(64):                      # 64 MiB, chunked: no Content-Length to trust
            await resp.write(b"\0" * (1 << 20))
        return resp

    async def main():
        async with fake_agent([("GET", "/v1/info", huge)]) as url:
            c = AgentClient(url, TOKEN)
            try:
                with pytest.raises(AgentError, match="more than 1048576 bytes"):
                    await c.info()
            finally:
                await c.close()
    asyncio.run(main())


@pytest.mark.parametrize("bad", [
    {"repetition": "0", "window": 0, "values": b"\0" * 4},
    {"repetition": 0, "window": 99, "values": b"\0" * 4},
    {"repetition": 0, "window": 0, "values": b"\0" * 12},
    {"repetition": 0, "window": 0, "values": "text"},
    {"repetition": 0, "window": 0, "values": b"\0" * 4, "shape": [1 << 20, 1 << 20], "ran_ns": b""},
    {"repetition": 0, "window": 0, "values": b"\0" * 4, "shape": [18, 2], "ran_ns": b"\0" * 8},
    {"window": 0, "values": b"\0" * 4},
])
def test_malformed_window_frames_are_validation_errors(catalog, bad):
    plan = cpu_plan(catalog, [[0.1, 0.1]] * 3)
    with pytest.raises(ValidationError):
        _window_from_frame({"type": "window", **bad}, 1, plan, RunOptions())


def test_one_malformed_frame_costs_a_window_not_the_run(catalog):
    plan = cpu_plan(catalog, [[0.1, 0.1]] * 3)
    trace = Trace(np.array([[0.1], [0.2], [0.3]], np.float32), METRICS,
                  window_start_ns=np.arange(3, dtype=np.int64) * 10**9)

    async def create(request):
        return web.Response(status=201, body=wire.pack({"run_id": "20260101T000000Z-abcdef", "windows_total": 3}))

    async def stream(request):
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        await ws.send_bytes(wire.pack({"type": "header", "metrics": [m.to_dict() for m in METRICS], "window_s": 1.0}))
        await ws.send_bytes(wire.pack({"type": "window", "repetition": 0, "window": 0, "start_ns": 0,
                                       "values": wire.vec_to_bytes(np.array([0.1]))}))
        await ws.send_bytes(wire.pack({"type": "window", "repetition": 0, "window": "1", "values": None}))
        await ws.send_bytes(wire.pack({"type": "window", "repetition": 0, "window": 2, "start_ns": 2 * 10**9,
                                       "values": wire.vec_to_bytes(np.array([0.3]))}))
        await ws.send_bytes(wire.pack({"type": "end", "state": "done"}))
        await ws.close()
        return ws

    async def recorded(request):
        from mimesys import tracestream
        return web.Response(body=b"".join(tracestream.trace_messages(trace)))

    async def main():
        routes = [("POST", "/v1/runs", create), ("GET", "/v1/runs/{id}/trace", stream),
                  ("GET", "/v1/runs/{id}/trace.msgpack", recorded)]
        async with fake_agent(routes) as url:
            c = AgentClient(url, TOKEN)
            try:
                result = await c.run(plan, RunOptions())
            finally:
                await c.close()
        return result
    result = asyncio.run(main())
    np.testing.assert_allclose(result.trace.values[:, 0], [0.1, 0.2, 0.3])
