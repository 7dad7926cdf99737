"""Collection campaigns: the crash-safe store, the proposals, and whole campaigns against real
agent apps (simulated host) on 127.0.0.1, including SIGKILL of the controller mid-round."""

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from controller.campaign import proposals  # noqa: E402
from controller.campaign.coverage import coverage  # noqa: E402
from controller.campaign.store import MAGIC, RecordLog, StoreError  # noqa: E402

TOKEN = "campaign-test-token-0123456789"


# -- store --------------------------------------------------------------------------------
def test_store_survives_torn_tail_and_ignores_duplicates(tmp_path):
    p = tmp_path / "samples.log"
    log = RecordLog(p)
    log.append([{"key": "a", "x": b"1" * 100}, {"key": "b", "x": 2}])
    log.append([{"key": "a", "x": 3}])           # a duplicate key is never written twice
    log.close()
    size = p.stat().st_size
    with open(p, "ab") as f:                     # a crash in the middle of the next append
        f.write(b"\x40\x00\x00\x00\x12\x34")
    log = RecordLog(p)
    assert [r["key"] for r in log] == ["a", "b"] and log.records[0]["x"] == b"1" * 100
    assert log.truncated_bytes == 6 and p.stat().st_size == size
    log.append([{"key": "c"}])
    log.close()
    assert [r["key"] for r in RecordLog(p)] == ["a", "b", "c"]


def test_store_refuses_damage_before_good_records(tmp_path):
    p = tmp_path / "samples.log"
    log = RecordLog(p)
    log.append([{"key": "a", "pad": "x" * 50}])
    log.append([{"key": "b"}])
    log.close()
    data = bytearray(p.read_bytes())
    data[len(MAGIC) + 20] ^= 0xFF                # flip a byte inside record "a"
    p.write_bytes(bytes(data))
    with pytest.raises(StoreError, match=r"byte offset 8 is damaged"):
        RecordLog(p)


# -- proposals ----------------------------------------------------------------------------
def test_one_hot_sweep_and_feasibility():
    s = proposals.one_hot_sweep(5, 4)
    assert s.shape == (5 * 3 * 3, 5, 4)
    assert ((s > 0).sum(axis=(1, 2)) >= 1).all()
    assert all(len(np.unique(np.nonzero(a)[0])) == 1 for a in s)     # one stressor each
    a = proposals.feasible(np.random.default_rng(0).random((50, 6, 4)) * 0.9)
    assert a.dtype == np.float32 and (a.sum(axis=1) <= 1.0).all() and (a >= 0).all()


def test_hybrid_proposals_are_valid_and_target_gaps(catalog):
    from mimesys.sim import SimModel, SimParams
    rng = np.random.default_rng(1)
    M, K = len(catalog), 4
    m = SimModel.from_catalog(catalog, SimParams())
    X = np.concatenate([proposals.one_hot_sweep(M, K), proposals.random_compositions(rng, 60, M, K)])
    obs, _ = m.simulate(X, None, rng)
    names = [s.name for s in m.schema()]
    ki = [names.index(n) for n in ("cpu.util", "mem.bw_Bps", "disk.read_Bps", "net.lo.tx_Bps")]
    Y = obs[:, ki] / obs[:, ki].max(axis=0)
    settings = proposals.NoveltySettings(pool=400, trees=20, hull_fraction=0.5)
    comps, rep = proposals.hybrid(rng, X, Y, 40, [(0, 1), (1, 2), (2, 3)], settings)
    assert comps.shape == (40, M, K) and rep.hull == 20 and rep.novelty == 20
    assert (comps.sum(axis=1) <= 1.0).all() and (comps >= 0).all() and (comps.sum(axis=(1, 2)) > 0).all()
    assert len({c.tobytes() for c in comps}) == 40                    # no repeats


def test_coverage_counts_occupied_cells():
    Y = np.array([[0.0, 0.0, 0.0], [0.99, 0.99, 0.5], [0.01, 0.02, 0.0]])
    c = coverage(Y, grid=10)
    assert c["pairs"] == 3 and c["occupied_cells"] == 6 and c["total_cells"] == 300


# -- whole campaigns ------------------------------------------------------------------------
def _agents(tmp_path, n, speedup):
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


def _stop(proc):
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=10)


COLLECT = [sys.executable, "-m", "controller.cli", "collect"]
SMALL = ["--round-size", "24", "--chain-len", "8", "--sweep-intensities", "1.0", "--no-progress"]


