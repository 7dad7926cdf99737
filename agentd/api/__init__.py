"""The agent's HTTP API: one app factory (app.py), one route table (routes.py), thin
handlers (handlers.py), auth/size/error middleware (middleware.py)."""

from .app import create_app

__all__ = ["create_app"]
