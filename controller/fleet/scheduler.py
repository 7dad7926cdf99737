"""Many agents: Fleet (probe, one hardware identity, run_jobs fanning jobs out with
reassignment when an agent fails; the rules in the package docstring)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Awaitable, Callable

import aiohttp

from mimesys.backend import RunOptions
from mimesys.errors import MimesysError
from mimesys.hardware import hardware_identity
from mimesys.plan import Plan

from .client import AgentClient
from .runstream import RunResult
from .config import FleetConfig
from .errors import AgentBusy, AgentError, FleetError, RunFailed

log = logging.getLogger(__name__)


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


@dataclass
class Job:
    id: str
    plan: Plan
    options: RunOptions
    attempts: int = 0


@dataclass
class JobsReport:
    done: int = 0
    reassigned: int = 0
    duplicates_ignored: int = 0
    retired: list[str] = field(default_factory=list)
    per_agent: dict[str, int] = field(default_factory=dict)


class _JobQueue:
    """The jobs of one run_jobs call as its agents' workers share them: the queue, which ids are
    done and which remain, the agents still live, and the first errors that end the call."""

    def __init__(self, jobs: list[Job], agents: list[AgentClient]):
        self.report = JobsReport(per_agent={c.name: 0 for c in agents})
        self.queue: list[Job] = list(reversed(jobs))
        self.done: set[str] = set()
        self.remaining = {j.id for j in jobs}
        self.changed = asyncio.Condition()
        self.fatal: list[BaseException] = []
        self.live = set(c.name for c in agents)

    async def take(self) -> Job | None:
        """The next job, waiting for one given back; None once every job is done or one failed."""
        async with self.changed:
            while True:
                if self.fatal or not self.remaining:
                    return None
                if self.queue:
                    return self.queue.pop()
                await self.changed.wait()

    async def give_back(self, job: Job) -> None:
        async with self.changed:
            self.queue.append(job)
            self.changed.notify_all()

    async def retire(self, c: AgentClient, why_all: str) -> None:
        """c takes no more jobs; the last live agent retired is fatal (why_all says why)."""
        self.report.retired.append(c.name)
        self.live.discard(c.name)
        if not self.live:
            self.fatal.append(FleetError(f"{why_all}; {len(self.remaining)} job(s) left"))
        async with self.changed:
            self.changed.notify_all()

    async def fail(self, error: FleetError) -> None:
        self.fatal.append(error)
        async with self.changed:
            self.changed.notify_all()

    async def finished(self, job: Job) -> None:
        async with self.changed:
            self.remaining.discard(job.id)
            self.changed.notify_all()


class Fleet:
    def __init__(self, clients: list[AgentClient], *, allow_mixed_hosts: bool = False, max_attempts: int = 5,
                 retire_after: int = 3, backoff_s: float = 0.5, busy_wait_s: float = 900.0):
        if not clients:
            raise FleetError("a fleet needs at least one agent")
        self.clients = clients
        self.allow_mixed_hosts = allow_mixed_hosts
        self.max_attempts = max_attempts
        self.retire_after = retire_after
        self.backoff_s = backoff_s
        self.busy_wait_s = busy_wait_s
        # Runs this controller started in an earlier life (e.g. before kill -9): when one still
        # occupies an agent, it is cancelled rather than waited for.
        self.owned_runs: set[str] = set()
        self._session: aiohttp.ClientSession | None = None

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
        self._share_session()
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    def _share_session(self) -> None:
        """One connection pool for the whole fleet (hundreds of agents, few sockets each)."""
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=0, limit_per_host=4),
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=10))
            for c in self.clients:
                c._session, c._own_session = self._session, False

    async def close(self) -> None:
        for c in self.clients:
            await c.close()
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def probe(self) -> list[Probe]:
        self._share_session()

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

    async def _wait_host(self, c: AgentClient, waited_s: float) -> float | None:
        """Pause while another process holds c's host; the new total waited, or None once it
        exceeds busy_wait_s."""
        if waited_s >= self.busy_wait_s:
            log.warning("agent %s: its host stayed busy with another process's run for %.0f s: retired",
                        c.name, waited_s)
            return None
        pause = min(max(self.backoff_s, 0.5) * 2 ** min(int(waited_s // 10), 5), 15.0)
        log.info("agent %s: the host is running another process's plan; waiting %.1f s", c.name, pause)
        await asyncio.sleep(pause)
        return waited_s + pause

    async def run_jobs(self, jobs: list[Job], on_result: Callable[[Job, RunResult], Awaitable[None] | None],
                       *, agents: list[AgentClient] | None = None,
                       on_start: Callable[[Job, AgentClient, str], Awaitable[None] | None] | None = None
                       ) -> JobsReport:
        """Run every job once, one job per agent at a time. `on_result` is awaited exactly once
        per job id, in completion order. Raises FleetError if every agent is retired, or a job
        fails `max_attempts` times, or a job is rejected as invalid (a 4xx that is not retryable)."""
        self._share_session()
        agents = list(agents or self.clients)
        shared = _JobQueue(jobs, agents)
        tasks = [asyncio.create_task(self._work(c, shared, on_result, on_start), name=f"fleet-{c.name}")
                 for c in agents]
        try:
            await asyncio.gather(*tasks)
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        if shared.fatal:
            raise shared.fatal[0]
        return shared.report

    async def _work(self, c: AgentClient, shared: _JobQueue,
                    on_result: Callable[[Job, RunResult], Awaitable[None] | None],
                    on_start: Callable[[Job, AgentClient, str], Awaitable[None] | None] | None) -> None:
        """One agent's worker: jobs taken one at a time until none is left, the run fails for
        good, or the agent is retired."""
        consecutive = 0
        host_busy_s = 0.0
        while True:
            job = await shared.take()
            if job is None:
                return
            job.attempts += 1
            started = None if on_start is None else (lambda run_id, job=job: on_start(job, c, run_id))
            try:
                result = await c.run(job.plan, job.options, on_start=started)
            except AgentBusy as e:
                # Not this agent's failure: an orphan of ours is cancelled, anyone else's awaited.
                job.attempts -= 1
                await shared.give_back(job)
                if not await self._agent_busy(c, e, shared):
                    return
                continue
            except AgentError as e:
                if isinstance(e, RunFailed) and e.details.get("reason") == "host_busy":
                    # Another process holds the host's run lock (another agent, a local replay):
                    # not this agent's failure; wait for the host with a growing pause.
                    job.attempts -= 1
                    await shared.give_back(job)
                    host_busy_s = await self._wait_host(c, host_busy_s)
                    if host_busy_s is None:
                        await shared.retire(c, "every agent failed or its host stayed busy")
                        return
                    continue
                consecutive += 1
                if not await self._job_failed(c, job, e, consecutive, shared):
                    return
                continue
            consecutive, host_busy_s = 0, 0.0
            await self._job_done(c, job, result, shared, on_result)

    async def _agent_busy(self, c: AgentClient, e: AgentBusy, shared: _JobQueue) -> bool:
        """The agent runs something else: an orphan of this campaign's is cancelled, anyone
        else's awaited up to busy_wait_s. False where the agent is retired for it."""
        if e.running in self.owned_runs:
            log.info("agent %s runs %s, started by this campaign before a restart: cancelling",
                     c.name, e.running)
            with contextlib.suppress(AgentError):
                await c.cancel(e.running)
            self.owned_runs.discard(e.running)
        elif not await c.wait_idle(e.running, self.busy_wait_s):
            log.warning("agent %s stayed busy with run %s for %.0f s: retired", c.name, e.running,
                        self.busy_wait_s)
            await shared.retire(c, "every agent failed or stayed busy")
            return False
        return True

    async def _job_failed(self, c: AgentClient, job: Job, e: AgentError, consecutive: int,
                          shared: _JobQueue) -> bool:
        """A job failed on c, its consecutive-th failure in a row there: rejected for good (a 4xx
        that is not retryable), or given back to be tried again after a growing pause, up to
        max_attempts; the agent retired after retire_after in a row. False where c's worker ends."""
        if not e.retryable:
            await shared.fail(FleetError(f"job {job.id} rejected by {c.name}: {e}"))
            return False
        log.warning("job %s failed on %s (attempt %d): %s", job.id, c.name, job.attempts, e)
        if job.attempts >= self.max_attempts:
            shared.fatal.append(FleetError(f"job {job.id} failed {job.attempts} times; last: {e}"))
        else:
            shared.report.reassigned += 1
        await shared.give_back(job)
        if consecutive >= self.retire_after:
            log.warning("agent %s retired after %d consecutive failures", c.name, consecutive)
            await shared.retire(c, "every agent failed")
            return False
        await asyncio.sleep(self.backoff_s * 2 ** (consecutive - 1))
        return True

    @staticmethod
    async def _job_done(c: AgentClient, job: Job, result: RunResult, shared: _JobQueue,
                        on_result: Callable[[Job, RunResult], Awaitable[None] | None]) -> None:
        """A job's result handed to on_result, once per job id (a duplicate is counted, not
        handed on)."""
        report = shared.report
        if job.id in shared.done:
            report.duplicates_ignored += 1
            return
        shared.done.add(job.id)
        out = on_result(job, result)
        if asyncio.iscoroutine(out):
            await out
        report.done += 1
        report.per_agent[c.name] = report.per_agent.get(c.name, 0) + 1
        await shared.finished(job)
