"""How much the previous window moves the simulated host's metrics: the MIMESYS paper's
state statistic, measured on agentd/sim.

The paper (§6.4) profiles a stressor composition after a preceding composition and after
an idle window, and reports the 90th percentile of the relative change: 135.7 % for LLC
misses and 95.0 % for memory bandwidth on its real hosts. This bench computes the same
statistic on the simulated host (noise off, so only state moves the numbers): for each of
--pairs random sparse compositions a (the collection's proposal distribution) and a random
predecessor b, |m(a after b) - m(a after idle)| / m(a after idle), per metric, over the
pairs where the metric is not negligible after idle (> 1 % of its peak, where it has one).

Prints ONE JSON line with p50 and p90 per metric. Every figure is SIMULATED.

    .venv/bin/python bench/sim_state_effect.py [--pairs 2000] [--cpus 4]
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mimesys.catalog import load_catalog  # noqa: E402
from mimesys.sim import SimModel, SimParams  # noqa: E402
from controller.campaign.proposals import random_compositions  # noqa: E402

METRICS = ("llc.miss_per_s", "mem.bw_Bps", "cpu.util", "disk.read_Bps", "disk.write_Bps", "net.tx_Bps",
           "net.lo.tx_Bps", "mem.cache_B")
PAPER_P90 = {"llc.miss_per_s": 1.357, "mem.bw_Bps": 0.950}


def state_effect(sim: SimModel, pairs: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    names = [m.name for m in sim.schema()]
    cols = [names.index(m) for m in METRICS]
    peaks = sim.params.calibration()["peaks"]
    M, K = sim.M, sim.params.n_cpus
    after_idle_state = sim.step(np.zeros((M, K)), sim.idle_state(), rng)[1]
    a = random_compositions(rng, pairs, M, K)
    b = random_compositions(rng, pairs, M, K)
    rel = np.full((pairs, len(METRICS)), np.nan)
    for i in range(pairs):
        base = sim.step(a[i], after_idle_state, rng)[0][cols].astype(np.float64)
        prev_state = sim.step(b[i], after_idle_state, rng)[1]
        moved = sim.step(a[i], prev_state, rng)[0][cols].astype(np.float64)
        for j, m in enumerate(METRICS):
            if base[j] > 0.01 * peaks.get(m, 0.0):
                rel[i, j] = abs(moved[j] - base[j]) / base[j]
    return {m: {"p50": round(float(np.nanpercentile(rel[:, j], 50)), 3),
                "p90": round(float(np.nanpercentile(rel[:, j], 90)), 3),
                "pairs": int(np.isfinite(rel[:, j]).sum())} for j, m in enumerate(METRICS)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=2000)
    ap.add_argument("--cpus", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    params = replace(SimParams(n_cpus=args.cpus), noise=0.0)
    sim = SimModel.from_catalog(load_catalog(), params)
    print(json.dumps({"bench": "sim_state_effect", "simulated": True, "pairs": args.pairs, "cpus": args.cpus,
                      "relative_change_after_predecessor_vs_after_idle": state_effect(sim, args.pairs, args.seed),
                      "paper_real_host_p90": PAPER_P90}))


if __name__ == "__main__":
    main()
