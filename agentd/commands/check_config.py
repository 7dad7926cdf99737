"""`mimesys-agent check-config`: load and validate the configuration, print it resolved."""

from __future__ import annotations

import click

from ..errors import MimesysError
from ._common import config_options, load


@click.command("check-config")
@config_options
@click.option("--probe/--no-probe", default=False,
              help="Also build the backend (probe samplers, find the runner) as `serve` would.")
def check_config(config_path, backend, probe):
    """Print the resolved configuration, or the error that stops it from loading."""
    try:
        cfg = load(config_path, backend)
    except MimesysError as e:
        raise click.ClickException(f"configuration invalid: {e}") from None
    click.echo(cfg.to_toml(), nl=False)
    problems = []
    try:
        cfg.read_token()
    except MimesysError as e:
        problems.append(str(e))
    if cfg.api.tls:
        from .serve import _tls
        try:
            _tls(cfg)
        except MimesysError as e:
            problems.append(str(e))
    if probe:
        from ..backends import create_backend
        try:
            be = create_backend(cfg)
            import asyncio
            asyncio.run(be.close())
        except MimesysError as e:
            problems.append(f"backend {cfg.agent.backend!r}: {e}")
    if problems:
        raise click.ClickException("configuration loads, but the agent would not start:\n  " + "\n  ".join(problems))
    click.echo("# configuration OK", err=True)
