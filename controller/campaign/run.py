"""Running a campaign's rounds on the fleet: each round's chains as jobs, a record per executed
chain (fsync'd when its run ends: the acknowledgement), and at the round's end its spread
filter's range and coverage report.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import time

import numpy as np

from mimesys.backend import RunOptions
from mimesys.plan import Plan

from .campaign import Campaign, CampaignError, RoundSummary
from .coverage import coverage, coverage_png, metric_bounds, normalize
from .progress import progress_bar
from .rounds import proposals_for
from .samples import observed_range, stable
from .solo import profile_host, record_profile
from .store import atomic_write_bytes

log = logging.getLogger("mimesys.collect")


async def run_campaign(campaign: Campaign, fleet, rounds: int, *, progress: bool = True,
                       on_round=None) -> list[RoundSummary]:
    """Run rounds 0..`rounds` (round 0 = the solo profile's windows or the initial sweep, then
    `rounds` proposal rounds), resuming from the store. Returns the summaries of the rounds run
    by this call."""
    probes = await fleet.probe()
    for p in probes:
        if not p.ok:
            log.warning("agent %s unreachable at start: %s", p.client.name, p.error)
    if campaign.config.allow_mixed_hosts:
        fleet.allow_mixed_hosts = True
    identity = fleet.check_hosts(probes)          # the agents agree among themselves ...
    campaign.bind([p.info for p in probes if p.ok], identity)   # ... and with the campaign's host
    agents = [p.client for p in probes if p.ok]
    fleet.owned_runs |= campaign.orphan_runs()
    if not campaign.profile_path.exists() and agents:
        await profile_host(campaign, agents[0], progress=progress)
    summaries = []
    for r in range(campaign.next_round(), rounds + 1):
        t0 = time.monotonic()
        comps, info = await asyncio.to_thread(proposals_for, campaign, r)
        if info.get("from_profile"):
            n = await asyncio.to_thread(record_profile, campaign, comps)
            log.info("round 0: %d windows of the solo profile give %d samples; the one-hot sweep is not run",
                     len(comps), n)
            t_run = 0.0
        else:
            t_run = await _run_chains(campaign, fleet, agents, r, comps, info, progress)
        summary = await asyncio.to_thread(finish_round, campaign, r, time.monotonic() - t0, info, t_run)
        summaries.append(summary)
        if on_round is not None:
            on_round(summary)
    return summaries


async def _run_chains(campaign: Campaign, fleet, agents, r: int, comps: np.ndarray, info: dict,
                      progress: bool) -> float:
    """Run round r's chains that have no record yet on the fleet; returns the seconds it took."""
    todo = jobs(campaign, r, comps)
    total = sum(j.plan.T - 1 for j in todo)
    log.info("round %d: %d compositions over %d windows, %d chains to run (%d samples), %d agents", r,
             info.get("compositions", len(comps)), len(comps), len(todo), total, len(agents))
    bar = progress_bar(progress, total, f"round {r}")
    t0 = time.monotonic()
    try:
        async def on_result(job, result):
            n = record_chain(campaign, r, job, result)
            bar.update(n)
        await fleet.run_jobs(todo, on_result, agents=agents,
                             on_start=lambda job, client, run_id: record_start(campaign, job, client.name, run_id))
    finally:
        bar.close()
    return time.monotonic() - t0


def chains(comps: np.ndarray, L: int) -> list[np.ndarray]:
    """`comps` cut into chains of L windows; a last one of a single window joins the one before."""
    out = [comps[i:i + L] for i in range(0, len(comps), L)]
    if len(out) > 1 and len(out[-1]) < 2:
        out[-2] = np.concatenate([out[-2], out[-1]])
        out.pop()
    return [c for c in out if len(c) >= 2]


def jobs(campaign: Campaign, r: int, comps: np.ndarray):
    """Round r's chains that have no record yet, as jobs for the fleet."""
    from ..fleet import Job
    b, cfg = campaign.binding, campaign.config
    out = []
    for c, chain in enumerate(chains(comps, cfg.chain_len)):
        key = f"r{r}/c{c}"
        if key in campaign.store:
            continue
        plan = Plan(np.ascontiguousarray(chain, np.float32), b.catalog_names, b.catalog_hash,
                    window_s=cfg.window_s, seed=(cfg.seed * 1_000_003 + r * 10_007 + c) & 0x7FFFFFFF,
                    provenance={"kind": "collect", "campaign": campaign.root.name, "round": r, "chain": c})
        out.append(Job(key, plan, RunOptions(repetitions=cfg.repetitions, warmup_windows=cfg.warmup_windows,
                                             record=False, seed=plan.seed)))
    return out


