"""`mimesys forward`: the forward model of a host (agentd/forward, controller/forward).

    mimesys forward profile [--fleet F] [--agent NAME] -o profile.h5    solo profile of the host
    mimesys forward fit DATASET [--profile profile.h5] -o DIR            first order + correction
    mimesys forward predict DIR PLAN -o predicted.h5                     a plan's trace, not run
    mimesys forward score DIR DATASET                                    held-out error per metric
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import click
import numpy as np

from agentd.errors import MimesysError

from ._agents import agent_options, one_agent


def _friendly(fn):
    import functools

    @functools.wraps(fn)
    def wrapper(*a, **kw):
        try:
            return fn(*a, **kw)
        except (MimesysError, OSError) as e:
            raise click.ClickException(str(e)) from None
    return wrapper


@click.group("forward")
def forward():
    """Forward model of a host: what it will measure when a plan runs."""


@forward.command("profile")
@agent_options
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False, path_type=Path), help="Profile trace (HDF5).")
@_friendly
def profile_cmd(fleet_file, agent, token_file, output):
    """Run every stressor alone (one thread, then every thread) and record what the host shows.
    (`mimesys collect` records one per campaign before round 0.)"""
    from controller.forward.profile import run_profile

    client = one_agent(fleet_file, agent, token_file)

    async def main():
        try:
            with click.progressbar(length=1, label="profile", file=None) as bar:
                def progress(done, total):
                    bar.length = total
                    bar.update(done - bar.pos)
                return await run_profile(client, output, progress=progress)
        finally:
            await client.close()

    trace = asyncio.run(main())
    click.echo(json.dumps({"profile": str(output), "windows": trace.T, "simulated": bool(trace.simulated)}))


@forward.command("fit")
@click.argument("dataset", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--profile", "profile_path", default=None, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Solo profile of the dataset's host (default: the one its campaign recorded before round 0; "
                   "`mimesys forward profile` makes one).")
@click.option("-o", "--output", required=True, type=click.Path(file_okay=False, path_type=Path), help="Model directory.")
@click.option("--holdout", default=0.2, type=click.FloatRange(0, 0.9), show_default=True,
              help="Share of the samples kept out of the fit (scored by `forward score`).")
@click.option("--members", default=5, type=click.IntRange(1, 64), show_default=True, help="Ensemble members.")
@click.option("--kind", default="ridge", type=click.Choice(["ridge", "mlp"]), show_default=True,
              help="Correction members: ridge regressions (closed form) or small MLPs.")
@click.option("--steps", default=1500, type=click.IntRange(1, 1_000_000), show_default=True,
              help="Optimizer steps per member.")
@click.option("--max-samples", default=None, type=click.IntRange(1), help="Use only the first N samples.")
@click.option("--calibration", default=None, type=click.Path(exists=True, dir_okay=False),
              help="The host's calibration.json (`mimesys-agent calibrate`), for a profile recorded before the "
                   "agent was calibrated: each stressor's CPU share as the runner measured it.")
@click.option("--seed", default=0, type=int, show_default=True)
@click.option("--overwrite", is_flag=True, help="Replace a non-empty output directory.")
@_friendly
def fit_cmd(dataset, profile_path, output, holdout, members, kind, steps, max_samples, calibration, seed, overwrite):
    """First order from the profile, learned correction from DATASET's samples."""
    from controller.forward.correction import CorrectionConfig
    from controller.forward.fit import FitOptions, fit

    opts = FitOptions(holdout=holdout, seed=seed, max_samples=max_samples, calibration=calibration,
                      correction=CorrectionConfig(kind=kind, members=members, steps=steps, seed=seed))
    with click.progressbar(length=2 * members, label="fitting the correction", file=None) as bar:
        fm = fit(dataset, profile_path, output, opts, overwrite=overwrite, progress=lambda: bar.update(1))
    corrected = int(fm.corrected.sum()) if fm.corrected is not None else 0
    click.echo(json.dumps({"forward_model": str(output), "metrics": len(fm.metric_names), "corrected_metrics": corrected,
                           "fit_samples": fm.provenance.get("fit_samples"),
                           "heldout_samples": len(fm.provenance.get("heldout_samples") or []),
                           "simulated": fm.simulated}))


@forward.command("predict")
@click.argument("model_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.argument("plan_path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="Predicted trace (HDF5); the ensemble's spread goes to its provenance summary.")
@click.option("--first-order", is_flag=True, help="The first-order estimate alone (no correction).")
@_friendly
def predict_cmd(model_dir, plan_path, output, first_order):
    """What the host would measure running PLAN (without running it)."""
    from agentd.forward.model import load_forward_model
    from agentd.metrics import MetricSpec
    from agentd.plan import Plan
    from agentd.trace import Trace

    fm = load_forward_model(model_dir)
    plan = Plan.read(plan_path)
    if plan.catalog_hash != fm.catalog_hash:
        raise click.ClickException(f"{plan_path}: catalog {plan.catalog_hash} differs from the forward model's "
                                   f"{fm.catalog_hash}")
    if plan.K != fm.threads:
        raise click.ClickException(f"{plan_path}: {plan.K} threads, the forward model has {fm.threads}")
    pred, std = fm.predict_plan(plan.compositions, first_order_only=first_order)
    metrics = [MetricSpec(n, u, source="forward-model") for n, u in zip(fm.metric_names, fm.first.units)]
    Trace(pred.astype(np.float32), metrics, window_s=plan.window_s, host_fingerprint=fm.host_fingerprint,
          provenance={"by": "mimesys forward predict", "forward_model": str(model_dir), "plan": str(plan_path),
                      "first_order_only": bool(first_order), "predicted": True,
                      "mean_std_scaled": {n: float(s) for n, s in zip(fm.metric_names, (std / fm.scales).mean(axis=0))}},
          simulated=fm.simulated).write(output)
    click.echo(json.dumps({"predicted": str(output), "windows": plan.T, "metrics": len(metrics),
                           "first_order_only": bool(first_order)}))


@forward.command("score")
@click.argument("model_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.argument("dataset", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="One JSON document instead of the table.")
@_friendly
def score_cmd(model_dir, dataset, as_json):
    """Median relative error per metric on held-out samples: first order alone vs corrected."""
    from agentd.forward.model import load_forward_model
    from controller.forward.score import render, score

    doc = score(load_forward_model(model_dir), dataset)
    click.echo(json.dumps(doc) if as_json else render(doc))
