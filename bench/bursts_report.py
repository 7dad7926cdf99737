"""Markdown tables of what bench/bursts_real.py measured on host A: per mix and method the DTW and
the burst-structure error, the burst statistics target vs executed, and the statistics
predicted from each plan before it ran vs measured (MAPE per statistic and resource).

    python bench/bursts_report.py --work bench-out/bursts > bench/results/bursts/real_runs.md
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path


def fmt(v, p=3):
    return "-" if v is None else f"{v:.{p}g}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", type=Path, default=Path("bench-out/bursts"))
    args = ap.parse_args()
    a = args.work / "hostA"
    doc = json.loads((a / "eval" / "results.json").read_text())
    out = ["## Host A: real application mixes, every method (mimesys evaluate)", "",
           "| mix | method | mean DTW (every metric) | burst-structure error |", "|---|---|---|---|"]
    dtw = defaultdict(list)
    for r in doc["rows"]:
        if r["distance"] is not None:
            dtw[(r["trace"], r["method"])].append(r["distance"])
    for run in doc["runs"]:
        d = dtw.get((run["trace"], run["method"]))
        out.append(f"| {run['trace']} | {run['method']} | {fmt(sum(d) / len(d)) if d else '-'} | "
                   f"{fmt(run.get('burst_error'))} |")
    out += ["", "Per method, mean over mixes: " + ", ".join(
        f"{m} {fmt(v['all'])}" for m, v in sorted(doc["burst_summary"].items(), key=lambda kv: kv[1]["all"])), ""]
    rows = doc["bursts"]
    methods = list(dict.fromkeys(r["method"] for r in rows))
    for trace in dict.fromkeys(r["trace"] for r in rows):
        out += [f"### {trace}: burst statistics, target vs executed", "",
                "| resource | statistic | target | " + " | ".join(methods) + " |",
                "|---|---|---|" + "---|" * len(methods)]
        cells = defaultdict(dict)
        for r in rows:
            if r["trace"] == trace:
                cells[(r["resource"], r["statistic"])]["target"] = r["target"]
                cells[(r["resource"], r["statistic"])][r["method"]] = r["executed"]
        for (res, stat), c in cells.items():
            if all(c.get(k) is None for k in ["target"] + methods):
                continue
            out.append(f"| {res} | {stat} | {fmt(c.get('target'))} | " + " | ".join(fmt(c.get(m)) for m in methods) + " |")
        out.append("")
    fs = a / "forward_score.json"
    if fs.exists():
        s = json.loads(fs.read_text())
        for key, label in (("bursts", "first order + correction"), ("bursts_first_order", "first order only")):
            b = s.get(key)
            if not b:
                continue
            out += [f"## Predicted from the plan before running it vs measured ({label}), {b['runs']} real runs on A",
                    "", "MAPE [%] per statistic and resource (Driple's measure; cells where both sides are defined):", "",
                    "| resource | burst_s_median | burst_s_p90 | idle_s_median | idle_s_p90 | burst_consumption |",
                    "|---|---|---|---|---|---|"]
            for res, row in b["mape"].items():
                out.append(f"| {res} | " + " | ".join(fmt(row.get(k)) for k in
                                                    ("burst_s_median", "burst_s_p90", "idle_s_median", "idle_s_p90",
                                                     "burst_consumption")) + " |")
            by = b["mape_by_statistic"]
            out.append("| **all resources** | " + " | ".join(fmt(by.get(k)) for k in
                                                          ("burst_s_median", "burst_s_p90", "idle_s_median", "idle_s_p90",
                                                           "burst_consumption")) + " |")
            out += ["", f"Mean burst-structure error of the prediction (capped, one-sided = 1): "
                        f"{fmt(b.get('structure_error_mean'))}; one side with bursts, the other none: "
                        f"{json.dumps(b.get('undefined_on_one_side'))}", ""]
        out += [f"Forward model on A's held-out samples: median relative error first order "
                f"{fmt(s['median_first_order'])}, corrected {fmt(s['median_corrected'])} ({s['samples']}).", ""]
    print("\n".join(out))


if __name__ == "__main__":
    main()
