"""What the agent's subcommands share: the --config/--backend options and loading them,
with every MimesysError turned into a one-line click error (no tracebacks for bad input)."""

from __future__ import annotations

import functools
from pathlib import Path

import click

from mimesys.errors import MimesysError
from mimesys.exitstatus import click_error

from ..backend_registry import BACKENDS


def config_options(f):
    f = click.option("--backend", type=click.Choice(list(BACKENDS)), default=None,
                     help="Execution backend (overrides agent.backend); 'sim' is the simulated host.")(f)
    f = click.option("--config", "config_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
                     help="Config file (default: $MIMESYS_CONFIG or /etc/mimesys/agent.toml, plus agent.d/).")(f)
    return f


def load(config_path: Path | None, backend: str | None):
    from ..config import load_config
    cfg = load_config(config_path)
    return cfg.with_backend(backend) if backend else cfg


def friendly_errors(f):
    """MimesysError / OSError → 'Error: <message>' and exit status 1, never a traceback."""
    @functools.wraps(f)
    def wrapper(*args, **kw):
        try:
            return f(*args, **kw)
        except MimesysError as e:
            raise click_error(e) from None
        except BrokenPipeError:
            raise   # the reader of our stdout left (| head): exitstatus.ScriptedGroup ends quietly
        except OSError as e:  # e.g. an output path that cannot be written
            where = f"{e.filename}: " if e.filename else ""
            raise click.ClickException(f"{where}{e.strerror or e}") from None
    return wrapper
