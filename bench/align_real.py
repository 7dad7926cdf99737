"""A short alignment run against REAL agents (e.g. `mimesys-agent serve` with the host backend
on 127.0.0.1) on one real trace, with before/after DTW.

The trace is split in time: windows [0, split) are the alignment target, windows
[split, T) are held out. Both models' plans are generated the way a deployed model does,
executed on the fleet's agents, and scored with controller/evaluate's normalized DTW
(mean over the paper's metrics the trace and the host both have). If the fleet's agents
report themselves simulated, every figure says so.

    .venv/bin/python bench/align_real.py --model MODEL --fleet fleet.toml --trace T.h5 \
        [--split 40] [--epochs 6] [--workdir /tmp/mimesys-align-real]

Prints ONE JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from mimesys.trace import Trace


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", type=Path, required=True)
    ap.add_argument("--fleet", type=Path, required=True)
    ap.add_argument("--trace", type=Path, required=True)
    ap.add_argument("--split", type=int, default=40)
    ap.add_argument("--epochs", type=int, default=6)
    ap.add_argument("--seeds", type=int, default=1)
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/mimesys-align-real"))
    ap.add_argument("--set", action="append", default=[], help="align config FIELD=VALUE")
    args = ap.parse_args()
    import torch
    torch.set_num_threads(1)      # a shared 2-core machine: more threads oversubscribe the cores

    from controller.align.config import AlignConfig
    from controller.align.executors import FleetExecutor
    from controller.align.heldout import mean_dtw, score_heldout
    from controller.align.session import run_alignment
    from controller.evaluate.driver import PAPER_METRICS
    from controller.fleet import Fleet
    from controller.model.checkpoint import load_policy

    args.workdir.mkdir(parents=True, exist_ok=True)
    full = Trace.read(args.trace)
    if not 4 <= args.split <= full.T - 4:
        raise SystemExit(f"--split {args.split} must leave ≥ 4 windows on each side of the {full.T}-window trace")
    head = replace(full, values=full.values[:args.split], window_start_ns=None,
                   provenance={**full.provenance, "align_real": f"windows [0, {args.split})"})
    tail = replace(full, values=full.values[args.split:], window_start_ns=None,
                   provenance={**full.provenance, "align_real": f"windows [{args.split}, {full.T})"})
    head_path = args.workdir / f"{args.trace.stem}.align-part.h5"
    head.write(head_path)

    overrides = {"epochs": args.epochs, "segment_windows": 8, "segments_per_epoch": 3, "repeats_per_segment": 2,
                 "lr": 1e-4, "clip_range": 0.2, "stat_min_count": 2}
    for kv in args.set:
        k, _, v = kv.partition("=")
        overrides[k] = json.loads(v)
    cfg = AlignConfig.from_overrides(overrides)

    ex = FleetExecutor(Fleet.from_file(args.fleet), source=args.fleet.name)
    peaks = {}
    for info in ex.infos:                       # the agent's calibrated peaks scale DTW like evaluate does
        peaks.update(((info.get("calibration") or {}).get("peaks") or {}))
    seeds = list(range(args.seeds))
    targets = {"align-part": head, "held-out": tail}
    t0 = time.monotonic()
    try:
        before = score_heldout(load_policy(args.model), targets, ex, metrics=list(PAPER_METRICS), seeds=seeds,
                               peaks=peaks)
    finally:
        ex.close()
    summary = run_alignment(model_path=args.model, trace_paths=[head_path], out_path=args.workdir / "aligned",
                            config=cfg, fleet_file=args.fleet, sim_agents=None,
                            work_dir=args.workdir / "aligned.align", restart=True, progress=True)
    ex = FleetExecutor(Fleet.from_file(args.fleet), source=args.fleet.name)
    try:
        after = score_heldout(load_policy(args.workdir / "aligned"), targets, ex, metrics=list(PAPER_METRICS),
                              seeds=seeds, peaks=peaks)
    finally:
        ex.close()

    def part(scores, name):
        return round(mean_dtw([s for s in scores if s.trace == name]), 4)

    def per_metric(scores, name):
        keys = sorted({k for s in scores if s.trace == name for k in s.dtw})
        return {k: round(float(np.mean([s.dtw[k] for s in scores if s.trace == name and k in s.dtw])), 4)
                for k in keys}
    history = json.loads((args.workdir / "aligned.align" / "history.json").read_text())["history"]
    r = [h["reward_mean"] for h in history]
    print(f"reward curve: {summary['curve']}", file=sys.stderr)
    print(json.dumps({
        "bench": "align_real", "simulated": bool(summary["simulated"]), "agents": ex.label,
        "trace": args.trace.name, "windows": full.T, "split": args.split, "epochs": len(history),
        "config": overrides, "reward_per_epoch": [round(x, 4) for x in r],
        "reward_first": round(r[0], 4), "reward_last": round(r[-1], 4),
        "dtw_pretrained_heldout": part(before, "held-out"), "dtw_aligned_heldout": part(after, "held-out"),
        "dtw_pretrained_alignpart": part(before, "align-part"), "dtw_aligned_alignpart": part(after, "align-part"),
        "dtw_per_metric_heldout": {"pretrained": per_metric(before, "held-out"),
                                   "aligned": per_metric(after, "held-out")},
        "seconds": round(time.monotonic() - t0, 1), "loadavg_1m": round(os.getloadavg()[0], 2),
        "curve": summary["curve"],
    }))


if __name__ == "__main__":
    main()
