"""The alignment loop end to end on a small ε-network and an analytic executor.

Both are test fixtures, not the product's model or simulated host: they keep this test
independent of the other rooms and fast, while exercising everything alignment owns —
η > 0 sampling with recorded log-probs, state-aware rollouts, rewards, per-window
advantages, the clipped DDPO update with KL, checkpoints, resume and the curve.
"""

import math

import numpy as np
import torch
from torch import nn

from agentd.metrics import MetricSpec
from agentd.trace import Trace
from controller.align.config import AlignConfig
from controller.align.eps_policy import DiffusionSchedule, EpsPolicy
from controller.align.executors import Execution
from controller.align.loop import CHECKPOINT_NAME, CURVE_NAME, AlignRun, align
from controller.align.reward import RewardFunction, min_max_normalizer
from controller.align.targets import load_targets

METRICS = ["cpu.util.core0", "cpu.util.core1", "mem.bw_Bps"]
LO, HI = np.zeros(3), np.array([1.0, 1.0, 1e10])
M, K = 2, 2


class AnalyticExecutor:
    """Test fixture: per-core utilization = busy fraction, memory bandwidth from stressor 1."""

    simulated = True
    label = "analytic test executor"

    def __init__(self):
        self.calls = 0

    def execute(self, plans, metric_names):
        assert metric_names == METRICS
        self.calls += 1
        out = []
        for p in plans:
            a = p.validate().compositions                       # [T, M, K]
            cpu = a.sum(axis=1)                                  # [T, K]
            mem = 5e9 * a[:, 1, :].sum(axis=1, keepdims=True)   # [T, 1]
            out.append(Execution(np.concatenate([cpu, mem], 1).astype(np.float32), "analytic", True))
        return out


def _policy(seed=0):
    torch.manual_seed(seed)
    net = nn.Sequential(nn.Linear(M * K + 1 + 3 + M * K, 64), nn.SiLU(), nn.Linear(64, M * K))
    T = 100
    s = torch.linspace(0, 1, T + 1)
    f = torch.cos((s + 0.008) / 1.008 * math.pi / 2) ** 2
    abar = (f[1:] / f[0]).clamp(1e-4, 0.9999)
    sched = DiffusionSchedule(abar, tuple(range(T - 1, -1, -10)), float(abar[0]))
    norm = min_max_normalizer(LO, HI)

    def encode(c):
        tgt = torch.nan_to_num(torch.as_tensor(norm(c.target_obs.numpy()), dtype=torch.float32))
        return torch.cat([tgt, c.prev_action.reshape(len(c), -1)], 1)

    def guided_eps(net, x, t, c):
        return net(torch.cat([x, (t.float() / T)[:, None], c], 1))

    def decode(x0):
        a = ((x0.clamp(-1, 1) + 1) / 2).reshape(-1, M, K).numpy().astype(np.float32)
        return a / np.maximum(a.sum(axis=1, keepdims=True), 1.0)

    return EpsPolicy(net, schedule=sched, sample_shape=(M * K,), encode=encode, guided_eps=guided_eps,
                     decode=decode, normalize_obs=norm, metric_names=METRICS, catalog_names=["cpu", "mem"],
                     catalog_hash="sha256:test", threads=K, window_s=1.0, eta=1.0, clip_x0=1.0)


def _run(tmp_path, epochs, policy=None):
    v = np.tile(np.array([[0.95, 0.9, 1.0e9]], np.float32), (12, 1))
    v[::3, 2] = 8e9                                              # a memory burst every third window
    Trace(v, [MetricSpec(n, "x") for n in METRICS]).write(tmp_path / "target.h5")
    targets = load_targets([tmp_path / "target.h5"], METRICS)
    policy = policy or _policy()
    cfg = AlignConfig.from_overrides({"lr": 3e-3, "clip_range": 0.2, "epochs": epochs, "segment_windows": 6,
                                      "segments_per_epoch": 4, "repeats_per_segment": 4, "train_batch_size": 32,
                                      "stat_min_count": 4, "kl_coef": 0.01})
    executor = AnalyticExecutor()
    run = AlignRun(policy, policy.frozen_copy(), targets, executor,
                   RewardFunction.build(METRICS, min_max_normalizer(LO, HI)), cfg, tmp_path / "work",
                   {"path": "toy", "sha256": "toy"}, title="toy")
    return run, executor


def test_alignment_raises_reward_and_stays_near_the_reference(tmp_path):
    run, executor = _run(tmp_path, epochs=14)
    hist = align(run, progress=False)
    first = np.mean([h.reward_mean for h in hist[:3]])
    last = np.mean([h.reward_mean for h in hist[-3:]])
    assert last > first + 0.03, [round(h.reward_mean, 4) for h in hist]
    assert all(h.windows == 4 * 4 * 6 and h.unscored == 0 for h in hist)
    assert all(math.isfinite(h.kl) and h.kl >= 0 for h in hist) and hist[-1].kl > 0
    assert executor.calls == 14
    assert (run.work_dir / CURVE_NAME).stat().st_size > 10_000


def test_alignment_resumes_from_its_checkpoint_exactly(tmp_path):
    full_run, _ = _run(tmp_path / "a", epochs=4)
    full = align(full_run, progress=False)
    part_run, _ = _run(tmp_path / "b", epochs=2)
    align(part_run, progress=False)
    assert (part_run.work_dir / CHECKPOINT_NAME).exists()
    resumed_run, executor = _run(tmp_path / "b", epochs=4)       # fresh policy object, same work dir
    resumed = align(resumed_run, progress=False)
    assert executor.calls == 2                                   # only epochs 3 and 4 ran again
    assert [h.epoch for h in resumed] == [1, 2, 3, 4]
    np.testing.assert_allclose([h.reward_mean for h in resumed], [h.reward_mean for h in full], rtol=1e-5)
    for p, q in zip(full_run.policy.parameters(), resumed_run.policy.parameters()):
        torch.testing.assert_close(p, q)
