"""How every controller command names the agent(s) it talks to: `--fleet FILE [--agent NAME]`.

The fleet file is named with --fleet or $MIMESYS_FLEET, never picked up from the current
directory: a fleet file decides where the operator's tokens go, and a `fleet.toml` planted in
a shared or downloaded directory must not redirect them (issue 22).

The fleet file carries each agent's URL, token file and TLS settings (ca_file / tls_sha256),
so a command needs nothing else. `--agent` picks one agent by name (a one-agent fleet needs
no --agent). Before fleets, commands took `--agent URL --token-file FILE`: an --agent value
that is a URL still works that way (plain HTTP or system-trusted HTTPS only; hidden from
--help). Tokens are found in one order for every command: controller/tokens.py.

Plain HTTP with a token to a host that is not loopback is refused unless the command line says
--allow-plain-http (plain_http_option): a fleet file cannot allow it (issue 41).
"""

from __future__ import annotations

import os
from pathlib import Path

import click

from mimesys.errors import ConfigError

HOW_TO_NAME_AN_AGENT = "pass --fleet FILE [--agent NAME], or set $MIMESYS_FLEET to the fleet file"


def fleet_option(f):
    return click.option("--fleet", "fleet_file", type=click.Path(dir_okay=False, path_type=Path), default=None,
                        help="Fleet file (TOML: agent URLs, token files, TLS pins) [default: $MIMESYS_FLEET; "
                             "never ./fleet.toml implicitly].")(f)


def plain_http_option(f):
    return click.option("--allow-plain-http", is_flag=True, default=False,
                        help="Send agent tokens over plain http:// to hosts that are not loopback (readable on "
                             "the path; a fleet file cannot allow this).")(f)


def agent_options(f):
    """--fleet FILE, --agent NAME, --allow-plain-http, and the hidden --token-file of the old
    --agent URL form."""
    f = plain_http_option(f)
    f = click.option("--token-file", type=click.Path(dir_okay=False, path_type=Path), default=None, hidden=True,
                     help="Agent token file (first in the token lookup order).")(f)
    f = click.option("--agent", "agent", default=None, metavar="NAME",
                     help="The fleet file's agent to use (needed when the fleet has several).")(f)
    return fleet_option(f)


def resolve_fleet_file(fleet_file: Path | None) -> Path | None:
    if fleet_file is not None:
        if not fleet_file.is_file():
            raise ConfigError(f"--fleet {fleet_file}: no such file")
        return fleet_file
    env = os.environ.get("MIMESYS_FLEET")
    if env:
        if not Path(env).is_file():
            raise ConfigError(f"$MIMESYS_FLEET={env}: no such file")
        return Path(env)
    return None   # not ./fleet.toml: a file in the working directory does not choose where tokens go


def one_agent(fleet_file: Path | None, agent: str | None, token_file: Path | None = None, *, required: bool = True,
              allow_plain_http: bool = False):
    """The AgentClient the options name, or None when nothing names one and not `required`.
    `allow_plain_http`: the command line's --allow-plain-http."""
    from controller.fleet import AgentClient, FleetConfig
    from controller.tokens import agent_token

    if agent is not None and agent.startswith(("http://", "https://")):   # the pre-fleet spelling
        return AgentClient(agent, agent_token(agent, explicit=token_file), allow_plain_http=allow_plain_http)
    path = resolve_fleet_file(fleet_file)
    if path is None:
        if agent is None and not required:
            return None
        raise ConfigError(f"no agent: {HOW_TO_NAME_AN_AGENT} (a fleet.toml in the current directory is "
                          f"not read unless named)")
    cfg = FleetConfig.load(path)
    if agent is not None:
        spec = cfg.select([agent]).agents[0]
    elif len(cfg.agents) == 1:
        spec = cfg.agents[0]
    else:
        raise ConfigError(f"{path} lists {len(cfg.agents)} agents; pick one with --agent NAME "
                          f"({', '.join(a.name for a in cfg.agents)})")
    return spec.client(token_file=token_file, allow_plain_http=allow_plain_http)
