"""Who executes rollout plans: real agents through the fleet client, simulated agents, or the
host's forward model (predicted, not executed: thousands of rollouts a minute on a CPU).

Each gives, per plan, the measured metrics of every plan window in the model's metric
order (mean over the run's repetitions). Simulated executions are marked `simulated`
and every report built on them says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from mimesys.backend import ExecutedWindow
from mimesys.plan import Plan


@dataclass
class Execution:
    """One executed rollout plan."""

    values: np.ndarray    # float32 [T, N] measured metrics per plan window, model metric order, NaN = unmeasured
    agent: str            # which agent ran it (URL, or "sim:<i>")
    simulated: bool


class Executor(Protocol):
    simulated: bool
    label: str            # for progress and reports, e.g. "2 agents (fleet.toml)" or "4 simulated agents"

    def execute(self, plans: list[Plan], metric_names: list[str]) -> list[Execution]:
        """Run every plan (concurrently across agents, one at a time per agent); results in plan order."""


def windows_to_values(windows: list[ExecutedWindow], schema: list[str], metric_names: list[str],
                      T: int) -> np.ndarray:
    """Measured windows -> float32 [T, len(metric_names)]: mean over repetitions per plan window,
    columns mapped from the agent's schema by name (a metric the agent lacks is NaN)."""
    col = {n: i for i, n in enumerate(schema)}
    idx = np.array([col.get(n, -1) for n in metric_names])
    acc = np.zeros((T, len(metric_names)), np.float64)
    cnt = np.zeros((T, len(metric_names)), np.int64)
    for w in windows:
        if not 0 <= w.window < T:
            raise ValueError(f"executed window index {w.window} outside the {T}-window plan")
        v = np.asarray(w.values, np.float64)
        row = np.where(idx >= 0, v[np.maximum(idx, 0)], np.nan)
        ok = np.isfinite(row)
        acc[w.window, ok] += row[ok]
        cnt[w.window, ok] += 1
    with np.errstate(invalid="ignore"):
        return np.where(cnt > 0, acc / np.maximum(cnt, 1), np.nan).astype(np.float32)


class SimExecutor:
    """Simulated agents: one agentd SimBackend each (the agent's own `--backend sim`, without
    HTTP), so plans are validated and executed exactly as a simulated agent would. With
    carry_state (default) an agent's host state (cache warmth, pending writes, heat) carries
    from one plan to the next, as on a real host; without it every plan starts on an idle
    host with noise seeded by the plan's seed, so results do not depend on which agent ran
    what before (exactly reproducible runs). Everything they produce is SIMULATED."""

    simulated = True

    def __init__(self, agents: int, catalog, *, n_cpus: int, seed: int = 0, noise: float = 0.02,
                 repetitions: int = 1, carry_state: bool = True):
        from mimesys.sim import SimBackend, SimConfig
        if agents < 1:
            raise ValueError(f"need at least one simulated agent, got {agents}")
        self._new_backend = lambda i: SimBackend(SimConfig(n_cpus=n_cpus, seed=seed + i, noise=noise), catalog)
        self.backends = [self._new_backend(i) for i in range(agents)]
        self.carry_state = carry_state
        self.schema = [m.name for m in self.backends[0].metric_schema()]
        self.label = f"{agents} simulated agent{'s' if agents > 1 else ''}"
        self.repetitions = repetitions

    def execute(self, plans: list[Plan], metric_names: list[str]) -> list[Execution]:
        import asyncio
        from mimesys.backend import RunOptions

        async def run_one(i: int, plan: Plan) -> Execution:
            agent = i % len(self.backends)
            backend = self.backends[agent] if self.carry_state else self._new_backend(agent)
            windows = [w async for w in backend.execute(plan, RunOptions(repetitions=self.repetitions,
                                                                          record=False))]
            return Execution(windows_to_values(windows, self.schema, metric_names, plan.T),
                             f"sim:{agent}", True)

        async def run_all() -> list[Execution]:
            # agent j runs plans j, j + n, j + 2n, ... in order; agents run concurrently
            n = len(self.backends)
            per_agent = [[(i, p) for i, p in enumerate(plans) if i % n == j] for j in range(n)]

            async def agent_queue(items):
                return [(i, await run_one(i, p)) for i, p in items]
            done = await asyncio.gather(*(agent_queue(items) for items in per_agent))
            return [e for _, e in sorted((pair for group in done for pair in group), key=lambda x: x[0])]

        return asyncio.run(run_all())


