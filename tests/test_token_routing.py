"""Tokens only go where the operator said (issue 22): no fleet file is read from the working
directory, a fleet entry for another host that names no token_file gets no token from the
environment or /etc/mimesys/token, a token about to cross the network over plain HTTP is refused
unless the command line says --allow-plain-http (issue 41), and a fleet entry's token_file stays
in the fleet file's directory or the operator's config directory."""

from __future__ import annotations

import http.server
import threading

import pytest
from click.testing import CliRunner

from mimesys.errors import ConfigError

ENV_TOKEN = "operator-env-token-0123456789abcdef"
REMOTE = "http://203.0.113.5:7433"     # TEST-NET-3: never reached, the tests build clients only


def _secret(path, text):
    path.write_text(text)
    path.chmod(0o600)
    return path


@pytest.fixture
def no_ambient_fleet(monkeypatch):
    monkeypatch.delenv("MIMESYS_FLEET", raising=False)
    monkeypatch.delenv("MIMESYS_TOKEN_FILE", raising=False)
    monkeypatch.setenv("MIMESYS_TOKEN", ENV_TOKEN)


@pytest.fixture
def fresh_warnings(monkeypatch):
    import controller.tokens as tokens
    monkeypatch.setattr(tokens, "_warned_plain_http", set())


class _Recorder(http.server.BaseHTTPRequestHandler):
    """An 'agent' that only records the Authorization headers it is sent."""
    seen: list = []

    def do_GET(self):      # noqa: N802 (http.server's naming)
        type(self).seen.append(self.headers.get("Authorization"))
        self.send_response(500)
        self.end_headers()
    do_POST = do_GET

    def log_message(self, *a):
        pass


@pytest.fixture
def recorder():
    _Recorder.seen = []
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}", _Recorder.seen
    finally:
        srv.shutdown()
        srv.server_close()


def test_a_fleet_toml_in_the_working_directory_is_not_read(tmp_path, monkeypatch, no_ambient_fleet, recorder):
    from controller.cli import main
    from controller.commands._agents import one_agent
    url, seen = recorder
    _secret(tmp_path / "planted-token", "planted-token-value\n")
    (tmp_path / "fleet.toml").write_text(f'[[agent]]\nurl = "{url}"\ntoken_file = "planted-token"\nname = "x"\n')
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match=r"no agent: pass --fleet FILE \[--agent NAME\], or set \$MIMESYS_FLEET"):
        one_agent(None, None)
    assert one_agent(None, None, required=False) is None
    for argv in (["forward", "profile", "-o", str(tmp_path / "p.h5"), "--no-progress"],
                 ["fleet", "probe"], ["fleet", "list"]):
        r = CliRunner().invoke(main, argv)
        assert r.exit_code != 0, (argv, r.output)
        assert "--fleet FILE" in r.output and "$MIMESYS_FLEET" in r.output and "Traceback" not in r.output, r.output
    assert seen == []                           # not one request reached the planted fleet's host
    # Named, the same file is used: the operator said so.
    assert one_agent(tmp_path / "fleet.toml", None).url == url
    monkeypatch.setenv("MIMESYS_FLEET", str(tmp_path / "fleet.toml"))
    assert one_agent(None, None).name == "x"


