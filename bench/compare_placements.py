"""One method's replays with the runner's threads pinned against the same plans replayed with
another agent.placement (free, yield), per mix, from a fidelity bench's evaluations
(bench/fidelity_real.py run on one work directory once per placement, --placement P).

    python bench/compare_placements.py --fidelity WORK [--method inverse] [--replays 2] [--placements pinned,free]

WORK is OUT/LABEL; its eval-rep<R> (pinned) and eval-rep<R>-<placement> hold the runs. Per mix
and placement, the mean over replays of each run's own-scale scores (controller/evaluate/own_scale):
per-core CPU, host-wide CPU, used memory (DTW on the target's range), the resource mean, the CPU
PSI and migrations; then their means over the mixes. One JSON line on stdout.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

SCORES = ("per_core_cpu", "cpu.util", "memory", "resource_mean", "psi.cpu.some", "perf.migrations_per_s")


def score(run: dict, key: str) -> float:
    own = run["own_scale"]
    if key == "memory":
        return own["memory"]["dtw"]
    return own[key] if key in own else own["per_metric"].get(key, float("nan"))


def compare(work: Path, method: str, replays: int, placements: tuple[str, ...] = ("pinned", "free")) -> dict:
    per: dict = {}
    for placement in placements:
        suffix = "" if placement == "pinned" else f"-{placement}"
        for r in range(replays):
            path = work / f"eval-rep{r}{suffix}" / "results.json"
            if not path.exists():
                raise SystemExit(f"no {path}: run bench/fidelity_real.py on {work.parent} "
                                 f"{f'with --placement {placement} ' if suffix else ''}first")
            for run in json.loads(path.read_text())["runs"]:
                if run["method"] == method:
                    per.setdefault(run["trace"], {}).setdefault(placement, []).append(run)
    out = {mix: {p: {k: round(float(np.mean([score(x, k) for x in runs])), 4) for k in SCORES}
                 | {"memory_windows_added_by_plan": int(sum(x["own_scale"]["memory"]["added_by_plan"] for x in runs))}
                 for p, runs in by.items()} for mix, by in sorted(per.items())}
    out["mean"] = {p: {k: round(float(np.mean([out[m][p][k] for m in per])), 4) for k in SCORES}
                   for p in placements}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fidelity", type=Path, required=True, help="a fidelity bench's work directory (OUT/LABEL)")
    ap.add_argument("--method", default="inverse")
    ap.add_argument("--replays", type=int, default=2)
    ap.add_argument("--placements", default="pinned,free", help="comma-separated agent.placement values")
    args = ap.parse_args()
    print(json.dumps({"bench": "compare_placements", "method": args.method, "simulated": False,
                      "placements": args.placements.split(","),
                      "by_mix": compare(args.fidelity, args.method, args.replays, tuple(args.placements.split(",")))}))


if __name__ == "__main__":
    main()
