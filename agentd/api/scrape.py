"""/metrics over HTTP: the thin side of the agent's Prometheus output (the families are
agentd/prometheus/). The registry reads the app's live objects at scrape time; Scrapes says
how a scrape is rendered."""

from __future__ import annotations

import asyncio
import concurrent.futures

from aiohttp import web
from prometheus_client import CollectorRegistry, generate_latest

from mimesys.errors import MimesysError

from ..prometheus.families import AgentSources, create_registry as _create_registry
from .state import BACKEND, LOOP_LAG, MONITOR, RUNS

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
REGISTRY = web.AppKey("metrics_registry", CollectorRegistry)


class TooManyScrapes(MimesysError):
    http_status = 503


class Scrapes:
    """How /metrics is rendered: on one thread of its own (never the default executor, which
    decodes bodies and writes a finished run's trace), at most `max_requests` scrapes in the
    agent at once (503 beyond, like Prometheus's --web.max-requests), and a scrape that arrives
    while a render is under way takes that render's text instead of starting another. A flood
    of public scrapes therefore costs one render at a time, whatever its size."""

    def __init__(self, max_requests: int):
        self.max_requests = max_requests
        self.executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="metrics")
        self.in_agent = 0          # scrapes being answered now
        self.refused = 0           # scrapes answered 503, over the agent's lifetime
        self.renders = 0           # renders started (fewer than scrapes under a flood)
        self._render: asyncio.Future | None = None

    async def render(self, app: web.Application) -> bytes:
        if self.in_agent >= self.max_requests:
            self.refused += 1
            raise TooManyScrapes(f"{self.in_agent} /metrics scrapes are being answered; the limit is "
                                 f"api.metrics_max_requests = {self.max_requests}")
        self.in_agent += 1
        try:
            if self._render is None:
                self.renders += 1
                fut = asyncio.get_running_loop().run_in_executor(self.executor, render, app)
                self._render = fut
                fut.add_done_callback(self._done)
            # shield: a scraper that hangs up must not cancel the render the others wait for
            return await asyncio.shield(self._render)
        finally:
            self.in_agent -= 1

    def _done(self, fut: asyncio.Future) -> None:
        if self._render is fut:
            self._render = None
        if not fut.cancelled():
            fut.exception()        # retrieved: an error reaches its waiters, not the loop's log

    def close(self) -> None:
        self.executor.shutdown(wait=False, cancel_futures=True)


SCRAPES = web.AppKey("metrics_scrapes", Scrapes)




def create_registry(app: web.Application) -> CollectorRegistry:
    return _create_registry(lambda: AgentSources(app[RUNS], app[MONITOR], app[BACKEND], app[LOOP_LAG],
                                                 app.get(SCRAPES)))


def render(app: web.Application) -> bytes:
    return generate_latest(app[REGISTRY])
