"""Generation speed: one 300-window trace, default sampler settings, this CPU.

Prints ONE JSON line:
  onnx_windows_per_s           agentd's OnnxGenerator as agents run it: the fused sampler graph,
                               the trace's stretches side by side (one batched call per window
                               of a stretch; planners/diffusion/chain.py), ONNX Runtime, 1 thread
  onnx_in_order_windows_per_s  the fused graph one window a call, in order
  onnx_stepwise_windows_per_s  the NumPy DDIM loop over the encoder + denoiser graphs
  torch_windows_per_s          DiffusionPolicy.sample in PyTorch eager, one window at a time
Each window is conditioned on the composition generated for the one before; best of
--repeats runs of each, measured side by side in one process.

With --forward FORWARD_DIR (a fitted forward model, `mimesys forward fit`) the model is also
exported carrying it (`mimesys export --forward`: the plan finished by it, its solve started
from the model's plan; `onnx_steered_windows_per_s`; nudged at each step too:
`onnx_nudged_windows_per_s`), and the inverse planner is timed too (`inverse_windows_per_s`),
on --target (a trace, tiled to --windows) or on windows drawn uniformly within the forward
model's idle..capacity range.

Without --model the model is the default configuration (controller/model/config.py) with
untrained weights on this host's shape (K = CPUs, M = catalog size, N metrics): timing
does not depend on weight values, and the JSON says so. With --model MODEL_DIR (a training
output) that model is exported and timed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mimesys.catalog import load_catalog  # noqa: E402
from mimesys.planners.diffusion import load_generator  # noqa: E402
from mimesys.metrics import MetricSpec  # noqa: E402
from mimesys.trace import Trace  # noqa: E402
from controller.export import export_onnx  # noqa: E402
from controller.model.checkpoint import load_policy, save_checkpoint  # noqa: E402
from controller.model.config import ModelConfig  # noqa: E402
from controller.model.layout import ActionScale, MetricLayout, Normalizer  # noqa: E402
from controller.model.policy import DiffusionPolicy, ModelSpec  # noqa: E402

HOST_WIDE = [("mem.bw_Bps", "B/s"), ("mem.used_B", "B"), ("disk.read_Bps", "B/s"), ("disk.write_Bps", "B/s"),
             ("disk.read_iops", "1/s"), ("disk.write_iops", "1/s"), ("net.rx_Bps", "B/s"), ("net.tx_Bps", "B/s"),
             ("psi.cpu.some", "percent"), ("psi.io.some", "percent"), ("psi.memory.some", "percent"),
             ("perf.ctx_switches_per_s", "1/s"), ("cpu.util", "fraction")]


def untrained_model(out: Path, threads: int) -> Path:
    cat = load_catalog()
    metrics = [MetricSpec(f"cpu.util.core{k}", "fraction") for k in range(threads)] + \
              [MetricSpec(n, u) for n, u in HOST_WIDE]
    rng = np.random.default_rng(0)
    obs = rng.uniform(0, 1, (256, len(metrics))) * np.array([1.0 if m.unit == "fraction" else 1e8 for m in metrics])
    spec = ModelSpec(tuple(metrics), tuple(cat.names), cat.hash, threads, 1.0, {"benchmark": "untrained"})
    cfg = ModelConfig()
    norm = Normalizer.fit(obs, metrics, MetricLayout.build(spec.metric_names, threads))
    torch.manual_seed(0)
    pol = DiffusionPolicy(spec, cfg, norm, ActionScale(0.05, 0.15))
    for p in pol.denoiser.out.parameters():     # zero-initialized head: give it weights like a trained one
        torch.nn.init.normal_(p, std=0.02)
    save_checkpoint(out / "model.pt", {"spec": spec.to_dict(), "model_config": cfg.to_dict(), "normalizer": norm.to_dict(),
                                       "action_scale": pol.action_scale.to_dict(), "weights": pol.state_dict(),
                                       "train_weights": pol.state_dict(), "step": 0, "git_revision": "bench",
                                       "dataset": {"simulated": False, "note": "untrained benchmark model"}})
    return out


def target_trace(pol: DiffusionPolicy, T: int) -> Trace:
    rng = np.random.default_rng(1)
    lo, hi = np.array(pol.normalizer.raw_min), np.array(pol.normalizer.raw_max)
    vals = (lo + (hi - lo) * rng.uniform(0, 1, (T, len(lo)))).astype(np.float32)
    return Trace(vals, list(pol.spec.metrics), window_s=pol.spec.window_s)


def time_onnx(gen, trace: Trace) -> float:
    t0 = time.perf_counter()
    gen.generate(trace, seed=0)
    return trace.T / (time.perf_counter() - t0)


@torch.no_grad()
def time_torch(pol: DiffusionPolicy, trace: Trace) -> float:
    values = trace.select(pol.spec.metric_names)
    g = torch.Generator().manual_seed(0)
    prev_a = torch.zeros((1, pol.M, pol.K))
    prev_o = torch.full((1, values.shape[1]), float("nan"))
    t0 = time.perf_counter()
    for t in range(trace.T):
        o = torch.from_numpy(values[t:t + 1])
        from controller.model.policy import Context
        prev_a = pol.sample(Context(o, prev_o, prev_a), generator=g).actions
        prev_o = o
    return trace.T / (time.perf_counter() - t0)


def tiled(path: Path, windows: int) -> Trace:
    tr = Trace.read(path)
    reps = -(-windows // tr.T)
    return Trace(np.tile(tr.values, (reps, 1))[:windows], tr.metrics, window_s=tr.window_s)


def time_inverse(forward_dir: Path, target: Path | None, windows: int, repeats: int) -> dict:
    from mimesys.metrics import MetricSpec as Spec
    from mimesys.planners.inverse import InversePlanner
    planner = InversePlanner(forward_dir)
    fm = planner.model
    if target is not None:
        tr = Trace.read(target)
        trace = tiled(target, windows)
    else:
        rng = np.random.default_rng(1)
        hi = np.where(np.isfinite(fm.first.capacity), fm.first.capacity, fm.scales)
        vals = fm.first.idle + (hi - fm.first.idle) * rng.uniform(0, 1, (windows, fm.first.N))
        trace = Trace(vals.astype(np.float32), [Spec(n, u) for n, u in zip(fm.metric_names, fm.first.units)],
                      window_s=fm.window_s)
    best = max(time_onnx(planner, trace) for _ in range(repeats))
    return {"inverse_windows_per_s": round(best, 1), "inverse_forward_model": str(forward_dir),
            "inverse_target": str(target) if target else "uniform within the model's range",
            "inverse_corrected": fm.has_correction}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, default=None, help="training output directory (default: untrained default model)")
    ap.add_argument("--windows", type=int, default=300)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1, help="ONNX Runtime and torch intra-op threads")
    ap.add_argument("--forward", type=Path, default=None, help="forward-model directory: time the inverse planner")
    ap.add_argument("--target", type=Path, default=None,
                    help="target trace (tiled to --windows) for every planner [uniform draws in the model's range]")
    args = ap.parse_args()
    inverse = None
    if args.forward:
        inverse = time_inverse(args.forward, args.target, args.windows, args.repeats)
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory(prefix="mimesys-bench-") as tmp:
        tmp = Path(tmp)
        model = args.model or untrained_model(tmp / "model", os.cpu_count() or 1)
        export_onnx(model, tmp / "onnx", threads=args.threads)
        pol = load_policy(model)
        trace = target_trace(pol, args.windows) if args.target is None else tiled(args.target, args.windows)
        fused = load_generator(tmp / "onnx", threads=args.threads)
        in_order = load_generator(tmp / "onnx", threads=args.threads, stretches=False)
        stepwise = load_generator(tmp / "onnx", threads=args.threads, force_stepwise=True)
        assert fused.stretched and in_order.fused and not in_order.stretched and not stepwise.fused
        gens = {"onnx": fused, "onnx_in_order": in_order, "onnx_stepwise": stepwise}
        if args.forward:
            export_onnx(model, tmp / "onnx-steered", threads=args.threads, forward=args.forward)
            gens["onnx_steered"] = load_generator(tmp / "onnx-steered", threads=args.threads)
            gens["onnx_nudged"] = load_generator(tmp / "onnx-steered", threads=args.threads, steer_weight=1.0)
        runs = {name: [] for name in [*gens, "torch"]}
        for _ in range(args.repeats):     # interleaved, so load changes hit all alike
            for name, gen in gens.items():
                runs[name].append(time_onnx(gen, trace))
            runs["torch"].append(time_torch(pol, trace))
    print(json.dumps({
        **{f"{name}_windows_per_s": round(max(r), 1) for name, r in runs.items()},
        "onnx_over_torch": round(max(runs["onnx"]) / max(runs["torch"]), 2),
        "target": str(args.target) if args.target else "uniform within the model's training range",
        "windows": args.windows, "repeats": args.repeats, "threads": args.threads,
        "sampler": {"steps": pol.config.sample_steps, "guidance": pol.config.guidance, "eta": pol.config.eta},
        "model": str(args.model) if args.model else "default config, untrained weights (timing only)",
        "parameters": pol.parameter_count(), "M": pol.M, "K": pol.K, "N": len(pol.spec.metrics),
        "cpus": os.cpu_count(), "loadavg_1m": round(os.getloadavg()[0], 2),
        **(inverse or {}),
    }))


if __name__ == "__main__":
    main()
