"""Alignment against a REAL agent: `mimesys-agent serve` with the host backend on 127.0.0.1
(mimesys-runner executes the plans, the samplers measure this machine). One short epoch
through the fleet client; the point is the plumbing (plans accepted, windows measured,
rewards finite, labels say real), not the reward's value on a shared machine."""

import subprocess
import sys
import time

import numpy as np
import pytest
import torch

from mimesys.catalog import load_catalog
from mimesys.metrics import MetricSpec
from mimesys.plan import Plan
from mimesys.trace import Trace
from controller.align.config import AlignConfig
from controller.align.executors import FleetExecutor
from controller.align.heldout import score_heldout
from controller.align.loop import AlignRun, align
from controller.align.policy import AlignPolicy
from controller.align.reward import RewardFunction
from controller.align.targets import target_from_trace
from controller.fleet import Fleet
from controller.model.config import ModelConfig
from controller.model.layout import MetricLayout, Normalizer
from controller.model.policy import DiffusionPolicy, ModelSpec
from runner_helpers import runner_or_skip, write_calibration

# One thread, half-second windows: the plumbing is the same, and the plans' stressors are most of
# this test's CPU, taken from the other tests running beside it (an untrained policy's plan
# runs every stressor a little, and the memory ones' buffers cost more to set up than their
# windows: 34 CPU-s with two threads and 0.5-s windows, most of it the runner's)
K = 1
W = 0.5


@pytest.fixture(scope="module")
def host_agent(tmp_path_factory, paced_calibration):
    runner_or_skip()
    d = tmp_path_factory.mktemp("agent")
    # the policy samples paced variants too; an agent without calibration refuses them
    write_calibration(d / "state", paced_calibration)
    (d / "token").write_text("align-test-token-0123456789\n")
    (d / "token").chmod(0o600)
    (d / "agent.toml").write_text(f"""
[agent]
backend = "host"
state_dir = "{d}/state"
scratch_dir = "{d}/state/scratch"
model_dir = "{d}/model"
run_lock = "{d}/run.lock"
[api]
bind = "127.0.0.1"
port = 0
token_file = "{d}/token"
""")
    proc = subprocess.Popen([sys.executable, "-m", "agentd.cli", "serve", "--config", str(d / "agent.toml")],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        deadline = time.monotonic() + 30
        url = None
        while time.monotonic() < deadline and url is None:
            line = proc.stdout.readline()
            if line.startswith("listening on "):
                url = line.split()[-1]
            elif not line and proc.poll() is not None:
                break
        if url is None:
            pytest.fail("the agent did not start listening within 30 s")
        (d / "fleet.toml").write_text(f'[[agent]]\nurl = "{url}"\ntoken_file = "token"\nname = "local"\n')
        yield d / "fleet.toml"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.mark.slow
def test_align_epoch_through_a_real_host_agent(host_agent, tmp_path):
    catalog = load_catalog()
    ex = FleetExecutor(Fleet.from_file(host_agent), source="fleet.toml")
    try:
        assert not ex.simulated and ex.label == "1 agent (fleet.toml)"
        schema = [MetricSpec.from_dict(m) for m in ex.infos[0]["schema"]]
        names = [m.name for m in schema]
        # calibrate a tiny model's normalization on what this host measures for a few plans
        a = np.zeros((3, len(catalog), K), np.float32)
        a[1, catalog.index("cpu_int_crc32"), :] = 0.8
        a[2, catalog.index("cache_memcpy_l2"), 0] = 0.5
        (probe,) = ex.execute([Plan.from_catalog(a, catalog, seed=1, window_s=W)], names)
        assert probe.values.shape == (3, len(names)) and probe.agent == "local" and not probe.simulated
        cpu0 = names.index("cpu.util.core0")
        assert np.isfinite(probe.values[:, cpu0]).all()

        spec = ModelSpec(tuple(schema), tuple(catalog.names), catalog.hash, K, W, ex.infos[0]["fingerprint"])
        ex.check_model(catalog.hash, K)
        torch.manual_seed(0)
        model = DiffusionPolicy(spec, ModelConfig(hidden=16, blocks=1, train_timesteps=100, sample_steps=4,
                                                  guidance=1.0),
                                Normalizer.fit(np.concatenate([probe.values, probe.values * 1.1]), schema,
                                               MetricLayout.build(names, K)))
        # a real target: what this host measured (busy CPU, then idle) as a 3-window trace
        target = target_from_trace(Trace(probe.values[[1, 1, 0]], schema), names, name="measured-here")
        cfg = AlignConfig.from_overrides({"epochs": 1, "segment_windows": 2, "segments_per_epoch": 1,
                                          "repeats_per_segment": 2, "stat_min_count": 2, "lr": 1e-4})
        policy = AlignPolicy.from_config(model, cfg)
        run = AlignRun(policy, policy.frozen_copy(), [target], ex,
                       RewardFunction.build(names, policy.normalize_obs), cfg, tmp_path / "work",
                       {"path": "tiny", "sha256": "tiny"}, title="real agent test")
        before = {k: v.clone() for k, v in policy.state_dict().items()}
        (rec,) = align(run, progress=False)
        assert rec.windows == 2 * 2 and rec.unscored == 0 and np.isfinite(rec.reward_mean) and rec.reward_mean <= 0
        assert any(not torch.equal(v, policy.state_dict()[k]) for k, v in before.items())
        # the same executor scores a deployed-style generation with the evaluation room's DTW
        (score,) = score_heldout(model, {"measured-here": Trace(probe.values, schema)}, ex,
                                 metrics=["cpu.util"], seeds=[0])
        assert 0 <= score.dtw["cpu.util"] <= 1
    finally:
        ex.close()
