"""The agent's HTTP API: one app factory (app.py), one route table (routes.py), thin
handlers (handlers.py), /metrics (prometheus.py); the auth/size/error middleware and the
request bodies are the core's, shared with `mimesys serve` (mimesys/api/)."""

from .app import create_app

__all__ = ["create_app"]
