"""The agent's configuration: typed, validated at load, errors that name file and key."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agentd.config import Config, load_config
from mimesys.errors import ConfigError

ROOT = Path(__file__).resolve().parent.parent


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_shipped_default_file_loads_and_equals_the_builtin_defaults(tmp_path):
    cfg = load_config(ROOT / "systemd" / "agent.toml", dropin_dir=tmp_path / "none")
    builtin = Config()
    for section in ("agent", "api", "runs", "monitor"):
        assert getattr(cfg, section) == getattr(builtin, section), section
    assert cfg.agent.cpus is None and cfg.api.tls_cert is None  # "auto" → None


def test_values_are_typed_and_frozen(tmp_path):
    f = write(tmp_path / "agent.toml", '[agent]\ncpus = [0]\nstate_dir = "/srv/m"\nscratch_dir = "/srv/m/s"\n'
                                       '[api]\nport = 9000\nmax_body_mib = 1\n')
    cfg = load_config(f)
    assert cfg.agent.cpus == (0,) and cfg.agent.state_dir == Path("/srv/m")
    assert cfg.api.port == 9000 and cfg.api.max_body_bytes == 1 << 20
    with pytest.raises(AttributeError):
        cfg.api.port = 1  # frozen
    assert cfg.sources == (str(f),)


def test_unknown_key_names_the_file_and_lists_the_valid_keys(tmp_path):
    f = write(tmp_path / "agent.toml", "[api]\nprot = 1\n")
    with pytest.raises(ConfigError) as e:
        load_config(f)
    msg = str(e.value)
    assert str(f) in msg and "api.prot" in msg and "bind" in msg and "token_file" in msg


def test_unknown_table_lists_the_valid_tables(tmp_path):
    f = write(tmp_path / "agent.toml", "[apix]\nport = 1\n")
    with pytest.raises(ConfigError, match=r"unknown table \[apix\].*agent, api, runs, monitor, samplers"):
        load_config(f)


@pytest.mark.parametrize("text, fragment", [
    ('[api]\nport = "80"\n', "api.port: expected an integer"),
    ("[api]\npublic_healthz = 1\n", "api.public_healthz: expected true or false"),
    ('[agent]\ncpus = "0-3"\n', "agent.cpus: expected a list of integers"),
    ("[agent]\ncpus = [4096]\n", "not online"),
    ('[agent]\nbackend = "qemu"\n', "valid backends: host, sim"),
    ('[agent]\nstate_dir = "relative"\n', "absolute path"),
    ('[agent]\nscratch_dir = "/"\n', "directory of its own"),
    ('[api]\ntls_cert = "/x.pem"\n', "tls_cert and api.tls_key go together"),
    ("[api]\nport = 70000\n", "not a TCP port"),
    ("[monitor]\ninterval_s = 0\n", "monitor.interval_s"),
    ("[samplers.cpux]\nenabled = true\n", "valid samplers"),
    ('[samplers.cpu]\nenabled = "yes"\n', "samplers.cpu.enabled"),
    ("[api\n", "not valid TOML"),
])
def test_invalid_values_fail_at_load_naming_where(tmp_path, text, fragment):
    f = write(tmp_path / "agent.toml", text)
    with pytest.raises(ConfigError) as e:
        load_config(f)
    assert fragment in str(e.value)


def test_dropins_apply_in_name_order_and_errors_name_the_dropin(tmp_path):
    f = write(tmp_path / "agent.toml", "[api]\nport = 1000\nbind = \"0.0.0.0\"\n")
    write(tmp_path / "agent.d" / "10-port.toml", "[api]\nport = 2000\n")
    write(tmp_path / "agent.d" / "20-port.toml", "[api]\nport = 3000\n")
    cfg = load_config(f)
    assert cfg.api.port == 3000 and cfg.api.bind == "0.0.0.0"  # later file wins, other keys kept
    assert [Path(s).name for s in cfg.sources] == ["agent.toml", "10-port.toml", "20-port.toml"]
    bad = write(tmp_path / "agent.d" / "30-bad.toml", "[runs]\nkepp = 3\n")
    with pytest.raises(ConfigError, match=str(bad)):
        load_config(f)


def test_explicit_missing_file_is_an_error_default_missing_is_defaults(tmp_path, monkeypatch):
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "nope.toml")
    monkeypatch.delenv("MIMESYS_CONFIG", raising=False)
    monkeypatch.setattr("agentd.config.DEFAULT_PATH", tmp_path / "absent" / "agent.toml")
    assert load_config().sources == ()


def test_token_file_checks(tmp_path):
    tok = tmp_path / "token"
    cfg = load_config(write(tmp_path / "agent.toml", f'[api]\ntoken_file = "{tok}"\n'))
    with pytest.raises(ConfigError, match="Create one with"):
        cfg.read_token()
    tok.write_text("short\n")
    tok.chmod(0o600)
    with pytest.raises(ConfigError, match="at least 16"):
        cfg.read_token()
    tok.write_text("0123456789abcdef0123\n")
    tok.chmod(0o644)
    with pytest.raises(ConfigError, match="world-readable"):
        cfg.read_token()
    tok.chmod(0o600)
    assert cfg.read_token() == b"0123456789abcdef0123"


def test_check_config_prints_resolved_config_or_the_error(tmp_path):
    tok = write(tmp_path / "token", "0123456789abcdef0123\n")
    tok.chmod(0o600)
    good = write(tmp_path / "good" / "agent.toml", f'[api]\ntoken_file = "{tok}"\nport = 7777\n')
    env = {**os.environ, "MIMESYS_CONFIG": ""}
    env.pop("MIMESYS_CONFIG")
    out = subprocess.run([sys.executable, "-m", "agentd.cli", "check-config", "--config", str(good)],
                         capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "port = 7777" in out.stdout and "[samplers.cpu]" in out.stdout
    bad = write(tmp_path / "bad" / "agent.toml", "[api]\nport = \"x\"\n")
    out = subprocess.run([sys.executable, "-m", "agentd.cli", "check-config", "--config", str(bad)],
                         capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode != 0
    assert "api.port: expected an integer" in out.stderr and "Traceback" not in out.stderr


def test_check_config_probe_finds_the_runner_of_the_host_backend(tmp_path):
    """--probe builds the backend as `serve` would and, for the host backend, finds mimesys-runner
    (which the backend looks up only when a run starts): the demo's preflight reads this verdict."""
    tok = write(tmp_path / "token", "0123456789abcdef0123\n")
    tok.chmod(0o600)
    cfg = write(tmp_path / "agent.toml", f'[agent]\nbackend = "host"\nstate_dir = "{tmp_path}"\n'
                                         f'[api]\ntoken_file = "{tok}"\n')
    fake = write(tmp_path / "mimesys-runner", "#!/bin/sh\n")

    def probe(runner: Path, backend: str = "host") -> dict:
        env = {k: v for k, v in os.environ.items() if k != "MIMESYS_CONFIG"}
        out = subprocess.run([sys.executable, "-m", "agentd.cli", "check-config", "--config", str(cfg), "--probe",
                              "--backend", backend, "--json"], capture_output=True, text=True, timeout=60,
                             env={**env, "MIMESYS_RUNNER": str(runner)})
        return json.loads(out.stdout)

    fake.chmod(0o755)
    doc = probe(fake)
    assert doc["ok"] is True and doc["probed"] is True and doc["runner"] == str(fake)
    fake.chmod(0o644)
    doc = probe(fake)
    assert doc["ok"] is False and doc["runner"] is None
    assert any(p.startswith("mimesys-runner:") and "not an executable file" in p for p in doc["problems"])
    doc = probe(fake, backend="sim")           # the simulated host runs no runner
    assert doc["ok"] is True and doc["runner"] is None
