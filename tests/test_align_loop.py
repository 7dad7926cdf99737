"""The alignment loop end to end: a small DiffusionPolicy (the model room's class, random
weights) aligned against simulated agents (mimesys/sim) on a target trace the simulated host
produced. Exercises everything alignment owns — η > 0 sampling with recorded log-probs,
state-aware rollouts, rewards, per-window advantages, the clipped DDPO update with KL,
checkpoints, exact resume and the reward curve. All numbers here are SIMULATED.
"""

import math

import numpy as np
import torch

from mimesys.catalog import Catalog, load_catalog
from mimesys.sim import SimModel, SimParams
from mimesys.trace import Trace
from controller.align.config import AlignConfig
from controller.align.executors import SimExecutor
from controller.align.loop import CHECKPOINT_NAME, CURVE_NAME, AlignRun, align
from controller.align.policy import AlignPolicy
from controller.align.reward import RewardFunction
from controller.align.targets import load_targets
from controller.model.config import ModelConfig
from controller.model.layout import MetricLayout, Normalizer
from controller.model.policy import DiffusionPolicy, ModelSpec

K = 2


def tiny_model(catalog, seed=0) -> DiffusionPolicy:
    """An untrained, small DiffusionPolicy for the simulated 2-CPU host; normalization fitted
    on simulated windows of random compositions."""
    sim = SimModel.from_catalog(catalog, SimParams(n_cpus=K))
    rng = np.random.default_rng(seed)
    a = rng.dirichlet(np.ones(len(catalog) + 1), size=(64, K))[..., :-1].transpose(0, 2, 1)
    obs, _ = sim.simulate(a.astype(np.float32), None, rng)
    spec = ModelSpec(tuple(sim.schema()), tuple(catalog.names), catalog.hash, K, 1.0, {"simulated": True})
    torch.manual_seed(seed)
    # ε-prediction: this untrained toy's reward rises > 0.1 in 14 epochs with it; with the x0 head
    # (the training default) it rose 0.11 in 14 epochs then fell back (seed luck at this size)
    return DiffusionPolicy(spec, ModelConfig(hidden=32, blocks=1, train_timesteps=100, sample_steps=5,
                                             guidance=1.0, prediction="eps"),
                           Normalizer.fit(obs, list(sim.schema()), MetricLayout.build(spec.metric_names, K)))


def target_trace(catalog, path):
    """What the simulated host measures running a memory-heavy phase then a CPU phase."""
    sim = SimModel.from_catalog(catalog, SimParams(n_cpus=K))
    a = np.zeros((12, len(catalog), K), np.float32)
    a[:6, catalog.index("mem_stream_triad_256M"), :] = 0.8
    a[6:, catalog.index("cpu_int_crc32"), :] = 0.9
    obs, _ = sim.simulate(a, None, np.random.default_rng(7))
    Trace(obs, sim.schema(), simulated=True).write(path)
    return path


def fixed_catalog() -> Catalog:
    """The catalog's first 18 variants: the toy model's size and random draws must not change
    each time the shipped catalog grows (the reward curve of an untrained model is seed luck)."""
    return Catalog(load_catalog().stressors[:18])


def _run(tmp_path, epochs, seed=0):
    catalog = fixed_catalog()
    model = tiny_model(catalog, seed)
    tmp_path.mkdir(parents=True, exist_ok=True)
    targets = load_targets([target_trace(catalog, tmp_path / "target.h5")], model.spec.metric_names)
    cfg = AlignConfig.from_overrides({"lr": 3e-3, "clip_range": 0.2, "epochs": epochs, "segment_windows": 6,
                                      "segments_per_epoch": 4, "repeats_per_segment": 4, "train_batch_size": 32,
                                      "kl_coef": 0.01})
    policy = AlignPolicy.from_config(model, cfg)
    executor = SimExecutor(2, catalog, n_cpus=K, seed=seed, carry_state=False)   # exact resume
    calls = []
    execute = executor.execute
    executor.execute = lambda plans, names: calls.append(len(plans)) or execute(plans, names)
    reward = RewardFunction.build(policy.metric_names, policy.normalize_obs)
    run = AlignRun(policy, policy.frozen_copy(), targets, executor, reward, cfg, tmp_path / "work",
                   {"path": "tiny", "sha256": "tiny"}, title="tiny model")
    return run, calls


def test_alignment_raises_reward_and_stays_near_the_reference(tmp_path):
    run, calls = _run(tmp_path, epochs=14)
    hist = align(run, progress=False)
    first = np.mean([h.reward_mean for h in hist[:3]])
    last = np.mean([h.reward_mean for h in hist[-3:]])
    assert last > first + 0.1, [round(h.reward_mean, 4) for h in hist]
    assert all(h.windows == 4 * 4 * 6 and h.unscored == 0 for h in hist)
    assert all(math.isfinite(h.kl) and h.kl >= 0 for h in hist) and hist[-1].kl > 0
    assert calls == [16] * 14
    assert (run.work_dir / CURVE_NAME).stat().st_size > 10_000


def test_alignment_resumes_from_its_checkpoint_exactly(tmp_path):
    full_run, _ = _run(tmp_path / "a", epochs=4)
    full = align(full_run, progress=False)
    part_run, _ = _run(tmp_path / "b", epochs=2)
    align(part_run, progress=False)
    assert (part_run.work_dir / CHECKPOINT_NAME).exists()
    resumed_run, calls = _run(tmp_path / "b", epochs=4)       # fresh policy object, same work dir
    resumed = align(resumed_run, progress=False)
    assert len(calls) == 2                                   # only epochs 3 and 4 ran again
    assert [h.epoch for h in resumed] == [1, 2, 3, 4]
    np.testing.assert_allclose([h.reward_mean for h in resumed], [h.reward_mean for h in full], rtol=1e-5)
    for p, q in zip(full_run.policy.parameters(), resumed_run.policy.parameters()):
        torch.testing.assert_close(p, q)
