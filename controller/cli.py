"""`mimesys`: the controller's command line. One module per command under
controller/commands/, registered here by name."""

from __future__ import annotations

import signal

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


def _unwind(signum, _frame):
    raise SystemExit(128 + signum)


def run() -> None:
    """The `mimesys` command: main() with SIGTERM (kill, systemd, a CI job's timeout) unwinding
    like ^C, so that what a command started is stopped by its own finally blocks: the demo's
    agent and its temporary directory, a campaign's open runs. Python's default for SIGTERM is
    to die on the spot and leave them behind. Not in main(): tests call that in-process."""
    signal.signal(signal.SIGTERM, _unwind)
    main()


if __name__ == "__main__":
    run()
