"""`mimesys-agent info`: what this host offers: fingerprint, metric schema with availability,
sampler states, catalog. Built from the same backend `serve` would use."""

from __future__ import annotations

import asyncio
import json

import click

from ._common import config_options, friendly_errors, load


@click.command()
@config_options
@click.option("--json", "as_json", is_flag=True, help="One JSON document instead of the readable listing.")
@friendly_errors
def info(config_path, backend, as_json):
    """Print the host fingerprint, the metric schema with availability, and sampler states."""
    from mimesys import __version__
    from mimesys.catalog import load_catalog
    from ..backend_registry import create_backend

    cfg = load(config_path, backend)
    be = create_backend(cfg)
    try:
        binfo, schema = be.info(), be.metric_schema()
        states_fn = getattr(be, "sampler_states", None)
        states = states_fn() if callable(states_fn) else {}
        catalog = load_catalog(cfg.agent.catalog)
    finally:
        asyncio.run(be.close())
    if as_json:
        click.echo(json.dumps({"version": __version__, "backend": binfo.name, "simulated": binfo.simulated,
                               "fingerprint": binfo.fingerprint, "calibration": binfo.calibration,
                               "schema": [m.to_dict() for m in schema], "samplers": states,
                               "catalog_hash": catalog.hash, "catalog": catalog.names}, indent=2, default=str))
        return
    label = "SIMULATED host" if binfo.simulated else "real host"
    click.echo(f"mimesys-agent {__version__}  backend={binfo.name} ({label})")
    if not binfo.simulated:
        from ..fingerprint import summary
        click.echo(f"host: {summary(binfo.fingerprint)}")
    click.echo("\nfingerprint:")
    for k, v in binfo.fingerprint.items():
        click.echo(f"  {k}: {json.dumps(v, default=str) if isinstance(v, (list, dict)) else v}")
    click.echo(f"\ncatalog: {len(catalog)} stressors, {catalog.hash}")
    click.echo(f"calibration: {'present' if binfo.calibration else 'none (run mimesys-agent calibrate)'}")
    for metric, value in (binfo.calibration.get("host_peaks") or {}).items():
        r = (binfo.calibration.get("reach") or {}).get(metric)
        click.echo(f"  host peak {metric:16s} {value:12.4g}  reach {r:.3f}" if r is not None
                   else f"  host peak {metric:16s} {value:12.4g}  reach - (no catalog stressor)")
    if states:
        click.echo("\nsamplers:")
        for name, st in states.items():
            reason = f" ({st['reason']})" if st.get("reason") else ""
            click.echo(f"  {name:14s} {st['state']}{reason}")
    n_ok = sum(m.available for m in schema)
    click.echo(f"\nmetric schema: {len(schema)} metrics, {n_ok} available")
    for m in schema:
        avail = m.availability.value if hasattr(m.availability, "value") else str(m.availability)
        reason = f"  {m.reason}" if m.reason else ""
        click.echo(f"  {m.name:32s} {m.unit:9s} {avail}{reason}")
