"""A TLS fleet end to end on 127.0.0.1: three real `mimesys-agent serve` processes (simulated
host backend, so it stays fast; everything it produces is labelled simulated), each with a
self-signed pair from `mimesys-agent tls init`; one fleet file pins two of them by SHA-256
and trusts the third through ca_file. `collect`, `evaluate` and `import` all run from that
one file; a wrong pin is refused with an error that says so."""

import json
import os
import re
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TOKEN = "tls-fleet-token-0123456789abcdef"
AGENT = [sys.executable, "-m", "agentd.cli"]
MIMESYS = [sys.executable, "-m", "controller.cli"]
ENV = {**os.environ, "MIMESYS_SIM_CPUS": "2", "MIMESYS_SIM_SPEEDUP": "0", "MIMESYS_TOKEN": "",
       "MIMESYS_FLEET": ""}

pytest.importorskip("cryptography", reason="tls init needs python3-cryptography")


def tls_init(d: Path) -> str:
    out = subprocess.run(AGENT + ["tls", "init", "--cert", str(d / "agent.crt"), "--key", str(d / "agent.key"),
                                  "--san", "127.0.0.1", "--san", "localhost", "--json"],
                         capture_output=True, text=True, cwd=ROOT, timeout=60, check=True)
    return json.loads(out.stdout)["sha256"]


def start(d: Path):
    (d / "token").write_text(TOKEN + "\n")
    (d / "token").chmod(0o600)
    cfg = d / "agent.toml"
    cfg.write_text(f'[agent]\nbackend = "sim"\nstate_dir = "{d}/state"\nscratch_dir = "{d}/state/scratch"\n'
                   f'[api]\ntoken_file = "{d}/token"\nbind = "127.0.0.1"\nport = 0\n'
                   f'tls_cert = "{d}/agent.crt"\ntls_key = "{d}/agent.key"\n')
    log = (d / "agent.log").open("w")
    proc = subprocess.Popen(AGENT + ["serve", "--config", str(cfg)], stdout=subprocess.PIPE, stderr=log, text=True,
                            cwd=ROOT, env=ENV)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        m = re.search(r"listening on (https://127\.0\.0\.1:\d+)", line or "")
        if m:
            return proc, m[1]
        if not line:
            break
    proc.kill()
    raise AssertionError(f"agent in {d} did not start: {(d / 'agent.log').read_text()}")


@pytest.fixture
def tls_fleet(tmp_path):
    procs, agents = [], []
    try:
        for name in ("a1", "a2", "a3"):
            d = tmp_path / name
            d.mkdir()
            fp = tls_init(d)
            proc, url = start(d)
            procs.append(proc)
            agents.append({"name": name, "dir": d, "url": url, "sha256": fp})
        tok = tmp_path / "token"
        tok.write_text(TOKEN)
        tok.chmod(0o600)
        fleet = tmp_path / "fleet.toml"
        fleet.write_text(
            "".join(f'[[agent]]\nname = "{a["name"]}"\nurl = "{a["url"]}"\ntoken_file = "token"\n'
                    f'tls_sha256 = "{a["sha256"]}"\n' for a in agents[:2])
            + f'[[agent]]\nname = "a3"\nurl = "{agents[2]["url"]}"\ntoken_file = "token"\n'
              f'ca_file = "{agents[2]["dir"]}/agent.crt"\n')
        yield fleet, agents
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(15)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()


def mimesys(*args, timeout=180):
    return subprocess.run(MIMESYS + [str(a) for a in args], capture_output=True, text=True, cwd=ROOT,
                          timeout=timeout, env=ENV)


def test_tls_init_writes_a_0600_key_and_prints_the_certificates_sha256(tmp_path):
    fp = tls_init(tmp_path)
    assert stat.S_IMODE((tmp_path / "agent.key").stat().st_mode) == 0o600
    out = subprocess.run(["openssl", "x509", "-in", str(tmp_path / "agent.crt"), "-noout", "-fingerprint",
                          "-sha256"], capture_output=True, text=True, check=True)
    assert out.stdout.strip().split("=", 1)[1] == fp
    again = subprocess.run(AGENT + ["tls", "init", "--cert", str(tmp_path / "agent.crt"), "--key",
                                    str(tmp_path / "agent.key")], capture_output=True, text=True, cwd=ROOT)
    assert again.returncode != 0 and "exists; pass --force" in again.stderr


@pytest.mark.slow
def test_collect_evaluate_and_import_from_one_tls_fleet_file(tmp_path, tls_fleet):
    fleet, agents = tls_fleet
    # collect: every agent of the fleet executes chains over TLS (round 0 as the one-hot sweep: the
    # solo profile that round 0 takes by default runs on one agent only).
    camp = tmp_path / "camp"
    camp.mkdir()
    (camp / "campaign.toml").write_text('round0 = "sweep"\nround_size = 12\nchain_len = 4\nrepetitions = 2\n'
                                        'sweep_intensities = [1.0]\n')
    out = mimesys("collect", camp, "--rounds", "0", "--fleet", fleet, "--no-progress")
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout.strip().splitlines()[-1].split(" (SIMULATED")[0])
    assert summary["samples"] > 0 and summary["simulated"] is True
    ran = {a["name"]: len(list((a["dir"] / "state" / "runs").glob("*/run.json"))) for a in agents}
    assert all(n > 0 for n in ran.values()), ran
    # import: the target host is the pinned agent a2's /v1/info.
    src = ROOT / "tests" / "fixtures" / "importers" / "prometheus_node_exporter.json"
    target = tmp_path / "imported.h5"
    out = mimesys("import", src, "--format", "prometheus", "--window", "1", "--fleet", fleet, "--agent", "a2",
                  "-o", target)
    assert out.returncode == 0, out.stderr
    assert "mapped onto a2 (2 CPUs, simulated)" in out.stdout
    # evaluate on the CA-verified agent, against the imported trace, with a baseline from the campaign.
    ds = tmp_path / "ds.h5"
    assert mimesys("dataset", "build", camp, "-o", ds).returncode == 0
    out = mimesys("evaluate", "--fleet", fleet, "--agent", "a3", "--trace", target, "--method", "single",
                  "--dataset", ds, "--warmup", "0", "-o", tmp_path / "eval")
    assert out.returncode == 0, out.stderr
    res = json.loads((tmp_path / "eval" / "results.json").read_text())
    assert res["runs"] and not any(r.get("error") for r in res["runs"]), res["runs"]