def test_a_remote_fleet_entry_without_token_file_gets_no_ambient_token(tmp_path, no_ambient_fleet):
    from controller.fleet import FleetConfig
    from controller.tokens import agent_token
    local = _secret(tmp_path / "local-token", "local-agent-token\n")
    env = {"MIMESYS_TOKEN": ENV_TOKEN}
    with pytest.raises(ConfigError, match=r"agent h5: its fleet entry names no token_file, and "
                                          r"http://203.0.113.5:7433 is not a loopback address") as e:
        agent_token("h5", fleet_url=REMOTE, env=env, local=local)
    assert ENV_TOKEN not in str(e.value)
    with pytest.raises(ConfigError, match="names no token_file"):
        agent_token("h5", fleet_url=REMOTE, env={}, local=local)     # nor the local agent's own token
    # Loopback entries are this machine's agent: the ambient sources serve them.
    for loop in ("http://127.0.0.1:7433", "https://localhost:7433", "http://[::1]:7433", "http://127.8.0.1:1"):
        assert agent_token("me", fleet_url=loop, env=env, local=local) == ENV_TOKEN
        assert agent_token("me", fleet_url=loop, env={}, local=local) == "local-agent-token"
    # The command line still wins over everything, and a named token_file is used as before.
    cli = _secret(tmp_path / "cli-token", "from-cli\n")
    assert agent_token("h5", explicit=cli, fleet_url=REMOTE, env=env, local=local) == "from-cli"
    # Through the fleet file, as every command reads it.
    fleet = tmp_path / "fleet.toml"
    fleet.write_text(f'[[agent]]\nurl = "{REMOTE}"\nname = "h5"\n')
    with pytest.raises(ConfigError, match="names no token_file"):
        FleetConfig.load(fleet).agents[0].client()
    _secret(tmp_path / "h5-token", "h5-token-value\n")
    fleet.write_text(f'[[agent]]\nurl = "{REMOTE}"\nname = "h5"\ntoken_file = "h5-token"\n')
    assert FleetConfig.load(fleet).agents[0].client(allow_plain_http=True)._token == "h5-token-value"


def test_the_pre_fleet_agent_url_spelling_still_uses_the_environment(no_ambient_fleet, fresh_warnings, capsys):
    from controller.commands._agents import one_agent
    # The URL was typed on the command line: the operator chose the host.
    c = one_agent(None, REMOTE, allow_plain_http=True)
    assert c._token == ENV_TOKEN and c.url == REMOTE
    assert "plain HTTP" in capsys.readouterr().err


def test_plain_http_to_a_remote_host_is_refused_unless_the_command_line_allows_it(tmp_path, fresh_warnings,
                                                                                   capsys):
    # Issue 41, finding 8: a fleet file handed to the operator could say allow_plain_http = true
    # and have the token cross the network in clear text with nothing said. Only the command
    # line (--allow-plain-http) may allow that now; the file's key grants nothing.
    from controller.fleet import AgentClient, FleetConfig
    with pytest.raises(ConfigError, match=r"agent h5: .*plain HTTP to http://203\.0\.113\.5:7433.*--allow-plain-http"):
        AgentClient(REMOTE, ENV_TOKEN, name="h5")
    for remote in ("http://evil.localhost:7433", "http://localhost.evil.example:1", "http://10.0.0.5:1"):
        with pytest.raises(ConfigError, match="--allow-plain-http"):
            AgentClient(remote, ENV_TOKEN)
    for quiet in ("http://127.0.0.1:7433", "http://127.3.2.1:7433", "http://localhost:7433", "http://[::1]:7433",
                  "https://203.0.113.5:7433"):
        AgentClient(quiet, ENV_TOKEN)
    assert capsys.readouterr().err == ""
    # Allowed on the command line: once per agent, said on stderr.
    AgentClient(REMOTE, ENV_TOKEN, name="h5", allow_plain_http=True)
    AgentClient(REMOTE, ENV_TOKEN, name="h5", allow_plain_http=True)
    err = capsys.readouterr().err
    assert err.count("WARNING") == 1 and "agent h5" in err and REMOTE in err and ENV_TOKEN not in err

    tok = _secret(tmp_path / "t", "fleet-token\n")
    fleet = tmp_path / "fleet.toml"
    fleet.write_text('[[agent]]\nurl = "http://203.0.113.7:1"\ntoken_file = "t"\nallow_plain_http = true\n')
    spec = FleetConfig.load(fleet).agents[0]
    with pytest.raises(ConfigError, match=r"203\.0\.113\.7.*--allow-plain-http") as e:
        spec.client()
    assert "fleet-token" not in str(e.value) and tok.exists()
    assert spec.client(allow_plain_http=True).url == "http://203.0.113.7:1"


