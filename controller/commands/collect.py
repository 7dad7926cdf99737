"""`mimesys collect CAMPAIGN --rounds N`: run (or resume) a data-collection campaign."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from pathlib import Path

import click

from mimesys.cliopts import json_option, progress_option
from mimesys.errors import MimesysError
from mimesys.exitstatus import click_error

from ._agents import plain_http_option


@click.command()
@click.argument("campaign", type=click.Path(file_okay=False, path_type=Path))
@click.option("--rounds", type=click.IntRange(0), required=True,
              help="Proposal rounds after round 0 (the solo profile's windows, or the one-hot sweep); a resumed "
                   "campaign runs what is missing.")
@click.option("--fleet", "fleet_file", type=click.Path(dir_okay=False, path_type=Path),
              help="Fleet file (TOML: agent URLs + token files). Default: CAMPAIGN/fleet.toml.")
@click.option("--agent", "agents", multiple=True, metavar="NAME",
              help="Only these agents of the fleet file (repeat; default: all).")
@click.option("--strategy", type=click.Choice(["novelty", "random"]), help="Proposal strategy (default novelty).")
@click.option("--round-size", type=int, help="Compositions per proposal round (default 128).")
@click.option("--chain-len", type=int, help="Windows per chained plan (default 16).")
@click.option("--hold-max", type=int,
              help="Hold each composition for 1..N consecutive windows (default 1: a new one every window).")
@click.option("--repetitions", type=int, help="Repetitions per chain (default 3).")
@click.option("--window-s", type=float, help="Window length in seconds (default 1.0).")
@click.option("--threads", type=int, help="Plan threads K (default: the agents' CPUs).")
@click.option("--seed", type=int, help="Campaign seed (default 0).")
@click.option("--hull-fraction", type=float, help="Share of a round proposed by convex-hull filling (0.3).")
@click.option("--spread-threshold", type=float,
              help="Drop a sample whose spread over repetitions exceeds this share of the observed range (0.10).")
@click.option("--sweep-intensities", help="Round-0 intensities, comma-separated (default 0.25,0.5,1).")
@click.option("--allow-mixed-hosts", is_flag=True, default=None,
              help="Allow agents whose hardware differs in one dataset (recorded in campaign.toml).")
@plain_http_option
@progress_option
@json_option
def collect(campaign, rounds, fleet_file, agents, allow_plain_http, strategy, round_size, chain_len, hold_max, repetitions, window_s, threads, seed,
            hull_fraction, spread_threshold, sweep_intensities, allow_mixed_hosts, progress, as_json):
    """Profile stressor compositions on a fleet and append them to CAMPAIGN's sample store.

    Crash-safe: kill it at any point and run the same command again; acknowledged samples
    are kept and nothing is profiled twice."""
    from ..campaign.campaign import Campaign
    from ..campaign.run import run_campaign
    from ..fleet import Fleet

    overrides = {"strategy": strategy, "round_size": round_size, "chain_len": chain_len, "hold_max": hold_max,
                 "repetitions": repetitions, "window_s": window_s, "threads": threads, "seed": seed,
                 "hull_fraction": hull_fraction, "spread_threshold": spread_threshold, "allow_mixed_hosts": allow_mixed_hosts,
                 "sweep_intensities": [float(x) for x in sweep_intensities.split(",")] if sweep_intensities else None}
    fleet_file = fleet_file or (campaign / "fleet.toml")
    if not fleet_file.exists():   # checked before a new campaign directory is created
        raise click.ClickException(f"no fleet file {fleet_file}: pass --fleet FILE (or put one at "
                                   f"{campaign / 'fleet.toml'})")
    try:
        camp = Campaign.open(campaign, overrides)
    except MimesysError as e:
        raise click_error(e) from None
    _log_to(camp.root / "logs" / "collect.log")
    logging.getLogger("mimesys.collect").info("collect %s --rounds %d --fleet %s (strategy %s)", campaign,
                                              rounds, fleet_file, camp.config.strategy)

    async def main():
        fleet = Fleet.from_file(fleet_file, allow_mixed_hosts=camp.config.allow_mixed_hosts or None, agents=agents,
                                allow_plain_http=allow_plain_http)
        async with fleet:
            return await run_campaign(camp, fleet, rounds, progress=progress)

    t0 = time.monotonic()
    try:
        summaries = asyncio.run(main())
    except MimesysError as e:
        raise click_error(e) from None
    finally:
        camp.close()
    elapsed = time.monotonic() - t0
    done = sum(s.samples for s in summaries)
    for s in summaries:   # with --json these go to stderr: stdout is the one JSON document
        source = " from the solo profile" if s.proposal.get("from_profile") else ""
        click.echo(f"round {s.round}: {s.samples} samples{source} ({s.kept} kept, {s.dropped} dropped as unstable), "
                   f"coverage {s.coverage['occupied_cells']} cells, {s.samples_per_s:.2f} samples/s", err=as_json)
    label = " (SIMULATED host)" if camp.binding is not None and camp.binding.simulated else ""
    doc = {"campaign": str(campaign), "rounds_run": len(summaries), "samples": done, "seconds": round(elapsed, 2),
           "samples_per_hour": round(done / elapsed * 3600, 1) if elapsed > 0 else 0.0,
           "simulated": bool(camp.binding.simulated) if camp.binding else None,
           "rounds": [{"round": s.round, "samples": s.samples, "kept": s.kept, "dropped": s.dropped,
                       "occupied_cells": s.coverage["occupied_cells"], "samples_per_s": s.samples_per_s}
                      for s in summaries]}
    click.echo(json.dumps(doc) if as_json else json.dumps({k: v for k, v in doc.items() if k != "rounds"}) + label)


def _log_to(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    for name in ("mimesys.collect", "controller"):
        lg = logging.getLogger(name)
        lg.setLevel(logging.INFO)
        lg.addHandler(handler)
