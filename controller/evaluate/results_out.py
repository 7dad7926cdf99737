"""What an evaluation's results become: the files `mimesys evaluate` leaves (results.json with
the summaries, results.csv, summary.csv, bursts.csv) and the table it prints.

Apart from EvaluationResults (report.py), which holds the rows and computes the summaries, so
a format can change without touching how the figures are reached.
"""

from __future__ import annotations

import csv
import json
import math
from dataclasses import asdict
from pathlib import Path

from mimesys.fsutil import atomic_path, atomic_write_text


def write(results, outdir: Path) -> dict[str, Path]:
    """results.json (everything, summaries included), results.csv (the rows), summary.csv and
    bursts.csv in outdir, each written atomically; their paths."""
    outdir.mkdir(parents=True, exist_ok=True)
    paths = {"json": outdir / "results.json", "csv": outdir / "results.csv",
             "summary_csv": outdir / "summary.csv", "bursts_csv": outdir / "bursts.csv"}
    doc = {"meta": results.meta, "summary": results.summary(), "own_scale_summary": results.own_scale_summary(),
           "runs": results.runs,
           "burst_summary": results.burst_summary(), "bursts": results.burst_rows,
           "rows": [{**asdict(r), "distance": None if math.isnan(r.distance) else r.distance,
                     "scale": None if math.isnan(r.scale) else r.scale} for r in results.rows]}
    atomic_write_text(paths["json"], json.dumps(doc, indent=1, sort_keys=True))   # unique temp, fsync, rename
    with atomic_path(paths["csv"]) as tmp, tmp.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["trace", "method", "load_level", "metric", "dtw_normalized", "scale", "scale_from", "reason"])
        for r in results.rows:
            w.writerow([r.trace, r.method, r.load_level, r.metric, "" if math.isnan(r.distance) else f"{r.distance:.6f}",
                        "" if math.isnan(r.scale) else f"{r.scale:.6g}", r.scale_from, r.reason])
    with atomic_path(paths["summary_csv"]) as tmp, tmp.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["method", "load_level", "metric", "mean_dtw_normalized"])
        for method, levels in results.summary().items():
            for level, metrics in sorted(levels.items()):
                for metric, v in metrics.items():
                    w.writerow([method, level, metric, f"{v:.6f}"])
    with atomic_path(paths["bursts_csv"]) as tmp, tmp.open("w", newline="") as fh:
        w = csv.writer(fh)
        cols = ["trace", "method", "load_level", "resource", "statistic", "target", "executed", "error"]
        w.writerow(cols)
        for r in results.burst_rows:
            w.writerow(["" if r[c] is None else (f"{r[c]:.6g}" if isinstance(r[c], float) else r[c]) for c in cols])
    return paths


def render(results) -> str:
    """A plain table: methods as rows, metrics (+ MEAN) as columns, over all levels."""
    s = results.summary()
    bs = results.burst_summary()
    metrics = list(dict.fromkeys(m for lv in s.values() for m in lv.get("all", {}) if m != "MEAN")) + ["MEAN"]
    own = results.own_scale_summary()
    head = f"{'method':<18}" + "".join(f"{m[:16]:>17}" for m in metrics) + f"{'burst error':>17}" \
        + f"{'own scale':>17}{'added windows':>17}"
    lines = [head]
    for method in s:
        row = s[method].get("all", {})
        b = bs.get(method, {}).get("all")
        o = own.get(method, {})
        lines.append(f"{method:<18}" + "".join(f"{row[m]:>17.4f}" if m in row else f"{'-':>17}" for m in metrics)
                     + (f"{b:>17.4f}" if b is not None else f"{'-':>17}")
                     + (f"{o['resource_mean']:>17.4f}" if o.get("resource_mean") is not None else f"{'-':>17}")
                     + f"{o.get('added_windows', 0):>17d}")
    return "\n".join(lines)
