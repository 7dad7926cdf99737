"""Alignment on SIMULATED agents: does DDPO raise the reward, and does it lower DTW on
held-out traces against the pretrained model?

Everything here runs on the simulated host (mimesys/sim) and every figure is SIMULATED:

1. a pretrained model: `mimesys train` on a simulated random-composition dataset
   (controller.dataset.simulated_dataset, the synthetic training distribution);
2. "application" targets: the simulated host running structured, application-like plans
   (web serving with request bursts, a key-value store with periodic flushes, analytics
   alternating memory and compression phases, inference), colocated two per host as in
   the MIMESYS paper's mixes; 6 for alignment, 4 held out (different seeds and phases);
3. held-out DTW of the pretrained model (generation as deployed, executed on simulated
   agents, controller/evaluate's normalized DTW, mean over the paper's metrics);
4. `mimesys align` (controller.align.session) on the 6 alignment traces;
5. held-out DTW of the aligned model, same seeds.

Prints ONE JSON line; a per-trace table and the reward-curve path go to stderr.

    .venv/bin/python bench/align_sim.py [--epochs 30] [--workdir /tmp/mimesys-align-sim]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

from mimesys.catalog import load_catalog
from mimesys.sim import SimModel, SimParams
from mimesys.trace import Trace

N_CPUS = 4
T = 40
# A small model that trains in a couple of minutes on a shared 2-core CPU.
SMALL_MODEL = ["--steps", "2000", "--hidden", "64", "--blocks", "2", "--batch-size", "128"]


def app_plan(kind: str, catalog, rng: np.random.Generator, threads: list[int]) -> np.ndarray:
    """[T, M, N_CPUS] compositions of one application-like workload on `threads`."""
    a = np.zeros((T, len(catalog), N_CPUS), np.float32)
    t = np.arange(T)
    phase = rng.uniform(0, 2 * np.pi)
    period = rng.uniform(12, 24)
    wave = 0.5 + 0.5 * np.sin(2 * np.pi * t / period + phase)          # [T] in [0, 1]
    idx = catalog.index
    for k in threads:
        if kind == "web":
            a[:, idx("cpu_int_crc32"), k] = 0.15 + 0.45 * wave
            burst = (t + rng.integers(0, 8)) % 8 < 2
            a[burst, idx("net_tcp_loopback"), k] = 0.3
        elif kind == "kvstore":
            a[:, idx("mem_random_1G"), k] = 0.25 + 0.3 * wave
            a[:, idx("cpu_fp_poly"), k] = 0.1
            flush = (t + rng.integers(0, 10)) % 10 == 0
            a[flush, idx("disk_seq_write_fdatasync"), k] = 0.5
        elif kind == "analytics":
            plen = int(rng.integers(6, 11))
            mem_phase = ((t + rng.integers(0, plen)) // plen) % 2 == 0
            a[mem_phase, idx("mem_stream_triad_256M"), k] = 0.8
            a[~mem_phase, idx("cpu_zstd_compress"), k] = 0.85
            start = np.flatnonzero(np.diff(mem_phase.astype(int), prepend=-1) != 0)
            a[start, idx("disk_seq_read_direct"), k] = 0.1
        elif kind == "inference":
            a[:, idx("cpu_simd_dist_256"), k] = 0.55 + 0.35 * wave
            a[:, idx("cache_chase_llc"), k] = 0.08
        else:
            raise ValueError(kind)
    return a / np.maximum(a.sum(axis=1, keepdims=True), 1.0)


KINDS = ("web", "kvstore", "analytics", "inference")


def app_traces(catalog, seed: int, count: int) -> dict[str, Trace]:
    """`count` two-application mixes (cycling through the pairs of KINDS), each application on
    its own half of the simulated host's CPUs."""
    rng = np.random.default_rng(seed)
    sim = SimModel.from_catalog(catalog, SimParams(n_cpus=N_CPUS))
    pairs = [(i, j) for i in range(len(KINDS)) for j in range(i + 1, len(KINDS))]
    out = {}
    for i in range(count):
        k1, k2 = pairs[(i + seed) % len(pairs)]
        plan = app_plan(KINDS[k1], catalog, rng, [0, 1]) + app_plan(KINDS[k2], catalog, rng, [2, 3])
        obs, _ = sim.simulate(plan, None, rng)
        name = f"mix{seed}-{i}-{KINDS[k1]}+{KINDS[k2]}"
        out[name] = Trace(obs, sim.schema(), simulated=True,
                          provenance={"kind": "bench.align_sim application mix", "apps": [KINDS[k1], KINDS[k2]],
                                      "seed": seed})
    return out


