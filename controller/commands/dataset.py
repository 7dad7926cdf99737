"""`mimesys dataset build CAMPAIGN -o data.h5`, `mimesys dataset teach data.h5 --forward FM -o taught.h5`
and `mimesys dataset info data.h5`."""

from __future__ import annotations

import json
from pathlib import Path

import click

from mimesys.cliopts import json_option
from mimesys.errors import MimesysError
from mimesys.exitstatus import click_error


@click.group()
def dataset():
    """Training datasets (HDF5) built from collection campaigns."""


@dataset.command()
@click.argument("campaign", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="HDF5 file to write (atomically).")
@json_option(help="Print only one JSON object on stdout: the dataset written, its samples, unstable samples "
                  "dropped, stressors, threads, metrics and whether the host was simulated.")
def build(campaign, output, as_json):
    """Write CAMPAIGN's stable samples as a training dataset."""
    from ..campaign.campaign import Campaign
    try:
        camp = Campaign.open(campaign, create=False)
        try:
            ds = camp.dataset()
        finally:
            camp.close()
        if ds.S == 0:
            raise click.ClickException(f"{campaign}: no stable samples yet; run `mimesys collect` first")
        ds.write(output)
    except MimesysError as e:
        raise click_error(e) from None
    sim = " from a SIMULATED host" if ds.simulated else ""
    dropped = ds.provenance.get("dropped_unstable", 0)
    click.echo(f"{output}: {ds.S} samples{sim} ({dropped} unstable dropped), "
               f"{len(ds.catalog_names)} stressors x {ds.action.shape[2]} threads, {len(ds.metrics)} metrics",
               err=as_json)
    if as_json:
        click.echo(json.dumps({"dataset": str(output), "campaign": str(campaign), "samples": int(ds.S),
                               "dropped_unstable": dropped, "stressors": len(ds.catalog_names),
                               "threads": int(ds.action.shape[2]), "metrics": len(ds.metrics),
                               "simulated": bool(ds.simulated)}, default=str))


@dataset.command()
@click.argument("dataset_path", metavar="DATASET", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--forward", "forward_dir", type=click.Path(exists=True, file_okay=False, path_type=Path), required=True,
              help="The forward model (`mimesys forward fit`): it makes the synthetic traces, and its planner "
                   "(the forward model inverted) teaches.")
@click.option("--trace", "traces", multiple=True, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="A target-like trace (imported or recorded, this host's metrics) to teach on; repeatable.")
@click.option("--synthetic", type=click.IntRange(min=0), default=60, show_default=True,
              help="Synthetic phase/burst traces over the host's range.")
@click.option("--windows", type=click.IntRange(min=2), default=60, show_default=True,
              help="Windows of each synthetic trace.")
@click.option("--no-chains", is_flag=True, help="Do not use the campaign's own chains as targets.")
@click.option("--obs", type=click.Choice(["target", "predicted"]), default="target", show_default=True,
              help="What a taught sample is conditioned on: the target the teacher was given, or the forward "
                   "model's prediction of the teacher's plan.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--write-synthetic", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Also write the synthetic target traces into this directory (e.g. targets for "
                   "`mimesys align --forward`).")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="HDF5 file to write (atomically): DATASET's samples and the taught ones.")
@json_option(help="Print only one JSON object on stdout: the samples by source.")
def teach(dataset_path, forward_dir, traces, synthetic, windows, no_chains, obs, seed, write_synthetic, output,
          as_json):
    """Add samples taught by the forward model: target-like traces planned by the forward model inverted."""
    from mimesys.trace import Trace
    from ..dataset import Dataset
    from ..teach import TeachSettings, teach as teach_samples
    say = lambda msg: click.echo(msg, err=True)  # noqa: E731
    try:
        ds = Dataset.read(dataset_path)
        out = teach_samples(ds, forward_dir, traces=[Trace.read(p) for p in traces],
                            settings=TeachSettings(synthetic=synthetic, windows=windows, chains=not no_chains,
                                                   obs=obs, seed=seed), progress=say,
                            synthetic_out=write_synthetic)
        out.write(output)
    except MimesysError as e:
        raise click_error(e) from None
    taught = out.provenance["taught"]
    click.echo(f"{output}: {taught['measured_samples']} measured + {taught['taught_samples']} taught samples "
               f"({', '.join(f'{n} from {k} targets' for k, n in taught['by_target_kind'].items())})", err=as_json)
    if as_json:
        click.echo(json.dumps({"dataset": str(output), **{k: taught[k] for k in
                                                          ("measured_samples", "taught_samples", "by_target_kind")}}))


@dataset.command()
@click.argument("path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@json_option(help="Print only the summary as JSON on stdout.")
def info(path, as_json):
    """Summarize a dataset: size, host, provenance and per-metric ranges."""
    from ..dataset import Dataset
    try:
        ds = Dataset.read(path)
    except MimesysError as e:
        raise click_error(e) from None
    s = ds.summary()
    if as_json:
        click.echo(json.dumps(s, indent=1, default=str))
        return
    click.echo(f"{path}: {s['samples']} samples, {s['stressors']} stressors x {s['threads']} threads, "
               f"{s['metrics']} metrics, window {s['window_s']} s")
    click.echo(f"host: {s['host'] or '?'}{'  (SIMULATED: not measurements)' if s['simulated'] else ''}")
    click.echo(f"catalog: {s['catalog_hash']}   rounds: {s['rounds']}")
    for name, r in s["ranges"].items():
        if r is None:
            click.echo(f"  {name:28s} not measured")
        else:
            click.echo(f"  {name:28s} {r['min']:12.4g} .. {r['max']:12.4g}  mean {r['mean']:12.4g} {r['unit']}")
