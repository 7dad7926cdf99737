"""One name per idea across both CLIs (mimesys/cliopts.py): -o/--output for what a command
writes, --progress/--no-progress for bars, --target-host / --bind instead of two --host; the
old spellings still work, hidden from --help, and giving both spellings is a usage error."""

from __future__ import annotations

import click
from click.testing import CliRunner

from agentd.cli import main as agent
from controller.cli import main as controller


def visible(group, path):
    ctx = click.Context(group)
    cmd = group
    for name in path:
        cmd = cmd.get_command(ctx, name)
        ctx = click.Context(cmd, parent=ctx)
    return {o for p in cmd.get_params(ctx) if isinstance(p, click.Option) and not p.hidden for o in p.opts + p.secondary_opts}, \
        {o for p in cmd.get_params(ctx) if isinstance(p, click.Option) and p.hidden for o in p.opts}


def test_outputs_are_dash_o_output_everywhere_and_old_spellings_are_hidden():
    for group, path, old in ((controller, ["train"], "--out"), (controller, ["align"], "--out"),
                             (controller, ["export"], "--onnx"), (controller, ["evaluate"], "--outdir"),
                             (controller, ["demo"], "--out"), (agent, ["calibrate"], "--out"),
                             (agent, ["replay"], None), (agent, ["record"], None), (agent, ["generate"], None),
                             (controller, ["dataset", "build"], None), (controller, ["import"], None)):
        shown, hidden = visible(group, path)
        assert {"-o", "--output"} <= shown, (path, shown)
        if old:
            assert old in hidden and old not in shown, path
    for group, path in ((controller, ["train"]), (controller, ["align"]), (controller, ["collect"]),
                        (controller, ["evaluate"]), (agent, ["replay"]), (agent, ["record"]),
                        (agent, ["run-plan"]), (agent, ["calibrate"]), (controller, ["forward", "profile"]),
                        (controller, ["forward", "fit"])):
        shown, hidden = visible(group, path)
        assert {"--progress", "--no-progress"} <= shown and "--quiet" not in shown, path
    shown, hidden = visible(controller, ["import"])
    assert "--target-host" in shown and "--host" in hidden
    shown, hidden = visible(controller, ["serve"])
    assert "--bind" in shown and "--host" in hidden


def test_old_and_new_spellings_reach_the_same_parameter(tmp_path):
    seen = {}

    from mimesys.cliopts import output_option, renamed_option

    @click.command()
    @output_option("out", "--out", required=True)
    @renamed_option("--bind", "host", "--host", default="127.0.0.1")
    def cmd(out, host):
        seen.update(out=out, host=host)

    r = CliRunner().invoke(cmd, ["--out", "a", "--host", "h"])
    assert r.exit_code == 0 and seen == {"out": "a", "host": "h"}
    r = CliRunner().invoke(cmd, ["-o", "b"])
    assert r.exit_code == 0 and seen == {"out": "b", "host": "127.0.0.1"}
    r = CliRunner().invoke(cmd, ["-o", "b", "--out", "c"])
    assert r.exit_code == 2 and "--out is the old spelling of --output" in r.output
    r = CliRunner().invoke(cmd, [])
    assert r.exit_code == 2 and "Missing option '--output'" in r.output


JSON_COMMANDS = {
    agent: [["record"], ["run-plan"], ["replay"], ["info"], ["check-config"], ["calibrate"], ["tls", "init"],
            ["tls", "fingerprint"], ["trace", "info"], ["plan", "show"]],
    controller: [["collect"], ["evaluate"], ["evaluate", "colocation"], ["evaluate", "rescore"], ["fleet", "list"],
                 ["fleet", "probe"], ["import"], ["align"], ["dataset", "build"], ["dataset", "info"], ["demo"],
                 ["forward", "score"], ["generate-from-file"], ["profile-from-file"]],
}


def test_json_is_one_option_everywhere():
    """Every command a script reads takes --json (mimesys/cliopts.py json_option: only JSON on
    stdout); tests/test_exit_status.py runs them."""
    for group, paths in JSON_COMMANDS.items():
        for path in paths:
            shown, _ = visible(group, path)
            assert "--json" in shown, path
