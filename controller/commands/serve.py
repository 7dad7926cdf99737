"""`mimesys serve --model DIR --host H --port P`: the inference server (controller/inference_server.py)."""

from __future__ import annotations

import os
from pathlib import Path

import click

from agentd.errors import MimesysError


def read_token(token_file: Path | None, env: str = "MIMESYS_TOKEN") -> str:
    tok = token_file.read_text().strip() if token_file else os.environ.get(env, "").strip()
    if not tok:
        raise click.ClickException(f"no token: pass --token-file or set ${env}")
    return tok


@click.command("serve")
@click.option("--model", "model_dir", required=True, type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="Exported model directory (mimesys export MODEL --onnx DIR).")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", type=click.IntRange(0, 65535), default=8000, show_default=True)
@click.option("--token-file", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="Bearer token clients must send (default: $MIMESYS_TOKEN).")
@click.option("--dataset", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="Also serve the baselines (nearest, knn, single) built from this dataset.")
@click.option("--agent", "agent_url", default=None, help="Agent URL that /v1/profile runs plans on.")
@click.option("--agent-token-file", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None)
def serve(model_dir, host, port, token_file, dataset, agent_url, agent_token_file):
    """Serve generation (and profiling on an agent) over HTTP."""
    from aiohttp import web

    from controller.inference_server import create_app

    token = read_token(token_file)
    agent_token = agent_token_file.read_text().strip() if agent_token_file else None
    try:
        app = create_app(model_dir, token=token.encode(), dataset=dataset, agent_url=agent_url, agent_token=agent_token)
    except MimesysError as e:
        raise click.ClickException(str(e)) from e
    click.echo(f"mimesys inference server on http://{host}:{port} (model {model_dir})", err=True)
    web.run_app(app, host=host, port=port, print=None)
