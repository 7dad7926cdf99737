"""`mimesys`: the controller's command line. One module per command under
controller/commands/, registered here by name."""

from __future__ import annotations

import click

from mimesys.lazycli import LazyGroup

from . import __version__

COMMANDS = {
    "fleet": "controller.commands.fleet:fleet",
    "collect": "controller.commands.collect:collect",
    "dataset": "controller.commands.dataset:dataset",
    "train": "controller.commands.train:train",
    "export": "controller.commands.export:export",
    "align": "controller.commands.align:align",
    "import": "controller.commands.import_trace:import_trace",
    "evaluate": "controller.commands.evaluate:evaluate",
    "forward": "controller.commands.forward:forward",
    "serve": "controller.commands.serve:serve",
    "generate-from-file": "controller.commands.client:generate_from_file",
    "profile-from-file": "controller.commands.client:profile_from_file",
    "demo": "controller.commands.demo:demo",
}


@click.group(cls=LazyGroup, lazy_commands=COMMANDS, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="mimesys")
def main():
    """mimesys controller: collect, train, align, export, import and evaluate."""


if __name__ == "__main__":
    main()