def test_a_wrong_pin_is_refused_with_a_clear_error(tmp_path, tls_fleet):
    fleet, agents = tls_fleet
    bad = tmp_path / "bad.toml"
    # a1's URL with a2's fingerprint: a different certificate than the one pinned.
    bad.write_text(f'[[agent]]\nname = "a1"\nurl = "{agents[0]["url"]}"\ntoken_file = "token"\n'
                   f'tls_sha256 = "{agents[1]["sha256"]}"\n')
    src = ROOT / "tests" / "fixtures" / "importers" / "prometheus_node_exporter.json"
    out = mimesys("import", src, "--format", "prometheus", "--window", "15", "--fleet", bad, "-o",
                  tmp_path / "x.h5")
    assert out.returncode != 0 and "Traceback" not in out.stderr
    assert (f"refused: the agent's TLS certificate has SHA-256 {agents[0]['sha256']}, but the fleet file pins "
            f"tls_sha256 = {agents[1]['sha256']}") in out.stderr, out.stderr
    assert not (tmp_path / "x.h5").exists()
    out = mimesys("collect", tmp_path / "camp2", "--rounds", "0", "--fleet", bad, "--round-size", "4",
                  "--chain-len", "4", "--no-progress")
    assert out.returncode != 0 and "refused: the agent's TLS certificate has SHA-256" in out.stderr, out.stderr
    # No pin and no CA: the self-signed certificate does not verify against the system's CAs.
    bad.write_text(f'[[agent]]\nname = "a1"\nurl = "{agents[0]["url"]}"\ntoken_file = "token"\n')
    out = mimesys("import", src, "--format", "prometheus", "--window", "15", "--fleet", bad, "-o",
                  tmp_path / "x.h5")
    assert out.returncode != 0 and "certificate does not verify" in out.stderr, out.stderr


def test_one_token_lookup_order(tmp_path):
    from mimesys.errors import ConfigError
    from controller.tokens import agent_token

    def f(name, text):
        p = tmp_path / name
        p.write_text(text)
        p.chmod(0o600)
        return p
    cli, entry, envf, local = f("cli", "from-cli\n"), f("entry", "from-entry"), f("envf", "from-env-file"), \
        f("local", "from-local")
    env = {"MIMESYS_TOKEN": "from-env", "MIMESYS_TOKEN_FILE": str(envf)}
    assert agent_token("a", explicit=cli, fleet_entry=entry, env=env, local=local) == "from-cli"
    assert agent_token("a", fleet_entry=entry, env=env, local=local) == "from-entry"
    assert agent_token("a", env=env, local=local) == "from-env"
    assert agent_token("a", env={"MIMESYS_TOKEN_FILE": str(envf)}, local=local) == "from-env-file"
    assert agent_token("a", env={}, local=local) == "from-local"
    with pytest.raises(ConfigError, match=r"agent a: no token; looked in --token-file, the fleet entry's "
                                          r"token_file, \$MIMESYS_TOKEN, \$MIMESYS_TOKEN_FILE"):
        agent_token("a", env={}, local=tmp_path / "none")
    # A source that is set but broken is an error, not a silent fall-through to the next one.
    with pytest.raises(ConfigError, match=r"agent a: token_file \(fleet file\) .*missing.*cannot read"):
        agent_token("a", fleet_entry=tmp_path / "missing", env=env, local=local)


def test_fleet_file_tls_keys_are_checked(tmp_path):
    from mimesys.errors import ConfigError
    from controller.fleet import FleetConfig
    p = tmp_path / "fleet.toml"
    p.write_text('[[agent]]\nurl = "https://a:1"\ntls_sha256 = "abc"\n')
    with pytest.raises(ConfigError, match=r"agent #1: tls_sha256 must be a SHA-256 fingerprint"):
        FleetConfig.load(p)
    p.write_text('[[agent]]\nurl = "http://a:1"\ntls_sha256 = "' + "ab" * 32 + '"\n')
    with pytest.raises(ConfigError, match=r"apply to https:// URLs"):
        FleetConfig.load(p)
    p.write_text('[[agent]]\nurl = "https://a:1"\nca_file = "nope.crt"\n')
    with pytest.raises(ConfigError, match=r"ca_file .*nope.crt does not exist"):
        FleetConfig.load(p)
    p.write_text('[[agent]]\nurl = "https://a:1"\nname = "x"\n[[agent]]\nurl = "https://b:1"\nname = "x"\n')
    with pytest.raises(ConfigError, match=r"name 'x' used twice"):
        FleetConfig.load(p)
    p.write_text('[[agent]]\nurl = "https://a:1"\nname = "x"\n')
    with pytest.raises(ConfigError, match=r"no agent named 'y'; agents: x"):
        FleetConfig.load(p).select(["y"])
