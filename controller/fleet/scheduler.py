"""Many agents: Fleet (probe, one hardware identity, run_jobs fanning jobs out to one worker per
agent, worker.py, with reassignment when an agent fails; the rules in the package docstring)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Awaitable, Callable

from mimesys.errors import MimesysError
from mimesys.hardware import hardware_identity

from .client import AgentClient
from .config import FleetConfig
from .connection import SharedSession
from .errors import FleetError
from .jobs import Job, JobQueue, JobsReport
from .runstream import RunResult
from .worker import AgentWorker, RetryRules


def _diff_keys(a: dict, b: dict) -> list[str]:
    return sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))


@dataclass
class Probe:
    client: AgentClient
    info: dict | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.info is not None


class Fleet:
    def __init__(self, clients: list[AgentClient], *, allow_mixed_hosts: bool = False, max_attempts: int = 5,
                 retire_after: int = 3, backoff_s: float = 0.5, busy_wait_s: float = 900.0):
        if not clients:
            raise FleetError("a fleet needs at least one agent")
        self.clients = clients
        self.allow_mixed_hosts = allow_mixed_hosts
        self.rules = RetryRules(max_attempts, retire_after, backoff_s, busy_wait_s)
        # Runs this controller started in an earlier life (e.g. before kill -9): when one still
        # occupies an agent, it is cancelled rather than waited for.
        self.owned_runs: set[str] = set()
        self._pool = SharedSession(clients)

    @classmethod
    def from_file(cls, path: Path | str, *, allow_mixed_hosts: bool | None = None,
                  agents: list[str] | tuple[str, ...] = (), allow_plain_http: bool = False, **kw) -> "Fleet":
        """`allow_plain_http`: the command line's --allow-plain-http (controller/tokens.py)."""
        cfg = FleetConfig.load(path).select(agents)
        clients = [a.client(allow_plain_http=allow_plain_http) for a in cfg.agents]
        allow = cfg.allow_mixed_hosts if allow_mixed_hosts is None else allow_mixed_hosts
        return cls(clients, allow_mixed_hosts=allow, **kw)

    @classmethod
    def from_urls(cls, urls: list[str], token: str, **kw) -> "Fleet":
        return cls([AgentClient(u, token) for u in urls], **kw)

    async def __aenter__(self) -> "Fleet":
        self._pool.share()
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    async def close(self) -> None:
        await self._pool.close()

    async def probe(self) -> list[Probe]:
        self._pool.share()

        async def one(c: AgentClient) -> Probe:
            try:
                return Probe(c, await c.info())
            except MimesysError as e:
                return Probe(c, error=str(e))
        return list(await asyncio.gather(*(one(c) for c in self.clients)))

    def check_hosts(self, probes: list[Probe], *, bound: dict | None = None) -> dict:
        """The one hardware identity of the reachable agents (and of `bound`, a campaign's
        recorded identity). Differing hosts raise FleetError unless allow_mixed_hosts."""
        ok = [p for p in probes if p.ok]
        if not ok:
            raise FleetError("no agent answered: " + "; ".join(f"{p.client.name}: {p.error}" for p in probes))
        ref_name, ref = (("the campaign's recorded host", bound) if bound is not None else
                         (ok[0].client.name, hardware_identity(ok[0].info.get("fingerprint", {}))))
        catalogs = {p.info.get("catalog", {}).get("hash") for p in ok}
        if len(catalogs) > 1:
            raise FleetError(f"agents run different stressor catalogs: {sorted(map(str, catalogs))}")
        sims = {bool(p.info.get("simulated")) for p in ok}
        if len(sims) > 1:
            raise FleetError("the fleet mixes simulated and real agents; a dataset cannot mix them")
        for p in ok:
            ident = hardware_identity(p.info.get("fingerprint", {}))
            if ident != ref and not self.allow_mixed_hosts:
                raise FleetError(f"agent {p.client.name} has different hardware from {ref_name} "
                                 f"(fingerprint keys differ: {', '.join(_diff_keys(ident, ref))}); a dataset is "
                                 f"bound to one hardware fingerprint. Use separate campaigns, or allow mixing "
                                 f"explicitly (allow_mixed_hosts = true / --allow-mixed-hosts)")
        return ref

    async def run_jobs(self, jobs: list[Job], on_result: Callable[[Job, RunResult], Awaitable[None] | None],
                       *, agents: list[AgentClient] | None = None,
                       on_start: Callable[[Job, AgentClient, str], Awaitable[None] | None] | None = None
                       ) -> JobsReport:
        """Run every job once, one job per agent at a time. `on_result` is awaited exactly once
        per job id, in completion order. Raises FleetError if every agent is retired, or a job
        fails `max_attempts` times, or a job is rejected as invalid (a 4xx that is not retryable)."""
        self._pool.share()
        agents = list(agents or self.clients)
        shared = JobQueue(jobs, agents)
        tasks = [asyncio.create_task(AgentWorker(c, shared, self.rules, self.owned_runs, on_result, on_start).run(),
                                     name=f"fleet-{c.name}") for c in agents]
        try:
            await asyncio.gather(*tasks)
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        if shared.fatal:
            raise shared.fatal[0]
        return shared.report
