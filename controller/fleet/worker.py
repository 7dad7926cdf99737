"""One agent's worker in Fleet.run_jobs: it takes jobs from the shared JobQueue one at a time
and decides what a failure means: a busy agent (an orphan of ours cancelled, anyone else's run
awaited), a busy host (waited for with a growing pause), a job rejected for good, or one given
back to be tried again, the agent retired after too many failures in a row."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from typing import Awaitable, Callable

from .client import AgentClient
from .errors import AgentBusy, AgentError, FleetError, RunFailed
from .jobs import Job, JobQueue
from .runstream import RunResult

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RetryRules:
    max_attempts: int = 5              # a job failing this often ends run_jobs
    retire_after: int = 3              # an agent failing this many jobs in a row takes no more
    backoff_s: float = 0.5             # the pause after a failure, doubled each time in a row
    busy_wait_s: float = 900.0         # how long a busy agent or host is waited for


class AgentWorker:
    """One agent's share of run_jobs, as one task."""

    def __init__(self, client: AgentClient, shared: JobQueue, rules: RetryRules, owned_runs: set[str],
                 on_result: Callable[[Job, RunResult], Awaitable[None] | None],
                 on_start: Callable[[Job, AgentClient, str], Awaitable[None] | None] | None):
        self.client, self.shared, self.rules, self.owned_runs = client, shared, rules, owned_runs
        self.on_result, self.on_start = on_result, on_start
        self.host_busy_s = 0.0             # waited in a row for the host another process holds

    async def run(self) -> None:
        """Jobs taken one at a time until none is left, the run fails for good, or the agent is
        retired."""
        c, shared, on_start = self.client, self.shared, self.on_start
        consecutive = 0
        while (job := await shared.take()) is not None:
            job.attempts += 1
            started = None if on_start is None else (lambda run_id, job=job: on_start(job, c, run_id))
            try:
                result = await c.run(job.plan, job.options, on_start=started)
            except AgentError as e:
                # Not this agent's failure: it runs something else (an orphan of ours is cancelled,
                # anyone else's awaited), or another process holds the host's run lock (another
                # agent, a local replay) and the host is waited for with a growing pause.
                host_busy = isinstance(e, RunFailed) and e.details.get("reason") == "host_busy"
                if isinstance(e, AgentBusy) or host_busy:
                    job.attempts -= 1
                    await shared.give_back(job)
                    if not await (self._agent_busy(e) if isinstance(e, AgentBusy) else self._host_busy()):
                        return
                    continue
                consecutive += 1
                if not await self._job_failed(job, e, consecutive):
                    return
                continue
            consecutive, self.host_busy_s = 0, 0.0
            await shared.deliver(c.name, job, result, self.on_result)

    async def _agent_busy(self, e: AgentBusy) -> bool:
        """The agent runs something else: an orphan of this campaign's is cancelled, anyone
        else's awaited up to busy_wait_s. False where the agent is retired for it."""
        c, shared, rules = self.client, self.shared, self.rules
        if e.running in self.owned_runs:
            log.info("agent %s runs %s, started by this campaign before a restart: cancelling",
                     c.name, e.running)
            with contextlib.suppress(AgentError):
                await c.cancel(e.running)
            self.owned_runs.discard(e.running)
        elif not await c.wait_idle(e.running, rules.busy_wait_s):
            log.warning("agent %s stayed busy with run %s for %.0f s: retired", c.name, e.running,
                        rules.busy_wait_s)
            await shared.retire(c, "every agent failed or stayed busy")
            return False
        return True

    async def _job_failed(self, job: Job, e: AgentError, consecutive: int) -> bool:
        """A job failed on c, its consecutive-th failure in a row there: rejected for good (a 4xx
        that is not retryable), or given back to be tried again after a growing pause, up to
        max_attempts; the agent retired after retire_after in a row. False where c's worker ends."""
        c, shared, rules = self.client, self.shared, self.rules
        if not e.retryable:
            await shared.fail(FleetError(f"job {job.id} rejected by {c.name}: {e}"))
            return False
        log.warning("job %s failed on %s (attempt %d): %s", job.id, c.name, job.attempts, e)
        if job.attempts >= rules.max_attempts:
            shared.fatal.append(FleetError(f"job {job.id} failed {job.attempts} times; last: {e}"))
        else:
            shared.report.reassigned += 1
        await shared.give_back(job)
        if consecutive >= rules.retire_after:
            log.warning("agent %s retired after %d consecutive failures", c.name, consecutive)
            await shared.retire(c, "every agent failed")
            return False
        await asyncio.sleep(rules.backoff_s * 2 ** (consecutive - 1))
        return True

    async def _host_busy(self) -> bool:
        """Pause while another process holds the agent's host, growing with the total waited;
        False (the agent retired) once that exceeds busy_wait_s."""
        c, rules = self.client, self.rules
        if self.host_busy_s >= rules.busy_wait_s:
            log.warning("agent %s: its host stayed busy with another process's run for %.0f s: retired",
                        c.name, self.host_busy_s)
            await self.shared.retire(c, "every agent failed or its host stayed busy")
            return False
        pause = min(max(rules.backoff_s, 0.5) * 2 ** min(int(self.host_busy_s // 10), 5), 15.0)
        log.info("agent %s: the host is running another process's plan; waiting %.1f s", c.name, pause)
        await asyncio.sleep(pause)
        self.host_busy_s += pause
        return True
