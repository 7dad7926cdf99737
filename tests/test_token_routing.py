"""Tokens only go where the operator said (issue 22): no fleet file is read from the working
directory, a fleet entry for another host that names no token_file gets no token from the
environment or /etc/mimesys/token, and a token about to cross the network over plain HTTP is
announced once per agent unless the entry says allow_plain_http = true."""

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
    fleet.write_text(f'[[agent]]\nurl = "{REMOTE}"\nname = "h5"\ntoken_file = "h5-token"\nallow_plain_http = true\n')
    assert FleetConfig.load(fleet).agents[0].client()._token == "h5-token-value"


def test_the_pre_fleet_agent_url_spelling_still_uses_the_environment(no_ambient_fleet, fresh_warnings, capsys):
    from controller.commands._agents import one_agent
    # The URL was typed on the command line: the operator chose the host.
    c = one_agent(None, REMOTE)
    assert c._token == ENV_TOKEN and c.url == REMOTE
    assert "plain HTTP" in capsys.readouterr().err


def test_plain_http_to_a_remote_host_warns_once_per_agent(tmp_path, fresh_warnings, capsys):
    from controller.fleet import AgentClient, FleetConfig
    AgentClient(REMOTE, ENV_TOKEN, name="h5")
    AgentClient(REMOTE, ENV_TOKEN, name="h5")            # the same agent again: no second warning
    err = capsys.readouterr().err
    assert err.count("WARNING") == 1 and "agent h5" in err and REMOTE in err and "allow_plain_http" in err
    assert ENV_TOKEN not in err
    for quiet in ("http://127.0.0.1:7433", "http://localhost:7433", "https://203.0.113.5:7433"):
        AgentClient(quiet, ENV_TOKEN)
    AgentClient("http://203.0.113.6:7433", ENV_TOKEN, allow_plain_http=True)
    assert capsys.readouterr().err == ""

    tok = _secret(tmp_path / "t", "fleet-token\n")
    fleet = tmp_path / "fleet.toml"
    fleet.write_text(f'[[agent]]\nurl = "http://203.0.113.7:1"\ntoken_file = "{tok}"\nallow_plain_http = true\n'
                     f'[[agent]]\nurl = "http://203.0.113.8:1"\ntoken_file = "{tok}"\n')
    cfg = FleetConfig.load(fleet)
    for spec in cfg.agents:
        spec.client()
    err = capsys.readouterr().err
    assert "203.0.113.8" in err and "203.0.113.7" not in err and "fleet-token" not in err


def test_allow_plain_http_is_checked(tmp_path):
    from controller.fleet import FleetConfig
    p = tmp_path / "fleet.toml"
    p.write_text('[[agent]]\nurl = "http://a:1"\nallow_plain_http = "yes"\n')
    with pytest.raises(ConfigError, match=r"agent #1: allow_plain_http must be true or false"):
        FleetConfig.load(p)
    p.write_text('[[agent]]\nurl = "https://a:1"\nallow_plain_http = true\n')
    with pytest.raises(ConfigError, match=r"allow_plain_http applies to http:// URLs"):
        FleetConfig.load(p)