def pretrained_model(workdir: Path, train_args: list[str]) -> Path:
    """Train (once; cached in workdir) on a simulated random-composition dataset."""
    from click.testing import CliRunner
    from controller.cli import main
    from controller.dataset import simulated_dataset

    model_dir = workdir / "pretrained"
    if (model_dir / "model.pt").exists():
        return model_dir
    model_dir.mkdir(parents=True, exist_ok=True)   # train writes MODEL/model.pt only into an existing directory
    ds_path = workdir / "dataset.h5"
    if not ds_path.exists():
        simulated_dataset(n_chains=300, chain_len=16, repetitions=2, n_cpus=N_CPUS, seed=0).write(ds_path)
    r = CliRunner().invoke(main, ["train", str(ds_path), "--out", str(model_dir), "--quiet",
                                  *(train_args or SMALL_MODEL)], catch_exceptions=False)
    if r.exit_code != 0:
        raise SystemExit(f"mimesys train failed ({r.exit_code}): {r.output}")
    return model_dir


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/mimesys-align-sim"))
    ap.add_argument("--epochs", type=int, default=30)
    ap.add_argument("--agents", type=int, default=4)
    ap.add_argument("--seeds", type=int, default=3, help="generation seeds per held-out trace")
    ap.add_argument("--train-arg", action="append", default=[],
                    help="`mimesys train` argument (default: the small model, SMALL_MODEL)")
    ap.add_argument("--preset", default="sim-fast")
    ap.add_argument("--set", action="append", default=[], help="align config FIELD=VALUE")
    args = ap.parse_args()
    # One intra-op thread: on a shared 2-core machine two threads per process oversubscribe the
    # cores and made a training step ~10x slower here.
    import torch
    torch.set_num_threads(1)

    from controller.align.config import AlignConfig, preset
    from controller.align.executors import SimExecutor
    from controller.align.heldout import mean_dtw, score_heldout
    from controller.align.session import run_alignment
    from controller.evaluate.driver import PAPER_METRICS
    from controller.model.checkpoint import load_policy

    t_start = time.monotonic()
    args.workdir.mkdir(parents=True, exist_ok=True)
    catalog = load_catalog()
    model_dir = pretrained_model(args.workdir, args.train_arg)
    t_trained = time.monotonic()

    train_traces = app_traces(catalog, seed=100, count=6)
    heldout = app_traces(catalog, seed=200, count=4)
    paths = []
    for name, tr in train_traces.items():
        tr.write(args.workdir / f"{name}.h5")
        paths.append(args.workdir / f"{name}.h5")

    peaks = SimParams(n_cpus=N_CPUS).calibration()["peaks"]
    seeds = list(range(args.seeds))
    executor = SimExecutor(args.agents, catalog, n_cpus=N_CPUS, seed=7, carry_state=False)
    before = score_heldout(load_policy(model_dir), heldout, executor, metrics=list(PAPER_METRICS),
                           seeds=seeds, peaks=peaks)

    overrides = preset(args.preset)
    for kv in args.set:
        k, _, v = kv.partition("=")
        overrides[k] = json.loads(v)
    overrides["epochs"] = args.epochs
    cfg = AlignConfig.from_overrides(overrides)
    out = args.workdir / "aligned"
    summary = run_alignment(model_path=model_dir, trace_paths=paths, out_path=out, config=cfg, fleet_file=None,
                            sim_agents=args.agents, work_dir=args.workdir / "aligned.align", restart=True,
                            progress=True)
    t_aligned = time.monotonic()
    after = score_heldout(load_policy(out), heldout, executor, metrics=list(PAPER_METRICS), seeds=seeds,
                          peaks=peaks)

    print(f"{'held-out trace (SIMULATED)':44s} {'pretrained':>10s} {'aligned':>10s}", file=sys.stderr)
    for name in heldout:
        b = np.mean([s.mean for s in before if s.trace == name])
        a = np.mean([s.mean for s in after if s.trace == name])
        print(f"{name:44s} {b:10.4f} {a:10.4f}", file=sys.stderr)
    print(f"reward curve: {summary['curve']}", file=sys.stderr)
    history = json.loads((args.workdir / "aligned.align" / "history.json").read_text())["history"]
    r = [h["reward_mean"] for h in history]
    k = min(3, len(r))
    result = {
        "bench": "align_sim", "simulated": True, "agents": f"{args.agents} simulated agents",
        "epochs": len(history), "config": {k2: v for k2, v in overrides.items()},
        "reward_first": round(r[0], 4), "reward_last": round(r[-1], 4),
        "reward_first3_mean": round(float(np.mean(r[:k])), 4), "reward_last3_mean": round(float(np.mean(r[-k:])), 4),
        "dtw_pretrained": round(mean_dtw(before), 4), "dtw_aligned": round(mean_dtw(after), 4),
        "dtw_ratio_aligned_over_pretrained": round(mean_dtw(after) / mean_dtw(before), 4),
        "heldout_traces": len(heldout), "seeds": len(seeds), "dtw_metrics": list(PAPER_METRICS),
        "train_s": round(t_trained - t_start, 1), "align_s": round(t_aligned - t_trained, 1),
        "loadavg_1m": round(os.getloadavg()[0], 2), "curve": summary["curve"],
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
