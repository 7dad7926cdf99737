"""Catalog reach before and after issue 13, measured on this host with the real command.

Runs `mimesys-agent calibrate --json` twice, back to back, on all CPUs: once with the catalog
as it was before (bench/results/reach/catalog_before.toml, 18 variants) and once with the
shipped catalog. Each run measures every stressor and, with `mimesys-runner --probe`, the
host's own peaks, and reports reach = the catalog's best / the host's peak per metric.
Host peaks are probed in each run (the machine is shared: compare a run's reach with its own
probe, and read both with the load average printed beside them).

Prints ONE JSON line: per run the host peaks, the reach, the catalog's best stressor per
metric; which metrics reach the goal (≥ 0.9) after; load averages. Writes both calibration
files and a PNG (reach per metric, before and after) next to --out.

--after-only --repeats N: the shipped catalog alone, N calibrations back to back (a virtio
disk's peaks move from run to run; one run's reach says little): each run's reach, and per
metric the median over the runs and how many runs met the goal.

    python bench/reach_calibrate.py [--out bench/results/reach/calibrate.json] [--probe-seconds 0.4]
    python bench/reach_calibrate.py --after-only --repeats 3 --probe-seconds 0.5 --out F
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GOAL = 0.9
METRICS = ("disk.read_Bps", "disk.write_Bps", "disk.read_iops", "disk.write_iops", "net.lo_Bps", "mem.bw_Bps")


def calibrate(catalog: Path | None, out: Path, args, tmp: Path) -> dict:
    cfg = tmp / f"{out.stem}.toml"
    lines = ["[agent]", f'state_dir = "{tmp}/state"', f'scratch_dir = "{args.scratch_dir}"']
    if catalog:
        lines.append(f'catalog = "{catalog}"')
    cfg.write_text("\n".join(lines) + "\n")
    cmd = [sys.executable, "-m", "agentd.cli", "calibrate", "--json", "--config", str(cfg), "--output", str(out),
           "--cpus", args.cpus, "--window-s", str(args.window_s), "--probe-seconds", str(args.probe_seconds)]
    load = os.getloadavg()
    r = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed: {r.stderr[-2000:]}")
    doc = json.loads(r.stdout.strip().splitlines()[-1])
    return {"command": " ".join(["mimesys-agent"] + cmd[3:]), "catalog": str(catalog or "shipped"),
            "catalog_hash": doc["catalog_hash"], "host_peaks": doc["host_peaks"], "reach": doc["reach"],
            "catalog_best": {m: {"stressor": b["stressor"], "threads": b["threads"], "value": round(b["value"], 1)}
                             for m, b in doc["catalog_best"].items()},
            "host_peaks_method": doc["host_peaks_method"], "calibration_file": str(out),
            "loadavg_before": [round(x, 2) for x in load], "loadavg_after": [round(x, 2) for x in os.getloadavg()]}


def plot_runs(runs: list[dict], png: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    x = np.arange(len(METRICS))
    width = 0.8 / len(runs)
    fig, ax = plt.subplots(figsize=(9, 4))
    for i, run in enumerate(runs):
        ax.bar(x + (i - (len(runs) - 1) / 2) * width, [run["reach"].get(m, 0) for m in METRICS], width,
               label=f"run {i + 1} (load {run['loadavg_before'][0]:.1f})")
    ax.axhline(GOAL, color="k", ls="--", lw=0.8, label=f"goal {GOAL}")
    ax.set_xticks(x, METRICS, rotation=15)
    ax.set_ylabel("reach = catalog best / host peak")
    ax.set_title(f"catalog reach on this host, {len(runs)} calibrations back to back")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    plt.close(fig)


def plot(before: dict, after: dict, png: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    x = np.arange(len(METRICS))
    fig, ax = plt.subplots(figsize=(9, 4))
    for i, (label, run) in enumerate((("before (18 variants)", before), ("after (39 variants)", after))):
        ax.bar(x + (i - 0.5) * 0.38, [run["reach"].get(m, 0) for m in METRICS], 0.38, label=label)
    ax.axhline(GOAL, color="k", ls="--", lw=0.8, label=f"goal {GOAL}")
    ax.set_xticks(x, METRICS, rotation=15)
    ax.set_ylabel("reach = catalog best / host peak")
    ax.set_title(f"catalog reach on this host (load avg {after['loadavg_before'][0]:.1f} at the after run)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "reach" / "calibrate.json")
    ap.add_argument("--before-catalog", type=Path, default=ROOT / "bench" / "results" / "reach" / "catalog_before.toml")
    ap.add_argument("--cpus", default="0-%d" % ((os.cpu_count() or 1) - 1))
    ap.add_argument("--window-s", type=float, default=0.5)
    ap.add_argument("--probe-seconds", type=float, default=0.4)
    ap.add_argument("--scratch-dir", default="/var/tmp")
    ap.add_argument("--after-only", action="store_true", help="Only the shipped catalog (no before run).")
    ap.add_argument("--repeats", type=int, default=1, help="With --after-only: calibrations back to back.")
    args = ap.parse_args()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    if args.after_only:
        return after_runs(args)
    with tempfile.TemporaryDirectory(prefix="reach-") as tmp:
        before = calibrate(args.before_catalog.resolve(), args.out.with_name("calibration_before.json"), args, Path(tmp))
        after = calibrate(None, args.out.with_name("calibration_after.json"), args, Path(tmp))
    png = args.out.with_suffix(".png")
    plot(before, after, png)
    result = {"bench": "reach_calibrate", "goal": GOAL, "before": before, "after": after,
              "after_meets_goal": {m: after["reach"].get(m, 0) >= GOAL for m in METRICS if m in after["reach"]},
              "png": str(png), "cpus": os.cpu_count()}
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result))


def after_runs(args) -> None:
    import numpy as np
    runs = []
    with tempfile.TemporaryDirectory(prefix="reach-") as tmp:
        for i in range(args.repeats):
            out = args.out.with_name(f"{args.out.stem}_run{i + 1}_calibration.json")
            runs.append(calibrate(None, out, args, Path(tmp)))
            print(f"run {i + 1}/{args.repeats}: " + ", ".join(f"{m} {runs[-1]['reach'].get(m, float('nan')):.3f}"
                                                              for m in METRICS), file=sys.stderr, flush=True)
    png = args.out.with_suffix(".png")
    plot_runs(runs, png)
    median = {m: round(float(np.median([r["reach"][m] for r in runs])), 3)
              for m in METRICS if all(m in r["reach"] for r in runs)}
    result = {"bench": "reach_calibrate", "mode": "after-only", "goal": GOAL, "runs": runs,
              "reach_median_over_runs": median,
              "runs_meeting_goal": {m: sum(r["reach"][m] >= GOAL for r in runs) for m in median},
              "png": str(png), "cpus": os.cpu_count()}
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
