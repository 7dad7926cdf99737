"""The one app factory: the production agent (`serve`) and every test build the app here.

Long-lived resources are cleanup_ctx generators, started in order and stopped in reverse:
the backend (closed last), the run manager (a running run is cancelled at shutdown) and
the monitor hub (its clients get an end frame).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import time
from typing import AsyncIterator

from aiohttp import web

from mimesys.api.middleware import MAX_BODY, auth_middleware, errors_middleware, size_middleware
from mimesys.backend import Backend
from mimesys.catalog import Catalog, load_catalog

from ..config import Config
from ..runs import RunManager
from . import scrape
from .monitor import MonitorHub
from .routes import setup_routes
from .looplag import LoopLag
from .state import BACKEND, CATALOG, CONFIG, GENERATOR, LOOP_LAG, MONITOR, RUNS, STARTED_AT


def create_app(config: Config, backend: Backend, *, token: bytes | None = None,
               catalog: Catalog | None = None, metrics_token: bytes | None = None) -> web.Application:
    """The agent's aiohttp application. The app owns `backend` from here on and closes it
    at shutdown. `token` defaults to the contents of config.api.token_file, `metrics_token`
    (read-only: /metrics only) to that of config.api.metrics_token_file."""
    token = token if token is not None else config.read_token()
    if metrics_token is None and config.api.metrics_token_file is not None:
        metrics_token = config.read_metrics_token()
    auth = auth_middleware(token, config.api.public_healthz, metrics_token=metrics_token,
                           public_metrics=config.api.public_metrics)
    app = web.Application(
        middlewares=[errors_middleware, auth, size_middleware],
        client_max_size=config.api.max_body_bytes,
    )
    app[CONFIG] = config
    app[BACKEND] = backend
    app[CATALOG] = catalog if catalog is not None else load_catalog(config.agent.catalog)
    app[MAX_BODY] = config.api.max_body_bytes
    app[GENERATOR] = {"generator": None, "lock": asyncio.Lock(), "busy": asyncio.Lock(),
                      "executor": concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="generate")}
    app[STARTED_AT] = time.monotonic()
    app[LOOP_LAG] = LoopLag()
    app[scrape.REGISTRY] = scrape.create_registry(app)
    app[scrape.SCRAPES] = scrape.Scrapes(config.api.metrics_max_requests)
    app.cleanup_ctx.extend([_loop_lag_ctx, _backend_ctx, _runs_ctx, _monitor_ctx])
    app.on_shutdown.append(_end_streams)
    setup_routes(app)
    return app


async def _end_streams(app: web.Application) -> None:
    """Before the server waits for open handlers: cancel the run and end every stream, so
    WebSocket clients get their end frame and shutdown does not wait on them."""
    await app[RUNS].close()
    await app[MONITOR].close()


async def _loop_lag_ctx(app: web.Application) -> AsyncIterator[None]:
    app[LOOP_LAG].start()
    yield
    await app[LOOP_LAG].stop()


async def _backend_ctx(app: web.Application) -> AsyncIterator[None]:
    yield
    app[GENERATOR]["executor"].shutdown(wait=False, cancel_futures=True)
    app[scrape.SCRAPES].close()
    await app[BACKEND].close()


async def _runs_ctx(app: web.Application) -> AsyncIterator[None]:
    cfg = app[CONFIG]
    backend = app[BACKEND]
    # A backend may describe fewer threads than this host's CPUs (the simulated host).
    max_threads = (getattr(backend, "max_threads", None) or backend.info().fingerprint.get("threads")
                   or len(cfg.agent.resolved_cpus()))
    app[RUNS] = RunManager(backend, app[CATALOG], state_dir=cfg.agent.state_dir, max_threads=max_threads,
                           keep=cfg.runs.keep, stream_buffer_bytes=cfg.runs.stream_buffer_mib << 20,
                           max_duration_s=cfg.runs.max_duration_s, max_window_threads=cfg.runs.max_window_threads)
    yield
    await app[RUNS].close()


async def _monitor_ctx(app: web.Application) -> AsyncIterator[None]:
    cfg = app[CONFIG]
    app[MONITOR] = MonitorHub(app[BACKEND], interval_s=cfg.monitor.interval_s,
                              client_queue=cfg.monitor.client_queue, max_clients=cfg.monitor.max_clients)
    yield
    await app[MONITOR].close()
