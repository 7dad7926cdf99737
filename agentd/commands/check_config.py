"""`mimesys-agent check-config`: load and validate the configuration, print it resolved."""

from __future__ import annotations

import json
import os
from pathlib import Path

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
    runner = None
    if probe:
        probe_problems, runner = _probe(cfg)
        problems += probe_problems
    if as_json:
        click.echo(json.dumps(check_summary(cfg, problems, probed=probe, runner=runner), default=str))
    if problems:
        raise click.ClickException("configuration loads, but the agent would not start:\n  " + "\n  ".join(problems))
    click.echo("# configuration OK", err=True)


def _probe(cfg) -> tuple[list[str], Path | None]:
    """Build the backend as `serve` would; for the host backend also find mimesys-runner, which
    the backend itself looks up only when a run starts (the first run would be the first to fail)."""
    import asyncio

    from ..backend_registry import create_backend
    from ..runner import find_runner

    try:
        asyncio.run(create_backend(cfg).close())
    except MimesysError as e:
        return [f"backend {cfg.agent.backend!r}: {e}"], None
    if cfg.agent.backend != "host":
        return [], None
    if cfg.agent.runner:
        runner = Path(cfg.agent.runner)
        usable = runner.is_file() and os.access(runner, os.X_OK)
        return ([], runner) if usable else ([f"mimesys-runner: agent.runner {runner} is not an executable file"], None)
    try:
        return [], find_runner()
    except MimesysError as e:
        return [f"mimesys-runner: {e}"], None


def check_summary(cfg, problems: list[str], *, probed: bool = False, runner: Path | None = None) -> dict:
    """The --json document: whether the agent would start with this configuration, and why not
    (with --probe on the host backend, `runner`: the mimesys-runner it found)."""
    return {"ok": cfg is not None and not problems, "loads": cfg is not None, "probed": probed, "runner": runner,
            "sources": list(cfg.sources) if cfg is not None else [], "problems": problems,
            "config": cfg.to_dict() if cfg is not None else None}
