"""Summarize several bench/model_quality.py runs (one JSON line each) into one table:
per configuration (hold_max, observed, trained_on_observed, steps), the mean DTW of each
method per training seed, their mean over seeds, and in how many seeds the state-aware
model beat the same model without a_{t−1}, and the paired comparison over every (target,
training seed): how often state-aware is lower, the median relative difference, and the
Wilcoxon signed-rank p-value (scipy). All figures are SIMULATED, as the runs are.

    .venv/bin/python bench/model_quality_summary.py bench/results/model/quality_runs.jsonl

Each argument is one run's output (its last JSON line counts) or, ending in .jsonl, one run per line.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict

import numpy as np
from scipy.stats import wilcoxon

METHODS = ("diffusion", "diffusion_no_state", "nearest", "knn", "single")


def main(paths: list[str]) -> None:
    groups = defaultdict(list)
    for p in paths:
        with open(p) as f:
            lines = [ln for ln in f.read().splitlines() if ln.startswith("{")]
        if not lines:
            print(f"{p}: no JSON line (run still going or failed)", file=sys.stderr)
            continue
        for d in ([json.loads(ln) for ln in lines] if p.endswith(".jsonl") else [json.loads(lines[-1])]):
            if not {"observed", "trained_on_observed", "train_steps", "targets", "generation_seeds"} <= d.keys():
                # runs from before the bench reported these (the first lines of quality_runs.jsonl)
                print(f"{p}: {d.get('run', 'a run')} predates the summary's fields: skipped", file=sys.stderr)
                continue
            key = (d.get("hold_max", 1), d["observed"], d["trained_on_observed"], d["train_steps"], d["targets"],
                   d["generation_seeds"])
            groups[key].append(d)
    out = []
    for key, runs in sorted(groups.items()):
        runs.sort(key=lambda d: d["train_seed"])
        hold, observed, trained_on, steps, targets, gseeds = key
        row = {"hold_max": hold, "observed": observed, "trained_on_observed": trained_on, "train_steps": steps,
               "targets": targets, "generation_seeds": gseeds, "train_seeds": [d["train_seed"] for d in runs]}
        for fam in (None, "mix", "phases"):
            get = (lambda d, m: d["mean_dtw"][m]) if fam is None else (lambda d, m, f=fam: d["by_family"][f][m])
            per = {m: [get(d, m) for d in runs] for m in METHODS}
            wins = sum(a < b for a, b in zip(per["diffusion"], per["diffusion_no_state"]))
            row[fam or "all"] = {"mean": {m: round(float(np.mean(v)), 4) for m, v in per.items()},
                                 "per_seed": {m: per[m] for m in ("diffusion", "diffusion_no_state")},
                                 "state_aware_wins": f"{wins}/{len(runs)}",
                                 "no_state_over_state_aware": round(float(np.mean(per["diffusion_no_state"]) /
                                                                          np.mean(per["diffusion"])), 3)}
        pairs = [(v["diffusion"], v["diffusion_no_state"]) for d in runs for v in d.get("per_target", {}).values()]
        if pairs:
            a, b = np.array(pairs).T
            row["paired_over_targets_and_seeds"] = {
                "pairs": len(pairs), "state_aware_lower": int((a < b).sum()),
                "median_no_state_over_state_aware": round(float(np.median(b / a)), 3),
                "wilcoxon_p": float(f"{wilcoxon(a, b).pvalue:.2g}")}
        out.append(row)
        print(json.dumps(row))


if __name__ == "__main__":
    main(sys.argv[1:])
