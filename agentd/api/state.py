"""Typed application state (web.AppKey): what handlers may take from the app."""

from __future__ import annotations

from aiohttp import web

from mimesys.backend import Backend
from mimesys.catalog import Catalog

from ..config import Config
from ..runs import RunManager
from .looplag import LoopLag
from .monitor import MonitorHub

CONFIG = web.AppKey("config", Config)
BACKEND = web.AppKey("backend", Backend)
CATALOG = web.AppKey("catalog", Catalog)
RUNS = web.AppKey("runs", RunManager)
MONITOR = web.AppKey("monitor", MonitorHub)
GENERATOR = web.AppKey("generator", dict)        # {"generator": loaded or None, "lock": asyncio.Lock}
STARTED_AT = web.AppKey("started_at", float)     # time.monotonic() at start
LOOP_LAG = web.AppKey("loop_lag", LoopLag)      # how late the event loop wakes
