"""`mimesys-agent`: the node agent's command line. One module per command under
agentd/commands/, registered here by name."""

from __future__ import annotations

import click

from mimesys import __version__
from mimesys.lazycli import LazyGroup

COMMANDS = {
    "serve": "agentd.commands.serve:serve",
    "run-plan": "agentd.commands.run_plan:run_plan",
    "record": "agentd.commands.record:record",
    "replay": "agentd.commands.replay:replay",
    "generate": "agentd.commands.generate:generate",
    "info": "agentd.commands.info:info",
    "check-config": "agentd.commands.check_config:check_config",
    "calibrate": "agentd.commands.calibrate:calibrate",
    "tls": "agentd.commands.tls:tls",
    "trace": "agentd.commands.inspect:trace",
    "plan": "agentd.commands.inspect:plan",
}


@click.group(cls=LazyGroup, lazy_commands=COMMANDS, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="mimesys-agent")
def main():
    """mimesys node agent: execute stressor plans, sample the host, serve traces."""


if __name__ == "__main__":
    main()
