"""`mimesys-agent check-config`: load and validate the configuration, print it resolved."""

from __future__ import annotations

import json

import click

from mimesys.cliopts import json_option
from mimesys.errors import MimesysError

from ._common import config_options, load


@click.command("check-config")
@config_options
@click.option("--probe/--no-probe", default=False,
              help="Also build the backend (probe samplers, find the runner) as `serve` would.")
@json_option(help="Print only one JSON object on stdout: ok, the files read, the problems found and the resolved "
                  "configuration (null when it does not load); the exit status is the same (1 unless ok).")
def check_config(config_path, backend, probe, as_json):
    """Print the resolved configuration, or the error that stops it from loading."""
    try:
        cfg = load(config_path, backend)
    except MimesysError as e:
        if as_json:
            click.echo(json.dumps(check_summary(None, [f"configuration invalid: {e}"])))
        raise click.ClickException(f"configuration invalid: {e}") from None
    if not as_json:
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
        from ..backend_registry import create_backend
        try:
            be = create_backend(cfg)
            import asyncio
            asyncio.run(be.close())
        except MimesysError as e:
            problems.append(f"backend {cfg.agent.backend!r}: {e}")
    if as_json:
        click.echo(json.dumps(check_summary(cfg, problems, probed=probe), default=str))
    if problems:
        raise click.ClickException("configuration loads, but the agent would not start:\n  " + "\n  ".join(problems))
    click.echo("# configuration OK", err=True)


def check_summary(cfg, problems: list[str], *, probed: bool = False) -> dict:
    """The --json document: whether the agent would start with this configuration, and why not."""
    return {"ok": cfg is not None and not problems, "loads": cfg is not None, "probed": probed,
            "sources": list(cfg.sources) if cfg is not None else [], "problems": problems,
            "config": cfg.to_dict() if cfg is not None else None}
