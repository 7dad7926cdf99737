"""`mimesys forward`: the forward model of a host (mimesys/forward, controller/forward_fit).

    mimesys forward profile [--fleet F] [--agent NAME] -o profile.h5    solo profile of the host
    mimesys forward fit DATASET [--profile profile.h5] -o DIR            first order + correction
    mimesys forward predict DIR PLAN -o predicted.h5                     a plan's trace, not run
    mimesys forward score DIR DATASET [--runs EVAL_DIR]                  held-out error per metric (+ bursts)
    mimesys forward adapt BASE DATASET_B -o DIR [--samples N] [--calibration CAL_B]
                                                                         carry BASE to DATASET_B's host
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import click

from mimesys.cliopts import progress_option, progressbar
from mimesys.errors import MimesysError
from mimesys.exitstatus import click_error

from ._agents import agent_options, one_agent


def _friendly(fn):
    import functools

    @functools.wraps(fn)
    def wrapper(*a, **kw):
        try:
            return fn(*a, **kw)
        except (MimesysError, OSError) as e:
            raise click_error(e) from None
    return wrapper


@click.group("forward")
def forward():
    """Forward model of a host: what it will measure when a plan runs."""


@forward.command("profile")
@agent_options
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False, path_type=Path), help="Profile trace (HDF5).")
@progress_option
@_friendly
def profile_cmd(fleet_file, agent, token_file, allow_plain_http, output, progress):
    """Run every stressor alone (one thread, then every thread) and record what the host shows.
    (`mimesys collect` records one per campaign before round 0.)"""
    from controller.forward_fit.profile import run_profile

    client = one_agent(fleet_file, agent, token_file, allow_plain_http=allow_plain_http)

    async def main():
        try:
            with progressbar(progress, length=1, label="profile") as bar:
                def advance(done, total):
                    bar.length = total
                    bar.update(done - bar.pos)
                return await run_profile(client, output, progress=advance)
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
              help="The host's calibration.json (`mimesys-agent calibrate`): each stressor's CPU share as the runner "
                   "measured it, for a profile recorded before the agent was calibrated; where the profile "
                   "recorded a share too, this file's wins (a newer calibration corrects an older one).")
@click.option("--seed", default=0, type=int, show_default=True)
@click.option("--overwrite", is_flag=True, help="Replace a non-empty output directory.")
@progress_option
@_friendly
def fit_cmd(dataset, profile_path, output, holdout, members, kind, steps, max_samples, calibration, seed, overwrite,
            progress):
    """First order from the profile, learned correction from DATASET's samples."""
    from controller.forward_fit.correction import CorrectionConfig
    from controller.forward_fit.fit import FitOptions, fit

    opts = FitOptions(holdout=holdout, seed=seed, max_samples=max_samples, calibration=calibration,
                      correction=CorrectionConfig(kind=kind, members=members, steps=steps, seed=seed))
    with progressbar(progress, length=2 * members, label="fitting the correction") as bar:
        fm = fit(dataset, profile_path, output, opts, overwrite=overwrite, progress=lambda: bar.update(1))
    for warning in fm.provenance.get("warnings") or []:
        click.secho(f"warning: {warning}", fg="yellow", err=True)
    corrected = int(fm.corrected.sum()) if fm.corrected is not None else 0
    click.echo(json.dumps({"forward_model": str(output), "metrics": len(fm.metric_names), "corrected_metrics": corrected,
                           "fit_samples": fm.provenance.get("fit_samples"),
                           "heldout_samples": len(fm.provenance.get("heldout_samples") or []),
                           "warnings": fm.provenance.get("warnings") or [], "simulated": fm.simulated}))


@forward.command("predict")
@click.argument("model_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.argument("plan_path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="Predicted trace (HDF5); the ensemble's spread goes to its provenance summary.")
@click.option("--first-order", is_flag=True, help="The first-order estimate alone (no correction).")
@click.option("--bursts", "with_bursts", is_flag=True,
              help="Also the burst statistics of the predicted trace (mimesys/bursts.py), per resource: printed, and "
                   "kept in the trace's provenance.")
@_friendly
def predict_cmd(model_dir, plan_path, output, first_order, with_bursts):
    """What the host would measure running PLAN (without running it)."""
    from mimesys import bursts
    from mimesys.forward.prediction import model_peaks, predicted_trace
    from mimesys.forward.model import load_forward_model
    from mimesys.plan import Plan

    fm = load_forward_model(model_dir)
    plan = Plan.read(plan_path)
    try:
        tr = predicted_trace(fm, plan, first_order_only=first_order,
                             provenance={"by": "mimesys forward predict", "forward_model": str(model_dir),
                                         "plan": str(plan_path)})
    except MimesysError as e:
        raise click.ClickException(f"{plan_path}: {e}") from None
    stats = bursts.trace_burst_stats(tr, peaks=model_peaks(fm)) if with_bursts else {}
    if with_bursts:
        tr.provenance["bursts"] = {n: s.to_dict() for n, s in stats.items()}
    tr.write(output)
    out = {"predicted": str(output), "windows": plan.T, "metrics": len(tr.metrics), "first_order_only": bool(first_order)}
    if with_bursts:
        click.echo(render_bursts(stats) + ("  (SIMULATED)" if fm.simulated else ""))
        out["bursts"] = {n: s.to_dict() for n, s in stats.items()}
    click.echo(json.dumps(out))


