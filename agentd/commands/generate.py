"""`mimesys-agent generate --model PLANNER --trace TRACE -o plan.h5`: turn a trace into a plan
locally (ONNX Runtime and NumPy; no PyTorch, no network) with any planner the agent's
registry knows (mimesys/planners/registry.py, which also writes the option's help)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import click

from mimesys.cliopts import progress_option
from mimesys.planners.registry import help_text

from ._common import friendly_errors


@click.command("generate")
@click.option("--model", "model_dir", required=True, metavar="PLANNER",
              help="A planner: " + help_text(agent_only=True))
@click.option("--trace", "trace_path", required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Target trace (HDF5, mimesys trace format).")
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False, path_type=Path), help="Plan to write (HDF5).")
@click.option("--seed", type=click.IntRange(0, 2**63 - 1), default=0, show_default=True)
@click.option("--steps", type=click.IntRange(1, 10000), default=None, help="DDIM steps (default: the model's).")
@click.option("--guidance", type=click.FloatRange(0, 100), default=None, help="Guidance weight (default: the model's).")
@click.option("--eta", type=click.FloatRange(0, 10), default=None, help="DDIM η (default: the model's).")
@click.option("--threads", type=click.IntRange(1, 256), default=None, help="ONNX Runtime threads (default: the manifest's).")
@click.option("--candidates", type=click.IntRange(1, 1024), default=None,
              help="Candidates per window, for a planner that samples several (default 8).")
@progress_option
@friendly_errors
def generate(model_dir, trace_path, output, seed, steps, guidance, eta, threads, candidates, progress):
    """Generate a plan reproducing TRACE, window by window."""
    from mimesys.planners import load_planner
    from mimesys.trace import Trace

    gen = load_planner(model_dir, steps=steps, guidance=guidance, eta=eta, threads=threads, candidates=candidates)
    trace = Trace.read(trace_path)
    t0 = time.perf_counter()
    if progress:
        with click.progressbar(length=trace.T, label="generating", file=sys.stderr) as bar:
            plan = gen.generate(trace, seed=seed, progress=lambda done, total: bar.update(1))
    else:
        plan = gen.generate(trace, seed=seed)
    elapsed = time.perf_counter() - t0
    plan.write(output)
    filled = plan.provenance.get("missing_metrics_filled_with_training_mean")
    if filled:
        click.echo(f"note: filled with the training mean (metric: windows): {filled}", err=True)
    click.echo(json.dumps({"plan": str(output), "planner": plan.provenance.get("generator"), "windows": plan.T,
                           "threads": plan.K, "stressors": plan.M, "seconds": round(elapsed, 3),
                           "windows_per_s": round(plan.T / max(elapsed, 1e-9), 1),
                           "sampler": plan.provenance.get("sampler"), "fused_graph": plan.provenance.get("fused_graph")}))
