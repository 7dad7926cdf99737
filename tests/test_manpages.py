"""The manual pages are generated from the commands (packaging/gen-man.py) and must be
current: a command or option added without `make man` fails here."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import click

ROOT = Path(__file__).resolve().parent.parent


def gen():
    spec = importlib.util.spec_from_file_location("gen_man", ROOT / "packaging" / "gen-man.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_man_pages_are_current():
    out = subprocess.run([sys.executable, str(ROOT / "packaging" / "gen-man.py"), "--check"], capture_output=True,
                         text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr


def test_pages_do_not_depend_on_where_the_checkout_is():
    # CI builds from a clone elsewhere: a default that prints this checkout's path (or the
    # home directory) makes the committed page stale there although it passes here
    for path, text in gen().pages().items():
        for local in {str(ROOT), str(ROOT.parent), str(Path.home())} - {"/"}:
            assert local not in text, f"{path.name} prints the local path {local}"


def test_every_visible_command_and_option_and_exit_status_is_in_the_pages():
    from agentd.cli import main as agent
    from mimesys.exitstatus import TABLE
    from controller.cli import main as controller
    # the files on disk (the test above checks they are what the generator writes)
    pages = {p.name: p.read_text() for p in gen().pages()}
    for prog, group in (("mimesys-agent.1", agent), ("mimesys.1", controller)):
        text = pages[prog].replace("\\-", "-")
        ctx = click.Context(group)
        for name in group.list_commands(ctx):
            cmd = group.get_command(ctx, name)
            assert f".SS {prog[:-2]} {name}" in text, name
            for p in cmd.get_params(click.Context(cmd)):
                if isinstance(p, click.Option) and not p.hidden:
                    assert p.opts[-1] in text, (name, p.opts)
        section = text.split(".SH EXIT STATUS", 1)[1]
        for code, _ in TABLE:
            assert f".B {code}" in section
