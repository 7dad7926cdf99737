"""`mimesys dataset build CAMPAIGN -o data.h5` and `mimesys dataset info data.h5`."""

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