def render_bursts(stats: dict) -> str:
    from mimesys.bursts import STATS
    lines = [f"{'resource':22s}" + "".join(f"{s:>18s}" for s in STATS) + f"{'bursts':>8s}"]
    for name, st in stats.items():
        lines.append(f"{name:22s}" + "".join(f"{v:>18.4g}" for v in st.stats().values()) + f"{st.bursts:>8d}")
    return "\n".join(lines)


@forward.command("adapt")
@click.argument("base_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.argument("dataset", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("-o", "--output", required=True, type=click.Path(file_okay=False, path_type=Path), help="Model directory.")
@click.option("--samples", default=None, type=click.IntRange(4), help="Use only N of the dataset's fitting samples "
              "(a seeded random subset; default: all outside the held-out share).")
@click.option("--holdout", default=0.2, type=click.FloatRange(0, 0.9), show_default=True,
              help="Share of the dataset kept out (scored by `forward score`).")
@click.option("--folds", default=5, type=click.IntRange(2, 50), show_default=True,
              help="Cross-validation folds that choose each metric's adaptation (or none).")
@click.option("--calibration", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="Host B's calibration.json (`mimesys-agent calibrate` on B): BASE's first order is first "
                   "carried to B by the ratio of B's calibrated rates, CPU shares and peaks to A's.")
@click.option("--base-calibration", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="Host A's calibration.json (default: the one BASE was fitted with).")
@click.option("--seed", default=0, type=int, show_default=True)
@click.option("--overwrite", is_flag=True, help="Replace a non-empty output directory.")
@_friendly
def adapt_cmd(base_dir, dataset, output, samples, holdout, folds, calibration, base_calibration, seed, overwrite):
    """Carry the forward model BASE_DIR (fitted on host A) to the host DATASET was collected on,
    from a few of its samples: a linear map on BASE's prediction per metric, shrunk toward BASE
    and chosen by k-fold (BASE unchanged where the folds see no gain)."""
    from controller.forward_fit.adapt import AdaptOptions, adapt

    opts = AdaptOptions(samples=samples, holdout=holdout, folds=folds, seed=seed,
                        calibration=str(calibration) if calibration else None,
                        base_calibration=str(base_calibration) if base_calibration else None)
    fm = adapt(base_dir, dataset, output, opts, overwrite=overwrite)
    chosen = fm.adaptation.info["chosen"]
    fam = {}
    for c in chosen.values():
        fam[c["family"]] = fam.get(c["family"], 0) + 1
    click.echo(json.dumps({"forward_model": str(output), "base": str(base_dir), "fit_samples": fm.provenance["fit_samples"],
                           "heldout_samples": len(fm.provenance["heldout_samples"]), "families": fam,
                           "rehosted": "rehosted" in fm.provenance,
                           "simulated": fm.simulated}))


@forward.command("score")
@click.argument("model_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.argument("dataset", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--runs", "run_dirs", multiple=True, type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="An evaluation directory (`mimesys evaluate -o DIR`: plans/ + executed/): also score the burst "
                   "statistics predicted from each plan against the measured run (MAPE per statistic and "
                   "resource); repeat.")
@click.option("--json", "as_json", is_flag=True, help="One JSON document instead of the table.")
@_friendly
def score_cmd(model_dir, dataset, run_dirs, as_json):
    """Median relative error per metric on held-out samples: first order alone vs corrected; with
    --runs, the burst statistics' MAPE on held-out real runs."""
    from mimesys.forward.model import load_forward_model
    from controller.forward_fit import burst_score
    from controller.forward_fit.score import render, score

    fm = load_forward_model(model_dir)
    doc = score(fm, dataset)
    if run_dirs:
        runs = [r for d in run_dirs for r in burst_score.eval_runs(d)]
        doc["bursts"] = burst_score.score_runs(fm, runs)
        doc["bursts_first_order"] = burst_score.score_runs(fm, runs, first_order_only=True)
    if as_json:
        click.echo(json.dumps(doc))
        return
    click.echo(render(doc))
    if run_dirs:
        click.echo("")
        click.echo(burst_score.render(doc["bursts"]))
        click.echo(burst_score.render(doc["bursts_first_order"]))
