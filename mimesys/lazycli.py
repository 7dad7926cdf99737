"""A click group whose subcommands live in their own modules and import on first use,
so `mimesys-agent --help` stays fast and the agent never imports what a command it does
not run needs (the controller's torch in particular)."""

from __future__ import annotations

import click

from .exitstatus import ScriptedGroup
from .lazyload import load_target


class LazyGroup(ScriptedGroup):
    """Also the exit-status contract of mimesys/exitstatus.py: both CLIs' top group is one."""

    def __init__(self, *args, lazy_commands: dict[str, str] | None = None, **kw):
        super().__init__(*args, **kw)
        # name -> "package.module:attribute"
        self.lazy_commands = dict(lazy_commands or {})

    def list_commands(self, ctx):
        return sorted(set(super().list_commands(ctx)) | set(self.lazy_commands))

    def get_command(self, ctx, name):
        if name in self.lazy_commands:
            return load_target(self.lazy_commands[name])
        return super().get_command(ctx, name)
