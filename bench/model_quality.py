"""Model quality on the SIMULATED host: DTW of executed traces, diffusion model vs baselines,
and state-aware conditioning vs the same model without a_{t−1}.

Everything here runs on the simulated host (mimesys/sim) and every figure is SIMULATED:

1. dataset: controller.dataset.simulated_dataset (random sparse compositions chained and
   run through the simulated host, 4 CPUs; --hold-max N holds each for 1..N windows);
2. two models trained identically (`mimesys train`), one state-aware (conditioned on
   o_t and a_{t−1}; --prev-obs adds o_{t−1} to both), one without a_{t−1}
   (--no-prev-action); both exported to ONNX
   and used through agentd's OnnxGenerator, as deployed;
3. held-out targets the generators never saw: application-like two-app mixes (the
   generator of bench/align_sim.py, other seeds) and random phase workloads (each
   composition held 1-6 windows), executed on the simulated host; with --observed paper
   the generators see only the seven metrics below (an imported trace's situation: the
   host state is then not readable from the target's other metrics);
4. every method generates a plan per target (2 generation seeds), the plan is executed on
   the simulated host (same executor seed for every method), and the executed trace is
   compared with the target by controller/evaluate's normalized DTW (per metric, the
   MIMESYS paper's metrics that the simulated host has; mean over metrics).

Prints ONE JSON line (bench/model_quality_summary.py tables several, e.g. training seeds);
the per-target table goes to stderr; a PNG (mean DTW per metric and
method, plus one overlay) is written to --png.

    .venv/bin/python bench/model_quality.py [--steps 2500] [--workdir /tmp/mimesys-quality]
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

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from mimesys.catalog import load_catalog  # noqa: E402
from mimesys.sim import SimModel, SimParams  # noqa: E402
from mimesys.trace import Trace  # noqa: E402

N_CPUS = 4
T = 40
METRICS = ("cpu.util", "mem.bw_Bps", "llc.miss_per_s", "disk.read_Bps", "disk.write_Bps", "net.rx_Bps", "net.tx_Bps")


def phase_traces(catalog, sim: SimModel, seed: int, count: int) -> dict[str, Trace]:
    """Random sparse compositions, each held for 1-6 windows (phases), run on the simulated host."""
    from controller.campaign.proposals import random_compositions
    rng = np.random.default_rng(seed)
    out = {}
    for i in range(count):
        comps = []
        while len(comps) < T:
            a = random_compositions(rng, 1, len(catalog), N_CPUS)[0]
            comps += [a] * int(rng.integers(1, 7))
        plan = np.stack(comps[:T]).astype(np.float32)
        obs, _ = sim.simulate(plan, None, rng)
        out[f"phases{seed}-{i}"] = Trace(obs, sim.schema(), simulated=True,
                                         provenance={"kind": "bench.model_quality phase workload", "seed": seed})
    return out


def only(trace: Trace, names) -> Trace:
    """The trace with just these metrics (an imported trace's view of the same run)."""
    keep = [m for m in trace.metrics if m.name in names]
    return replace(trace, values=trace.select([m.name for m in keep]), metrics=keep)


def train_models(workdir: Path, steps: int, common: list[str], hold_max: int = 1) -> dict[str, Path]:
    from click.testing import CliRunner
    from controller.cli import main
    from controller.dataset import simulated_dataset

    ds = workdir / ("sim_dataset.h5" if hold_max == 1 else f"sim_dataset_hold{hold_max}.h5")
    if not ds.exists():
        simulated_dataset(n_chains=300, chain_len=16, repetitions=2, n_cpus=N_CPUS, seed=0,
                          hold_max=hold_max).write(ds)
    out = {}
    for name, extra in (("diffusion", []), ("diffusion_no_state", ["--no-prev-action"])):
        tag = f"{steps}{''.join(common).replace('--', '_').replace(' ', '')}_hold{hold_max}"
        mdir, onnx = workdir / f"model_{name}_{tag}", workdir / f"onnx_{name}_{tag}"
        if not (onnx / "manifest.json").exists():
            t0 = time.time()
            for args in (["train", str(ds), "--out", str(mdir), "--steps", str(steps), "--threads", "1", "--quiet",
                          "--overwrite", *common, *extra],
                         ["export", str(mdir), "--onnx", str(onnx), "--overwrite"]):
                r = CliRunner().invoke(main, args, catch_exceptions=False)
                if r.exit_code != 0:
                    raise SystemExit(f"{' '.join(args[:1])} failed: {r.output}")
            print(f"trained+exported {name} in {time.time() - t0:.0f} s", file=sys.stderr)
        out[name] = onnx
    out["dataset"] = ds
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/mimesys-quality"))
    ap.add_argument("--steps", type=int, default=2500)
    ap.add_argument("--targets", type=int, default=6, help="held-out targets per family (app mixes, phases)")
    ap.add_argument("--seeds", type=int, default=2, help="generation seeds per target")
    ap.add_argument("--prev-obs", action="store_true",
                    help="also condition both models on o_{t-1} (default: the paper's formulation, o_t and a_{t-1})")
    ap.add_argument("--train-seed", type=int, default=0)
    ap.add_argument("--observed", choices=("all", "paper"), default="all",
                    help="what the generators see of each target: every metric the simulated host has, or only "
                         "the paper's seven (as an imported trace carries a subset); DTW is on the seven either way")
    ap.add_argument("--train-on-observed", action="store_true",
                    help="with --observed paper: train both models on those seven metrics only (mimesys train --metrics)")
    ap.add_argument("--hold-max", type=int, default=1,
                    help="collection chains hold each composition 1..N windows (1: a new composition every window)")
    ap.add_argument("--png", type=Path, default=ROOT / "bench" / "results" / "model_quality_sim.png")
    args = ap.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)

    from mimesys.planners.diffusion import load_generator
    from controller.baselines.from_dataset import from_dataset
    from controller.evaluate.dtw import compare
    from controller.model.data import load_training_data
    from align_sim import app_traces

    t_start = time.time()
    catalog = load_catalog()
    params = SimParams(n_cpus=N_CPUS)
    sim = SimModel.from_catalog(catalog, params)
    peaks = params.calibration()["peaks"]
    common = (["--prev-obs"] if args.prev_obs else ["--no-prev-obs"]) + \
        (["--seed", str(args.train_seed)] if args.train_seed else []) + \
        (["--metrics", ",".join(METRICS)] if args.train_on_observed else [])
    paths = train_models(args.workdir, args.steps, common, args.hold_max)
    data = load_training_data(paths["dataset"])
    methods = {"diffusion": load_generator(paths["diffusion"]),
               "diffusion_no_state": load_generator(paths["diffusion_no_state"]),
               "nearest": from_dataset("nearest", data), "knn": from_dataset("knn", data),
               "single": from_dataset("single", data)}
    guidance_sweep = {f"diffusion_w{w:g}": load_generator(paths["diffusion"], guidance=w) for w in (1.0, 3.0)}
    targets = {**app_traces(catalog, seed=1000, count=args.targets), **phase_traces(catalog, sim, 2000, args.targets)}
    shown = {name: t if args.observed == "all" else only(t, METRICS) for name, t in targets.items()}

    rows = []   # (target, method, seed, {metric: dtw})
    for ti, (tname, target) in enumerate(targets.items()):
        for mname, gen in {**methods, **guidance_sweep}.items():
            for seed in range(args.seeds):
                plan = gen.generate(shown[tname], seed=seed)
                obs, _ = sim.simulate(plan.compositions, None, np.random.default_rng(10_000 + ti * 100 + seed))
                executed = Trace(obs, sim.schema(), simulated=True)
                res = compare(target, executed, list(METRICS), peaks=peaks)
                rows.append((tname, mname, seed, {m: r.distance for m, r in res.items()}))

    def mean_dtw(method, family=None, metric=None, target=None):
        vals = [np.nanmean([d[metric]] if metric else list(d.values())) for t, m, s, d in rows
                if m == method and (family is None or t.startswith(family)) and target in (None, t)]
        return float(np.mean(vals))

    names = list(methods) + list(guidance_sweep)
    table = {m: round(mean_dtw(m), 4) for m in names}
    by_family = {f: {m: round(mean_dtw(m, f), 4) for m in names} for f in ("mix", "phases")}
    per_metric = {m: {k: round(mean_dtw(m, metric=k), 4) for k in METRICS} for m in methods}
    per_target = {t: {m: round(mean_dtw(m, target=t), 5) for m in methods} for t in targets}
    print(f"{'target':34s} " + " ".join(f"{m[:14]:>14s}" for m in names), file=sys.stderr)
    for tname in targets:
        vals = [np.mean([np.nanmean(list(d.values())) for t, m, s, d in rows if t == tname and m == mm]) for mm in names]
        print(f"{tname:34s} " + " ".join(f"{v:14.4f}" for v in vals), file=sys.stderr)
    best_baseline = min(table[b] for b in ("nearest", "knn", "single"))
    plot(per_metric, shown, methods, sim, args.png)   # the overlay generates from what the methods were shown
    print(json.dumps({
        "simulated": True,
        "mean_dtw": {m: table[m] for m in methods},
        "diffusion_beats_all_baselines": table["diffusion"] < best_baseline,
        "diffusion_vs_best_baseline": round(best_baseline / table["diffusion"], 3),
        "state_aware_beats_no_state": table["diffusion"] < table["diffusion_no_state"],
        "no_state_over_state_aware": round(table["diffusion_no_state"] / table["diffusion"], 3),
        "by_family": by_family, "per_metric": per_metric, "per_target": per_target,
        "guidance_sweep_state_aware": {"1.5 (default)": table["diffusion"],
                                       **{k.split("_w")[1]: table[k] for k in guidance_sweep}},
        "targets": len(targets), "windows_per_target": T, "generation_seeds": args.seeds,
        "conditioning": {"diffusion": "o_t, a_{t-1}" + (", o_{t-1}" if args.prev_obs else ""),
                         "diffusion_no_state": "o_t" + (", o_{t-1}" if args.prev_obs else "")},
        "train_seed": args.train_seed, "observed": args.observed, "trained_on_observed": args.train_on_observed,
        "train_steps": args.steps, "hold_max": args.hold_max, "dataset_samples": len(data.samples), "sim_cpus": N_CPUS,
        "dtw": "controller.evaluate.dtw normalized DTW (band 10), mean over " + ", ".join(METRICS),
        "png": str(args.png), "seconds": round(time.time() - t_start, 1), "loadavg_1m": round(os.getloadavg()[0], 2),
    }))