class FleetExecutor:
    """Real agents (or whatever the fleet file lists; an agent that reports itself simulated
    makes every result simulated) through controller/fleet/. Rollout plans are fleet jobs:
    one per agent at a time, a failed agent's plan reassigned, each result taken once."""

    def __init__(self, fleet, *, source: str = "fleet", repetitions: int = 1):
        import asyncio
        self.fleet = fleet
        self.repetitions = repetitions
        self._loop = asyncio.new_event_loop()      # one loop for the run: the fleet's HTTP session lives in it
        self._batches = 0
        probes = self._loop.run_until_complete(fleet.probe())
        fleet.check_hosts(probes)                  # one hardware identity, one catalog, not mixed sim/real
        ok = [p for p in probes if p.ok]
        self.agents = [p.client for p in ok]
        self.infos = [p.info for p in ok]
        self.simulated = any(bool(i.get("simulated")) for i in self.infos)
        kind = "SIMULATED agent" if self.simulated else "agent"
        self.label = f"{len(ok)} {kind}{'s' if len(ok) > 1 else ''} ({source})"

    def check_model(self, catalog_hash: str, threads: int) -> None:
        """Refuse at start, not after the first rollout, what the agents would reject."""
        from mimesys.errors import ConfigError
        for client, info in zip(self.agents, self.infos):
            got = (info.get("catalog") or {}).get("hash")
            if got and got != catalog_hash:
                raise ConfigError(f"agent {client.name} runs stressor catalog {got}, the model was trained "
                                  f"for {catalog_hash}")
            fp = info.get("fingerprint") or {}
            cpus = fp.get("threads") or fp.get("cores") or fp.get("cpus")
            if isinstance(cpus, int) and cpus < threads:
                raise ConfigError(f"agent {client.name} has {cpus} CPUs; the model's plans use {threads} threads")

    def execute(self, plans: list[Plan], metric_names: list[str]) -> list[Execution]:
        from mimesys.backend import RunOptions
        from controller.fleet import Job
        self._batches += 1
        jobs = [Job(f"align-{self._batches}-{i}", p, RunOptions(repetitions=self.repetitions, record=False,
                                                                 seed=p.seed)) for i, p in enumerate(plans)]
        results = {}

        def on_result(job, result):
            results[job.id] = result
        self._loop.run_until_complete(self.fleet.run_jobs(jobs, on_result, agents=self.agents))
        out = []
        for job in jobs:
            res = results[job.id]
            values = windows_to_values(res.windows, res.trace.names, metric_names, job.plan.T)
            out.append(Execution(values, res.agent or "fleet", self.simulated or bool(res.trace.simulated)))
        return out

    def close(self) -> None:
        self._loop.run_until_complete(self.fleet.close())
        self._loop.close()


class ForwardExecutor:
    """The forward model of a real host (mimesys/forward) predicts what each plan would measure:
    no agent runs anything. Its predictions carry the correction ensemble's spread as noise
    (seeded by the plan's seed), so repeated rollouts of one plan differ as replays would.
    Not a measurement: every record says `predicted by the forward model`, and a gain found
    this way is checked on real agents before it is believed (MIMESYS §4.3 uses live runs)."""

    simulated = False
    predicted = True

    def __init__(self, forward_dir, *, noise: float = 1.0):
        from mimesys.forward.model import load_forward_model
        self.forward = load_forward_model(forward_dir)
        self.noise = float(noise)
        self.label = f"forward model {forward_dir} (predicted, not executed)"

    def check_model(self, catalog_hash: str, threads: int) -> None:
        from mimesys.errors import ConfigError
        if catalog_hash != self.forward.catalog_hash or threads != self.forward.threads:
            raise ConfigError(f"the forward model was fitted for catalog {self.forward.catalog_hash} on "
                              f"{self.forward.threads} threads; the model is for {catalog_hash} on {threads}")

    def execute(self, plans: list[Plan], metric_names: list[str]) -> list[Execution]:
        fm = self.forward
        col = {n: i for i, n in enumerate(fm.metric_names)}
        idx = np.array([col.get(n, -1) for n in metric_names])
        out = []
        for plan in plans:
            pred, std = fm.predict_plan(np.asarray(plan.compositions, np.float64))
            if self.noise > 0:
                rng = np.random.default_rng(plan.seed)
                pred = fm.first.derive(fm.first.clip(pred + self.noise * std * rng.standard_normal(pred.shape)))
            values = np.where(idx >= 0, pred[:, np.maximum(idx, 0)], np.nan).astype(np.float32)
            out.append(Execution(values, "forward", False))
        return out
