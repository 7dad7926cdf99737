"""The jobs of one Fleet.run_jobs call: Job, the JobsReport it returns, and the JobQueue its
agents' workers share (worker.py)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Awaitable, Callable

from mimesys.backend import RunOptions
from mimesys.plan import Plan

from .client import AgentClient
from .errors import FleetError
from .runstream import RunResult


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


class JobQueue:
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

    async def deliver(self, agent: str, job: Job, result: RunResult,
                      on_result: Callable[[Job, RunResult], Awaitable[None] | None]) -> None:
        """A job's result handed to on_result, once per job id (a duplicate is counted, not
        handed on)."""
        report = self.report
        if job.id in self.done:
            report.duplicates_ignored += 1
            return
        self.done.add(job.id)
        out = on_result(job, result)
        if asyncio.iscoroutine(out):
            await out
        report.done += 1
        report.per_agent[agent] = report.per_agent.get(agent, 0) + 1
        await self.finished(job)