def plot(per_metric, targets, methods, sim, png: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    png.parent.mkdir(parents=True, exist_ok=True)
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(14, 4.5))
    names = list(per_metric)
    x = np.arange(len(METRICS))
    w = 0.8 / len(names)
    for i, m in enumerate(names):
        ax.bar(x + i * w, [per_metric[m][k] for k in METRICS], w, label=m)
    ax.set_xticks(x + 0.4 - w / 2, METRICS, rotation=30, ha="right")
    ax.set_ylabel("normalized DTW (lower is better)")
    ax.set_title("SIMULATED host: executed vs target, held-out traces")
    ax.legend(fontsize=8)
    tname, target = next(iter(targets.items()))
    ax2.plot(target.column("mem.bw_Bps") / 1e9, "k-", lw=2, label="target")
    for m in ("diffusion", "diffusion_no_state", "knn"):
        plan = methods[m].generate(target, seed=0)
        obs, _ = sim.simulate(plan.compositions, None, np.random.default_rng(10_000))
        ax2.plot(Trace(obs, sim.schema()).column("mem.bw_Bps") / 1e9, label=m)
    ax2.set_title(f"SIMULATED: {tname}, memory bandwidth")
    ax2.set_xlabel("window")
    ax2.set_ylabel("GB/s (simulated)")
    ax2.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    main()
