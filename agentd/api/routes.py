"""The route table: every endpoint of the agent's HTTP API (docs/design.md, "HTTP API")."""

from __future__ import annotations

from aiohttp import web

from . import handlers


def setup_routes(app: web.Application) -> None:
    app.add_routes([
        web.get("/v1/info", handlers.info),
        web.post("/v1/runs", handlers.create_run),
        web.get("/v1/runs/{run_id}", handlers.get_run),
        web.delete("/v1/runs/{run_id}", handlers.delete_run),
        web.get("/v1/runs/{run_id}/trace.msgpack", handlers.get_run_trace),
        web.get("/v1/runs/{run_id}/trace", handlers.run_trace_ws),      # WebSocket
        web.get("/v1/monitor", handlers.monitor_ws),                    # WebSocket
        web.get("/v1/profile", handlers.get_profile),
        web.post("/v1/generate", handlers.generate),
        web.get("/healthz", handlers.healthz),
        web.get("/metrics", handlers.metrics),
    ])