def record_chain(campaign: Campaign, r: int, job, result) -> int:
    """Append one executed chain (acknowledged when this returns). Returns its samples."""
    b = campaign.binding
    names = [m.name for m in result.trace.metrics]
    if names != [m.name for m in b.metrics]:
        raise CampaignError(f"agent {result.agent} reports metrics that differ from the campaign's schema")
    obs = result.values_by_repetition(job.plan.T)
    c = int(job.id.split("/c")[1])
    campaign.store.append([{"key": job.id, "type": "chain", "round": r, "chain": c, "agent": result.agent,
                            "run_id": result.run_id, "t": time.time(),
                            "shape": [int(obs.shape[0]), job.plan.T, job.plan.M, job.plan.K, int(obs.shape[2])],
                            "comps": np.ascontiguousarray(job.plan.compositions, "<f4").tobytes(),
                            "obs": np.ascontiguousarray(obs, "<f4").tobytes()}])
    log.info("acknowledged %s (%d samples) from %s", job.id, job.plan.T - 1, result.agent)
    return job.plan.T - 1


def record_start(campaign: Campaign, job, agent: str, run_id: str) -> None:
    """Note that `agent` accepted `job` as `run_id`, so that after a crash the run can be
    recognised as ours (and cancelled) if it still occupies the agent."""
    campaign.store.append([{"key": f"{job.id}/run/{run_id}", "type": "run_started", "job": job.id,
                            "agent": agent, "run_id": run_id, "t": time.time()}])


def finish_round(campaign: Campaign, r: int, seconds: float, proposal: dict,
                 profile_seconds: float = 0.0) -> RoundSummary:
    """Record round r's end (its spread filter's range) and write its coverage report."""
    s_all = campaign.samples(r, filtered=False)
    ki, names, units = campaign.binding.key_index(campaign.config.key_metrics)
    lo, hi = observed_range(s_all["obs"][:, ki])
    this = s_all["round"] == r
    kept_mask = stable(s_all["obs_spread"][this][:, ki], lo, hi, units, campaign.config.spread_threshold)
    n_chains = sum(1 for rec in campaign.chain_records() if rec["round"] == r)
    campaign.store.append([{"key": f"r{r}/done", "type": "round_done", "round": r, "t": time.time(),
                            "lo": lo.tobytes(), "hi": hi.tobytes(), "kept": int(kept_mask.sum()),
                            "dropped": int((~kept_mask).sum())}])
    s = campaign.samples(r)
    Y = s["obs"][:, ki]
    bounds = metric_bounds(names, units, Y, campaign.binding.peaks())
    Yn = normalize(Y, bounds)
    cov = coverage(Yn, campaign.config.coverage_grid)
    summary = RoundSummary(round=r, chains=n_chains, samples=int(this.sum()), kept=int(kept_mask.sum()),
                           dropped=int((~kept_mask).sum()), coverage=cov, seconds=round(seconds, 3),
                           samples_per_s=round(int(this.sum()) / seconds, 3) if seconds > 0 else 0.0,
                           strategy=campaign.config.strategy, proposal=proposal,
                           profile_seconds=round(profile_seconds, 3))
    png = campaign.root / "reports" / f"coverage_round_{r:04d}.png"
    coverage_png(png, Yn, names, f"{campaign.root.name}: round {r}, {len(Yn)} samples, "
                 f"coverage {cov['occupied_cells']} cells ({cov['fraction']:.1%}), {campaign.config.strategy}",
                 simulated=campaign.binding.simulated, bounds=bounds)
    report_path = campaign.root / "reports" / "coverage.json"
    history = json.loads(report_path.read_text()) if report_path.exists() else []
    history = [h for h in history if h.get("round") != r] + [dataclasses.asdict(summary)]
    atomic_write_bytes(report_path, json.dumps(history, indent=1).encode())
    log.info("round %d done: %d samples (%d kept, %d dropped as unstable), coverage %d cells, %.1f samples/s",
             r, summary.samples, summary.kept, summary.dropped, cov["occupied_cells"], summary.samples_per_s)
    return summary