def test_the_allow_plain_http_flag_is_the_command_lines(tmp_path, fresh_warnings, monkeypatch):
    import click

    from controller.commands._agents import agent_options, one_agent
    from controller.cli import main as cli
    monkeypatch.delenv("MIMESYS_FLEET", raising=False)
    _secret(tmp_path / "t", "fleet-token\n")
    fleet = tmp_path / "fleet.toml"
    fleet.write_text('[[agent]]\nurl = "http://203.0.113.9:1"\ntoken_file = "t"\nallow_plain_http = true\n')

    @click.command()
    @agent_options
    def probe(fleet_file, agent, token_file, allow_plain_http):
        click.echo(one_agent(fleet_file, agent, token_file, allow_plain_http=allow_plain_http).url)

    r = CliRunner().invoke(probe, ["--fleet", str(fleet)])
    assert r.exit_code != 0 and "--allow-plain-http" in str(r.exception)
    r = CliRunner().invoke(probe, ["--fleet", str(fleet), "--allow-plain-http"])
    assert r.exit_code == 0 and "http://203.0.113.9:1" in r.output
    for command in (["collect"], ["evaluate"], ["fleet", "probe"], ["align"], ["forward", "profile"], ["serve"],
                    ["import"]):
        assert "--allow-plain-http" in CliRunner().invoke(cli, command + ["--help"]).output, command


def test_a_fleet_token_file_stays_in_the_fleet_or_config_directory(tmp_path, monkeypatch):
    # Issue 41, finding 8: a fleet file handed over (CAMPAIGN/fleet.toml) named any one-line 0600
    # secret of the operator as an agent's token, and sent it to the URL it chose.
    from controller.commands._agents import one_agent
    from controller.fleet import FleetConfig
    config = tmp_path / "xdg"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(config))
    camp = tmp_path / "campaign"
    (camp / "tokens").mkdir(parents=True)
    (config / "mimesys").mkdir(parents=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    outside = _secret(elsewhere / "id_secret", "operator-secret\n")
    _secret(camp / "tokens" / "h1", "campaign-token\n")
    _secret(config / "mimesys" / "h1", "config-token\n")
    (camp / "tokens" / "link").symlink_to(outside)
    fleet = camp / "fleet.toml"
    for bad in (str(outside), "../elsewhere/id_secret", "tokens/../../elsewhere/id_secret", "tokens/link"):
        fleet.write_text(f'[[agent]]\nurl = "https://203.0.113.5:1"\ntoken_file = "{bad}"\n')
        with pytest.raises(ConfigError, match=r"fleet\.toml: agent #1: token_file .* is outside the fleet file's "
                                              r"directory .* and .*mimesys") as e:
            FleetConfig.load(fleet)
        assert "operator-secret" not in str(e.value)
    for good, token in (("tokens/h1", "campaign-token"), (str(camp / "tokens" / "h1"), "campaign-token"),
                        (str(config / "mimesys" / "h1"), "config-token")):
        fleet.write_text(f'[[agent]]\nurl = "https://203.0.113.5:1"\ntoken_file = "{good}"\n')
        assert FleetConfig.load(fleet).agents[0].token() == token
    # Named on the command line, a token file may be anywhere: the operator typed it.
    assert one_agent(fleet, None, outside)._token == "operator-secret"


def test_allow_plain_http_is_checked(tmp_path):
    from controller.fleet import FleetConfig
    p = tmp_path / "fleet.toml"
    p.write_text('[[agent]]\nurl = "http://a:1"\nallow_plain_http = "yes"\n')
    with pytest.raises(ConfigError, match=r"agent #1: allow_plain_http must be true or false"):
        FleetConfig.load(p)
    p.write_text('[[agent]]\nurl = "https://a:1"\nallow_plain_http = true\n')
    with pytest.raises(ConfigError, match=r"allow_plain_http applies to http:// URLs"):
        FleetConfig.load(p)
