"""One plan executed on the real host: mimesys-runner started under the host's run lock, its
events turned into measured windows at the window boundaries (window_alignment.py), and the
runner stopped however the run ends, before the lock is released."""

from __future__ import annotations

import contextlib
import logging
from typing import AsyncIterator

from mimesys.backend import ExecutedWindow, RunOptions
from mimesys.catalog import Catalog
from mimesys.errors import RunnerError
from mimesys.plan import Plan

from .hostlock import host_run_lock
from .sampler_thread import SamplerThread
from .window_alignment import WindowAligner

log = logging.getLogger(__name__)

async def run_on_host(backend, plan: Plan, options: RunOptions) -> AsyncIterator[ExecutedWindow]:
    """The plan's windows as measured on `backend` (the HostBackend whose run this is); the
    lateness of each boundary sample goes to backend.boundary_lag_ns, begun afresh."""
    from .runner import RunnerConfig

    b = backend
    cfg = RunnerConfig(binary=b.runner_binary, cpus=b.cpus, scratch_dir=str(b.scratch_dir),
                       scratch_budget_bytes=b.scratch_budget_bytes,
                       memory_budget_bytes=b.memory_budget_bytes, memory_margin_bytes=b.memory_margin_bytes,
                       catalog_path=str(b.catalog.path) if b.catalog.path else None,
                       pace_Bps=b.pace_rates(), placement=b.placement)
    b.boundary_lag_ns = []
    with host_run_lock(b.run_lock, owner=f"agent state {b.state_dir}"):
        # aclosing: the runner is stopped (the inner generator's finally) before the lock goes
        async with contextlib.aclosing(_run_locked(plan, options, cfg, b.catalog, b.sampling,
                                                   b.boundary_lag_ns)) as windows:
            async for w in windows:
                yield w


async def _run_locked(plan: Plan, options: RunOptions, cfg, catalog: Catalog, sampling: SamplerThread,
                      lags: list[int]) -> AsyncIterator[ExecutedWindow]:
    from . import runner
    from .runner import RunnerExit, WindowDone, WindowStarted

    handle = await runner.start_runner(plan, cfg, seed=options.seed if options.seed is not None else plan.seed,
                                       repetitions=options.repetitions, warmup_windows=options.warmup_windows,
                                       catalog=catalog)
    aligner = WindowAligner((options.repetitions - 1, plan.T - 1), int(round(plan.window_s * 1e9)),
                            sampling.samplers.derive, lags)
    try:
        async for ev in handle.events():
            if isinstance(ev, WindowStarted):
                aligner.boundary(ev, await sampling.read())
            elif isinstance(ev, WindowDone):
                if aligner.ends_the_run(ev):
                    aligner.end(ev, await sampling.read())
                aligner.window_done(ev)
            elif isinstance(ev, RunnerExit):
                if "yielded" in handle.info:
                    # agent.placement = "yield": how often something else on the host took a core
                    log.info("placement yield: the runner's threads left their cores in %s", handle.info["yielded"])
                if not ev.ok:
                    raise RunnerError(f"mimesys-runner {ev.status}: {ev.detail}"
                                      + (f" ({ev.stderr_tail})" if ev.stderr_tail else ""))
            for w in aligner.ready():
                yield w
    finally:
        if handle.exit is None:
            await handle.stop()
