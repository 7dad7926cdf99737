"""What the campaign tests share: simulated agents (bench/sim_agents.py) in their own process on
127.0.0.1, a fleet file naming them, and a small campaign configuration."""

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TOKEN = "campaign-test-token-0123456789"


def start_agents_process(tmp_path, n, speedup):
    tok = tmp_path / "token"
    tok.write_text(TOKEN)
    tok.chmod(0o600)
    proc = subprocess.Popen([sys.executable, str(ROOT / "bench" / "sim_agents.py"), "--n", str(n),
                             "--token-file", str(tok), "--state-dir", str(tmp_path / "agents"),
                             "--speedup", str(speedup)], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    urls = json.loads(proc.stdout.readline())["urls"]
    fleet = tmp_path / "fleet.toml"
    fleet.write_text("".join(f'[[agent]]\nurl = "{u}"\ntoken_file = "token"\n' for u in urls))
    return proc, fleet


def stop_agents(proc):
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=10)


COLLECT = [sys.executable, "-m", "controller.cli", "collect"]
SMALL = ["--round-size", "24", "--chain-len", "8", "--sweep-intensities", "1.0", "--no-progress"]


def small_campaign(path, **config):
    """A campaign directory configured small (a lighter surrogate than the defaults: fast tests)."""
    from controller.campaign.campaign import CampaignConfig
    path.mkdir(parents=True)
    cfg = CampaignConfig(**{"round_size": 24, "chain_len": 8, "hold_max": 3, "sweep_intensities": (1.0,), "pool": 400,
                            "trees": 16, **config})
    (path / "campaign.toml").write_text(cfg.to_toml())
    return path


@pytest.fixture
def agents(tmp_path):
    pytest.importorskip("agentd.api.app", reason="the agent HTTP API is not in this checkout yet")
    proc, fleet = start_agents_process(tmp_path, 2, speedup=240.0)
    yield fleet
    stop_agents(proc)
