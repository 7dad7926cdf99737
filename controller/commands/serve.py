"""`mimesys serve --model PLANNER --bind H --port P`: the inference server (controller/inference_server.py)."""

from __future__ import annotations

import os
from pathlib import Path

import click

from mimesys.errors import MimesysError
from mimesys.cliopts import renamed_option
from mimesys.exitstatus import click_error
from mimesys.planners.registry import help_text, kinds
from controller.baselines import BASELINE_GROUP

from ._agents import fleet_option, one_agent, plain_http_option


def read_token(token_file: Path | None, env: str = "MIMESYS_TOKEN") -> str:
    tok = token_file.read_text().strip() if token_file else os.environ.get(env, "").strip()
    if not tok:
        raise click.ClickException(f"no token: pass --token-file or set ${env}")
    return tok


@click.command("serve")
@click.option("--model", "model_dir", required=True, metavar="PLANNER",
              help="The planner served by default: " + help_text())
@renamed_option("--bind", "host", "--host", default="127.0.0.1", show_default=True,
                help="Address to listen on (as the agent's api.bind).")
@click.option("--port", type=click.IntRange(0, 65535), default=8000, show_default=True)
@click.option("--token-file", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="Bearer token clients must send (default: $MIMESYS_TOKEN).")
@click.option("--dataset", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help=f"Also serve the {BASELINE_GROUP}s ({', '.join(kinds(group=BASELINE_GROUP))}) built from this dataset.")
@fleet_option
@click.option("--agent", "agent", default=None, metavar="NAME",
              help="The fleet's agent that /v1/profile runs plans on (no agent: no /v1/profile).")
@click.option("--agent-token-file", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              hidden=True)
@plain_http_option
def serve(model_dir, host, port, token_file, dataset, fleet_file, agent, agent_token_file, allow_plain_http):
    """Serve generation (and profiling on an agent) over HTTP."""
    from aiohttp import web

    from controller.inference_server import create_app

    token = read_token(token_file)
    try:
        client = (one_agent(fleet_file, agent, agent_token_file, allow_plain_http=allow_plain_http)
                  if (fleet_file or agent) else None)
        app = create_app(model_dir, token=token.encode(), dataset=dataset, agent=client)
    except MimesysError as e:
        raise click_error(e) from e
    click.echo(f"mimesys inference server on http://{host}:{port} (model {model_dir})", err=True)
    web.run_app(app, host=host, port=port, print=None)
