"""Novelty-guided vs random collection at an equal sample budget, on SIMULATED hosts.

Two campaigns run side by side in one process, each on its own simulated agents (the real
agent app over mimesys.sim, on 127.0.0.1): `--strategy novelty` (one-hot sweep, then the
hybrid RF/KDE/FPS + hull proposals) and `--strategy random` (random sparse compositions,
the same number per round). Both datasets are scored with the same fixed metric bounds
(the simulated host's calibrated peaks, widened to whatever either campaign observed).

Prints ONE JSON line: coverage (occupied grid cells over all key-metric pairs) of each,
their ratio, the sample counts, and writes a side-by-side PNG. Simulated: these numbers
describe the algorithm on the simulated host, not any real machine.

    python bench/novelty_vs_random.py [--rounds 6] [--round-size 96] [--out bench/out]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TOKEN = "bench-token-0123456789abcdef"


async def run(args) -> dict:
    from bench.sim_agents import start_agents
    from controller.campaign.campaign import Campaign
    from controller.campaign.run import run_campaign
    from controller.campaign.coverage import coverage, coverage_png, metric_bounds, normalize
    from controller.fleet import Fleet

    work = Path(tempfile.mkdtemp(prefix="nov-vs-rand-"))
    urls, runners = await start_agents(2 * args.agents, TOKEN.encode(), work / "agents", seed=args.seed)
    camps, t = {}, {}
    try:
        # round 0 as the sweep, not the solo profile: both strategies' samples are then executed chains
        # of the same count, as in the results this bench has published
        common = {"round_size": args.round_size, "chain_len": args.chain_len, "repetitions": args.repetitions,
                  "seed": args.seed, "round0": "sweep"}

        async def one(strategy, agent_urls):
            camp = Campaign.open(work / strategy, {**common, "strategy": strategy})
            t0 = time.monotonic()
            async with Fleet.from_urls(agent_urls, TOKEN) as fl:
                await run_campaign(camp, fl, args.rounds, progress=False)
            t[strategy] = time.monotonic() - t0
            camps[strategy] = camp
        await asyncio.gather(one("novelty", urls[:args.agents]), one("random", urls[args.agents:]))
    finally:
        for r in runners:
            await r.cleanup()

    nov, rnd = camps["novelty"], camps["random"]
    ki, names, units = nov.binding.key_index(nov.config.key_metrics)
    data = {k: c.samples(filtered=False)["obs"][:, ki] for k, c in camps.items()}
    bounds = metric_bounds(names, units, np.concatenate(list(data.values())), nov.binding.peaks())
    Yn = {k: normalize(v, bounds) for k, v in data.items()}
    cov = {k: coverage(v, args.grid) for k, v in Yn.items()}
    out_dir = Path(args.out)
    png = out_dir / "novelty_vs_random.png"
    pick = [names.index(n) for n in ("mem.bw_Bps", "llc.miss_per_s", "cpu.util", "disk.read_Bps", "net.lo.tx_Bps")
            if n in names]
    coverage_png(png, Yn["novelty"][:, pick], [names[i] for i in pick],
                 f"novelty (blue, {cov['novelty']['occupied_cells']} cells) vs random (orange, "
                 f"{cov['random']['occupied_cells']} cells), {len(Yn['novelty'])} vs {len(Yn['random'])} samples",
                 simulated=True, compare=(Yn["random"][:, pick], "random"), bounds=bounds[pick])
    for c in camps.values():
        c.close()
    return {"bench": "novelty_vs_random", "simulated": True, "rounds": args.rounds + 1,
            "round_size": args.round_size, "grid": args.grid, "key_metrics": names,
            "samples_novelty": int(len(Yn["novelty"])), "samples_random": int(len(Yn["random"])),
            "coverage_novelty": cov["novelty"]["occupied_cells"], "coverage_random": cov["random"]["occupied_cells"],
            "coverage_ratio": round(cov["novelty"]["occupied_cells"] / max(cov["random"]["occupied_cells"], 1), 3),
            "seconds_novelty": round(t["novelty"], 1), "seconds_random": round(t["random"], 1),
            "png": str(png), "campaigns": str(work)}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=6, help="proposal rounds after round 0")
    ap.add_argument("--round-size", type=int, default=96)
    ap.add_argument("--chain-len", type=int, default=16)
    ap.add_argument("--repetitions", type=int, default=3)
    ap.add_argument("--agents", type=int, default=2, help="simulated agents per campaign")
    ap.add_argument("--grid", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=str(ROOT / "bench" / "out"))
    args = ap.parse_args(argv)
    print(json.dumps(asyncio.run(run(args))))


if __name__ == "__main__":
    main()
