"""Collection campaigns: the crash-safe store, the proposals, and whole campaigns against real
agent apps (simulated host) on 127.0.0.1, including SIGKILL of the controller mid-round."""

import asyncio
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from controller.campaign import proposals  # noqa: E402
from controller.campaign.coverage import coverage  # noqa: E402
from controller.campaign.recordformat import MAGIC  # noqa: E402
from controller.campaign.store import RecordLog, StoreError  # noqa: E402
from campaign_helpers import COLLECT, SMALL, TOKEN, agents, small_campaign  # noqa: E402,F401 (agents: a fixture)


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
@pytest.mark.slow
def test_campaign_runs_builds_dataset_and_reports(tmp_path, agents):
    camp = small_campaign(tmp_path / "camp")
    out = subprocess.run(COLLECT + [str(camp), "--rounds", "1", "--fleet", str(agents)] + SMALL,
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "round 1:" in out.stdout and "SIMULATED" in out.stdout
    assert re.search(r"^round 0: \d+ samples from the solo profile \(", out.stdout, re.M), out.stdout
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
    # round 0 came from the solo profile (one repetition: the spread filter keeps every sample)
    assert hist[0]["proposal"]["from_profile"] > 0 and "sweep" not in hist[0]["proposal"]
    assert ds.provenance["from_profile"] == (ds.round == 0).sum() == hist[0]["proposal"]["from_profile"] - 1
    # the solo profile was recorded before round 0, and `forward fit` finds it through the dataset
    assert (camp / "profile.h5").exists() and "solo profile" in (camp / "logs" / "collect.log").read_text()
    out = CliRunner().invoke(mimesys, ["forward", "fit", str(ds_path), "-o", str(tmp_path / "fm"), "--members", "2",
                                       "--steps", "50"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.output.strip().splitlines()[-1])["simulated"] is True
    # round 1's compositions are held for 1..3 windows: steady transitions next to changes
    steady = (ds.prev_action == ds.action).all(axis=(1, 2))[ds.round == 1]
    assert 0.15 < steady.mean() < 0.85, steady.mean()
    # the campaign refuses a contradicting option on resume
    out = CliRunner().invoke(mimesys, ["collect", str(camp), "--rounds", "1", "--fleet", str(agents),
                                       "--strategy", "random"])
    assert out.exit_code != 0 and "created with strategy = 'novelty'" in out.output


TINY = {"round_size": 8, "chain_len": 4, "sweep_intensities": [1.0], "pool": 100, "trees": 8}


def _with_sim_agents(tmp_path, body, n=1):
    """Run `await body(urls)` against n simulated agents (2 CPUs each) in this event loop."""
    pytest.importorskip("agentd.api.app", reason="the agent HTTP API is not in this checkout yet")
    from bench.sim_agents import start_agents

    async def main():
        urls, runners = await start_agents(n, TOKEN.encode(), tmp_path / "agents", n_cpus=2)
        try:
            await body(urls)
        finally:
            for r in runners:
                await r.cleanup()
    asyncio.run(main())


def _chain_keys(camp, r):
    return [rec["key"] for rec in camp.chain_records() if rec["round"] == r]


def test_round0_takes_its_samples_from_the_solo_profile_once(tmp_path, caplog):
    """Round 0 of a novelty campaign is the solo profile's executed windows, one chain record
    with its compositions and values; rounds 1+ fit their surrogate on it; nothing is recorded
    twice, even after a crash between round 0's proposal and its record."""
    import logging
    import shutil

    from controller.campaign.campaign import PROFILE_KEY, Campaign
    from controller.campaign.rounds import proposals_for
    from controller.campaign.run import run_campaign
    from controller.fleet import Fleet
    from mimesys.solo_profile import profile_plan
    from mimesys.trace import Trace
    caplog.set_level(logging.INFO, logger="mimesys.collect")

    async def body(urls):
        async with Fleet.from_urls(urls, TOKEN) as fl:
            camp = Campaign.open(tmp_path / "a", TINY)
            [s0] = await run_campaign(camp, fl, 0, progress=False)
            b, trace = camp.binding, Trace.read(camp.profile_path)
            plan = profile_plan(b.catalog_names, b.catalog_hash, b.threads)
            M, K, N = len(b.catalog_names), b.threads, len(b.metrics)
            assert trace.T == plan.T == (1 + 3 * trace.provenance["hold"]) * M + 1 and K == 2
            # one chain: the profile's compositions and values, one repetition, every sample kept
            assert _chain_keys(camp, 0) == [PROFILE_KEY]
            [rec] = camp.chain_records()
            assert rec["shape"] == [1, plan.T, M, K, N]
            assert np.array_equal(np.frombuffer(rec["comps"], "<f4").reshape(plan.T, M, K), plan.compositions)
            assert np.array_equal(np.frombuffer(rec["obs"], "<f4").reshape(plan.T, N), trace.values,
                                  equal_nan=True)
            assert (s0.chains, s0.samples, s0.kept, s0.dropped) == (1, plan.T - 1, plan.T - 1, 0)
            assert s0.proposal["from_profile"] == plan.T and "sweep" not in s0.proposal
            hist = json.loads((camp.root / "reports" / "coverage.json").read_text())
            assert hist[0]["proposal"]["from_profile"] == plan.T
            assert (camp.root / "reports" / "coverage_round_0000.png").exists()
            assert not [r for r in camp.store if r["type"] == "run_started"]       # nothing ran for round 0
            ds = camp.dataset()
            assert ds.S == plan.T - 1 and ds.provenance["from_profile"] == plan.T - 1
            assert np.array_equal(ds.action, plan.compositions[1:])
            # rounds 1+: the novelty surrogate is fitted on the profile's samples
            [s1] = await run_campaign(camp, fl, 1, progress=False)
            assert s1.chains > 0 and s1.samples > 0 and "novelty" in s1.proposal
            assert await run_campaign(camp, fl, 1, progress=False) == []
            assert _chain_keys(camp, 0) == [PROFILE_KEY] and camp.store.duplicates == 0
            assert camp.dataset().provenance["from_profile"] == plan.T - 1
            camp.close()
            # a crash after round 0 was proposed from the profile, before its record: on resume it
            # is proposed again and recorded once
            (tmp_path / "b").mkdir()
            for name in ("host.json", "profile.h5"):
                shutil.copy(tmp_path / "a" / name, tmp_path / "b" / name)
            crashed = Campaign.open(tmp_path / "b", TINY)
            comps, info = proposals_for(crashed, 0)
            assert info["from_profile"] == plan.T and np.array_equal(comps, plan.compositions)
            crashed.close()
            resumed = Campaign.open(tmp_path / "b", create=False)
            [r0] = await run_campaign(resumed, fl, 0, progress=False)
            assert r0.samples == plan.T - 1 and _chain_keys(resumed, 0) == [PROFILE_KEY]
            resumed.close()
        text = caplog.text
        assert text.count(f"acknowledged {PROFILE_KEY} ({plan.T - 1} samples) from the solo profile") == 2
        assert f"round 0: {plan.T} windows of the solo profile give {plan.T - 1} samples; the one-hot sweep " \
               "is not run" in text

    _with_sim_agents(tmp_path, body)


def test_round0_runs_the_sweep_when_asked_or_when_the_profile_differs(tmp_path, caplog):
    """`round0 = "sweep"` is the one-hot sweep as before; a profile measured otherwise than the
    campaign measures (here: another window length) is not taken as samples, and the log says why."""
    import logging
    import shutil

    from controller.campaign import proposals
    from controller.campaign.campaign import PROFILE_KEY, Campaign
    from controller.campaign.rounds import proposals_for
    from controller.campaign.run import chains as chains_of
    from controller.campaign.run import run_campaign
    from controller.campaign.solo import ProfileUnusable, profile_chain
    from controller.fleet import Fleet
    from mimesys.trace import Trace
    caplog.set_level(logging.INFO, logger="mimesys.collect")

    def sweep_round(camp, s0):
        b = camp.binding
        sweep = proposals.one_hot_sweep(len(b.catalog_names), b.threads, (1.0,))
        with np.load(camp.round_path(0)) as z:
            comps = z["compositions"]
        assert s0.proposal["sweep"] == len(sweep) == len(comps) and "from_profile" not in s0.proposal
        assert sorted(c.tobytes() for c in comps) == sorted(c.tobytes() for c in sweep)
        chains = chains_of(comps, camp.config.chain_len)
        assert _chain_keys(camp, 0) == [f"r0/c{c}" for c in range(len(chains))]
        assert s0.samples == sum(len(c) - 1 for c in chains) == len(sweep) - len(chains)
        assert camp.samples(filtered=False)["from_profile"] == 0

    async def body(urls):
        async with Fleet.from_urls(urls, TOKEN) as fl:
            old = Campaign.open(tmp_path / "sweep", {**TINY, "round0": "sweep"})
            [s0] = await run_campaign(old, fl, 0, progress=False)
            sweep_round(old, s0)
            assert "profile_unusable" not in s0.proposal and old.profile_path.exists()
            assert old.dataset().provenance["from_profile"] == 0
            old.close()
            # the same host's profile, recorded at another window length
            (tmp_path / "w").mkdir()
            shutil.copy(tmp_path / "sweep" / "host.json", tmp_path / "w" / "host.json")
            tr = Trace.read(tmp_path / "sweep" / "profile.h5")
            tr.window_s = 2.0
            tr.write(tmp_path / "w" / "profile.h5")
            camp = Campaign.open(tmp_path / "w", TINY)
            [s0] = await run_campaign(camp, fl, 0, progress=False)
            sweep_round(camp, s0)
            assert s0.proposal["profile_unusable"] == "window_s 2, the campaign's 1"
            assert PROFILE_KEY not in camp.store
            # a resumed round 0 stays the sweep it was proposed as, even with a usable profile now
            shutil.copy(tmp_path / "sweep" / "profile.h5", camp.profile_path)
            assert proposals_for(camp, 0)[1]["sweep"] == s0.proposal["sweep"]
            # every difference is named (one line)
            tr = Trace.read(tmp_path / "sweep" / "profile.h5")
            tr.provenance = {**tr.provenance, "catalog_hash": "other", "thread_cores": [0]}
            tr.metrics = tr.metrics[::-1]
            tr.values = np.ascontiguousarray(tr.values[:, ::-1])
            tr.write(camp.profile_path)
            with pytest.raises(ProfileUnusable) as e:
                profile_chain(camp)
            first = tr.metrics[0].name
            assert str(e.value) == (f"its {len(tr.metrics)} metrics are not the campaign's {len(tr.metrics)} (first "
                                    f"difference at 0: {first!r} vs {tr.metrics[-1].name!r}); catalog other of "
                                    f"{len(camp.binding.catalog_names)} stressors, the campaign's "
                                    f"{camp.binding.catalog_hash} of {len(camp.binding.catalog_names)}; 1 threads, "
                                    f"the campaign's 2")
            camp.close()
        assert ("round 0: the solo profile cannot serve as samples (window_s 2, the campaign's 1); running the "
                "one-hot sweep") in caplog.text

    _with_sim_agents(tmp_path, body)


def test_the_profile_compositions_follow_its_layout_and_hold():
    from mimesys.errors import ValidationError
    from mimesys.solo_profile import HOLD, LAYOUT, LAYOUT_ONE_THREAD, profile_compositions, profile_plan, windows_of
    a = profile_compositions(3, 2, LAYOUT, 1)            # per stressor: idle, thread 0, thread 1, every thread
    assert a.shape == (13, 3, 2)
    assert [np.argwhere(a[t]).tolist() for t in range(1, 5)] == [[[0, 0]], [[0, 1]], [[0, 0], [0, 1]], []]
    assert not a[0].any() and not a[12].any()
    b = profile_compositions(3, 2, LAYOUT_ONE_THREAD, 2)  # older profiles: no thread-1 step
    assert b.shape == (16, 3, 2) and b[1:3, 0, 0].all() and b[3:5, 0].all() and not b[1:3, 0, 1].any()
    assert np.array_equal(profile_plan(["x", "y", "z"], "h", 2).compositions, profile_compositions(3, 2, LAYOUT, HOLD))
    rows = windows_of(3, LAYOUT)
    assert len(profile_compositions(3, 2, LAYOUT, HOLD)) == rows["idle"][-1] + 1
    for bad in ((3, 1, LAYOUT, 2), (3, 2, "other", 2), (3, 2, LAYOUT, 0)):
        with pytest.raises(ValidationError):
            profile_compositions(*bad)


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
    p.write_text('round0 = "sweeps"\n')
    with pytest.raises(ConfigError, match=r"campaign.toml: round0 'sweeps'; valid: profile, sweep"):
        CampaignConfig.from_toml(p)
    p.write_text('round0 = 0\n')
    with pytest.raises(ConfigError, match=r"campaign.toml: round0: expected a string"):
        CampaignConfig.from_toml(p)
    assert CampaignConfig().round0 == "profile"
    p.write_text(CampaignConfig(round0="sweep").to_toml())
    assert CampaignConfig.from_toml(p).round0 == "sweep"
    p.write_text('sweep_intensities = [1, 0.5]\nkey_metrics = ["cpu.util"]\nthreads = 2\n')
    c = CampaignConfig.from_toml(p)
    assert c.sweep_intensities == (1.0, 0.5) and c.key_metrics == ("cpu.util",) and c.threads == 2


def test_campaign_refuses_a_fleet_of_other_hardware(tmp_path):
    pytest.importorskip("agentd.api.app", reason="the agent HTTP API is not in this checkout yet")
    from bench.sim_agents import start_agents
    from controller.campaign.campaign import Campaign, CampaignError
    from controller.campaign.run import run_campaign
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