def small_campaign(path):
    """A campaign directory configured small (a lighter surrogate than the defaults: fast tests)."""
    from controller.campaign.campaign import CampaignConfig
    path.mkdir(parents=True)
    cfg = CampaignConfig(round_size=24, chain_len=8, hold_max=3, sweep_intensities=(1.0,), pool=400, trees=16)
    (path / "campaign.toml").write_text(cfg.to_toml())
    return path


@pytest.fixture
def agents(tmp_path):
    pytest.importorskip("agentd.api.app", reason="the agent HTTP API is not in this checkout yet")
    proc, fleet = _agents(tmp_path, 2, speedup=60.0)
    yield fleet
    _stop(proc)


def test_campaign_runs_builds_dataset_and_reports(tmp_path, agents):
    camp = small_campaign(tmp_path / "camp")
    out = subprocess.run(COLLECT + [str(camp), "--rounds", "1", "--fleet", str(agents)] + SMALL,
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "round 1:" in out.stdout and "SIMULATED" in out.stdout
    summary = json.loads(out.stdout.strip().splitlines()[-1].split(" (SIMULATED")[0])
    assert summary["samples"] > 0 and summary["simulated"] is True
    assert (camp / "reports" / "coverage_round_0001.png").stat().st_size > 10_000
    hist = json.loads((camp / "reports" / "coverage.json").read_text())
    assert [h["round"] for h in hist] == [0, 1] and hist[1]["coverage"]["occupied_cells"] >= \
        hist[0]["coverage"]["occupied_cells"]
    from click.testing import CliRunner

    from controller.cli import main as mimesys
    from test_exit_status import separate_streams
    ds_path = tmp_path / "d.h5"
    out = separate_streams().invoke(mimesys, ["dataset", "build", str(camp), "-o", str(ds_path), "--json"])
    assert out.exit_code == 0, out.output
    built = json.loads(out.stdout)   # --json: only the summary on stdout
    from controller.dataset import Dataset
    ds = Dataset.read(ds_path)
    assert built["dataset"] == str(ds_path) and built["samples"] == ds.S and built["simulated"] is True
    assert ds.simulated and ds.S == summary["samples"] - ds.provenance["dropped_unstable"]
    assert set(np.unique(ds.round)) <= {0, 1}
    # the solo profile was recorded before round 0, and `forward fit` finds it through the dataset
    assert (camp / "profile.h5").exists() and "solo profile" in (camp / "logs" / "collect.log").read_text()
    out = CliRunner().invoke(mimesys, ["forward", "fit", str(ds_path), "-o", str(tmp_path / "fm"), "--members", "2",
                                       "--steps", "50"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.output.strip().splitlines()[-1])["simulated"] is True
    # compositions are held for 1..3 windows: steady transitions next to changes
    steady = (ds.prev_action == ds.action).all(axis=(1, 2))
    assert 0.15 < steady.mean() < 0.85, steady.mean()
    # the campaign refuses a contradicting option on resume
    out = CliRunner().invoke(mimesys, ["collect", str(camp), "--rounds", "1", "--fleet", str(agents),
                                       "--strategy", "random"])
    assert out.exit_code != 0 and "created with strategy = 'novelty'" in out.output


def _acked(camp):
    text = (camp / "logs" / "collect.log").read_text() if (camp / "logs" / "collect.log").exists() else ""
    return re.findall(r"acknowledged (r\d+/c\d+)", text)


def _kill_when(camp, agents, pred, timeout=90):
    proc = subprocess.Popen(COLLECT + [str(camp), "--rounds", "2", "--fleet", str(agents)] + SMALL,
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    t0 = time.monotonic()
    try:
        while not pred(_acked(camp)):
            assert proc.poll() is None, "collect ended before it could be killed"
            assert time.monotonic() - t0 < timeout
            time.sleep(0.01)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    return set(_acked(camp))


def test_sigkill_mid_round_then_resume_loses_and_duplicates_nothing(tmp_path, agents):
    camp = small_campaign(tmp_path / "camp")
    # kill 1: in round 0, after three chains were acknowledged
    acked1 = _kill_when(camp, agents, lambda a: len(a) >= 3)
    # kill 2: in round 1, once one of its chains was acknowledged (its proposals are on disk)
    acked2 = _kill_when(camp, agents, lambda a: any(k.startswith("r1/") for k in a))
    assert (camp / "rounds" / "round_0001.npz").exists()
    out = subprocess.run(COLLECT + [str(camp), "--rounds", "2", "--fleet", str(agents)] + SMALL,
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr

    log = RecordLog(camp / "samples.log")
    keys = [r["key"] for r in log if r["type"] == "chain"]
    assert log.duplicates == 0 and len(keys) == len(set(keys))          # nothing written twice
    assert acked1 | acked2 <= set(keys)                                  # nothing acknowledged lost
    log.close()                                                          # one opener at a time
    from controller.campaign.campaign import Campaign
    c = Campaign.open(camp, create=False)
    for r in range(3):
        with np.load(c.round_path(r)) as z:
            expected = c.chains(z["compositions"])
        got = sorted(int(k.split("/c")[1]) for k in keys if k.startswith(f"r{r}/"))
        assert got == list(range(len(expected))), f"round {r}"          # every chain exactly once
        for rec in c.chain_records():                                    # and it ran what was proposed
            if rec["round"] == r:
                comps = np.frombuffer(rec["comps"], "<f4").reshape(rec["shape"][1], -1)
                assert np.array_equal(comps, expected[rec["chain"]].reshape(len(comps), -1))
    assert c.next_round() == 3
    started = [r for r in c.store if r["type"] == "run_started"]
    assert len(started) >= len(keys) and c.orphan_runs() == set()       # every run noted; none left over
    total = sum(r["shape"][1] - 1 for r in c.chain_records())
    s = c.samples(filtered=False)
    assert len(s["action"]) == total
    c.close()


def test_hold_max_round_trips_and_is_checked(tmp_path):
    from controller.campaign.campaign import CampaignConfig
    (tmp_path / "campaign.toml").write_text(CampaignConfig(hold_max=2).to_toml())
    assert CampaignConfig.from_toml(tmp_path / "campaign.toml").hold_max == 2
    with pytest.raises(Exception, match="hold_max must be >= 1"):
        CampaignConfig(hold_max=0)


def test_campaign_config_names_the_file_and_key_of_a_wrong_value(tmp_path):
    from controller.campaign.campaign import CampaignConfig
    from mimesys.errors import ConfigError
    p = tmp_path / "campaign.toml"
    p.write_text('round_size = "many"\n')
    with pytest.raises(ConfigError, match=r"campaign.toml: round_size: expected an integer, got 'many'"):
        CampaignConfig.from_toml(p)
    p.write_text('sweep_intensities = [0.5, "x"]\n')
    with pytest.raises(ConfigError, match=r"sweep_intensities: expected a list of numbers"):
        CampaignConfig.from_toml(p)
    p.write_text('hold_max = 0\n')
    with pytest.raises(ConfigError, match=r"campaign.toml: hold_max must be >= 1"):
        CampaignConfig.from_toml(p)
    p.write_text('sweep_intensities = [1, 0.5]\nkey_metrics = ["cpu.util"]\nthreads = 2\n')
    c = CampaignConfig.from_toml(p)
    assert c.sweep_intensities == (1.0, 0.5) and c.key_metrics == ("cpu.util",) and c.threads == 2


def test_campaign_refuses_a_fleet_of_other_hardware(tmp_path):
    pytest.importorskip("agentd.api.app", reason="the agent HTTP API is not in this checkout yet")
    from bench.sim_agents import start_agents
    from controller.campaign.campaign import Campaign, CampaignError, run_campaign
    from controller.fleet import Fleet

    async def main():
        urls, runners = await start_agents(2, TOKEN.encode(), tmp_path / "agents", n_cpus=[4, 2])
        try:
            camp = Campaign.open(tmp_path / "camp", {"round_size": 8, "chain_len": 4,
                                                     "sweep_intensities": [1.0], "sweep_thread_counts": [1]})
            async with Fleet.from_urls(urls[:1], TOKEN) as fl:
                await run_campaign(camp, fl, 0, progress=False)
            with pytest.raises(CampaignError, match="hardware differs .* refusing to mix hosts"):
                async with Fleet.from_urls(urls[1:], TOKEN) as fl:
                    await run_campaign(camp, fl, 1, progress=False)
            camp.close()
        finally:
            for r in runners:
                await r.cleanup()
    asyncio.run(main())


def test_a_campaign_log_is_opened_by_one_process_at_a_time(tmp_path):
    """Two `collect` on one campaign: the second opener is refused with a clear error naming the
    holder, not allowed to drop the first one's append in flight as a torn tail (issue 16); the
    lock goes with close(), or with the holder's death."""
    import subprocess
    import sys

    from controller.campaign.store import RecordLog, StoreError
    path = tmp_path / "camp" / "samples.log"
    first = RecordLog(path)
    with pytest.raises(StoreError, match=rf"in use by pid {os.getpid()}; one process at a time"):
        RecordLog(path)
    child = subprocess.run([sys.executable, "-c", "import sys; from controller.campaign.store import RecordLog; "
                            f"RecordLog({str(path)!r})"], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert child.returncode != 0 and "in use by pid" in child.stderr
    first.close()
    RecordLog(path).close()
