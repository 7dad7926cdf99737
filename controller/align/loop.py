"""The alignment loop: per epoch, SAMPLING (rollouts executed by agents, rewards, per-window
advantages) then TRAINING (clipped DDPO loss over denoising steps + KL to the pretrained
model). Resumable from the last checkpoint; invariants are asserted before the first epoch.

Structure after kvablack/ddpo-pytorch scripts/train.py; what changed: rollouts are
sequential over trace segments and executed by agents, advantages are per target window,
a KL penalty to the frozen pretrained policy is added, and no accelerate/LoRA.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import torch
from tqdm import tqdm

from controller.model.policy import Context

from .advantages import WindowStatTracker
from .checkpoint import AlignState
from .config import AlignConfig
from .curves import EpochRecord, plot_reward_curve
from .executors import Executor
from .policy import AlignPolicy
from .ppo import ddpo_step_loss
from .reward import RewardFunction
from .rollout import RolloutBatch, collect_rollouts
from .targets import TargetTrace, draw_segments

CHECKPOINT_NAME = "checkpoint.pt"
CURVE_NAME = "reward_curve.png"


@dataclass
class AlignRun:
    policy: AlignPolicy               # trained in place
    reference: AlignPolicy            # frozen pretrained policy (KL target)
    targets: list[TargetTrace]
    executor: Executor
    reward_fn: RewardFunction
    config: AlignConfig
    work_dir: Path                    # checkpoint, history, reward curve
    base_model: dict                  # {"path", "sha256"} of the pretrained model
    title: str = "mimesys align"
    on_epoch: list[Callable[[EpochRecord], None]] = field(default_factory=list)


def assert_invariants(run: AlignRun) -> None:
    """Checked before the first epoch; a violation is a programming or setup error."""
    cfg, pol = run.config, run.policy
    cfg.validate()
    assert pol.steps >= 2, f"the η > 0 sampler needs ≥ 2 denoising steps, policy has {pol.steps}"
    assert list(run.reward_fn.metric_names) == list(pol.metric_names), \
        "reward and policy disagree on the metric order"
    assert list(run.reference.metric_names) == list(pol.metric_names)
    assert not any(p.requires_grad for p in run.reference.parameters()), "the KL reference must be frozen"
    assert any(p.requires_grad for p in pol.parameters()), "the policy has no trainable parameters"
    assert run.targets and all(np.isfinite(t.values).any() for t in run.targets), "targets without measured metrics"
    # The recorded log-probabilities must be reproducible by re-evaluating a step; otherwise every
    # PPO ratio is off from the start (dropout left on, a sampler/step mismatch, a dtype change).
    t0 = run.targets[0]
    n = min(2, t0.T)
    cond = Context(torch.from_numpy(t0.values[:n]),
                      torch.full_like(torch.from_numpy(t0.values[:n]), float("nan")),
                      torch.zeros(n, len(pol.catalog_names), pol.threads))
    probe = torch.Generator().manual_seed(run.config.seed + 1)   # never the run's generator: resume stays exact
    with torch.no_grad():
        paths = pol.sample(cond, probe)
        for j in (0, paths.steps - 1):
            d = pol.step(cond, paths.latents[:, j], paths.latents[:, j + 1], j)
            err = float((d.log_prob - paths.log_probs[:, j]).abs().max())
            assert err < 1e-3, f"step {j}: re-evaluated log-prob differs from the sampled one by {err:.2e}"
        a = paths.actions
        assert a.shape[1:] == (len(pol.catalog_names), pol.threads), f"actions {a.shape}"
        assert (a >= 0).all() and (a.sum(axis=1) <= 1 + 1e-5).all(), "sampled compositions are not valid plans"


def train_epoch(run: AlignRun, batch: RolloutBatch, optimizer: torch.optim.Optimizer,
                rng: np.random.Generator) -> dict:
    """TRAINING on one epoch's samples: minibatches of windows; per minibatch, the loss of a
    random subset of denoising steps is accumulated and one optimizer step taken."""
    cfg, pol = run.config, run.policy
    S = batch.paths.steps
    n_steps = max(1, int(round(cfg.timestep_fraction * S)))
    sums = {"kl": 0.0, "clipfrac": 0.0, "approx_kl": 0.0, "policy_loss": 0.0}
    count = 0
    for _ in range(cfg.inner_epochs):
        perm = rng.permutation(len(batch))
        for lo in range(0, len(batch), cfg.train_batch_size):
            mb = batch.index(perm[lo:lo + cfg.train_batch_size])
            optimizer.zero_grad(set_to_none=True)
            for j in sorted(rng.choice(S, size=n_steps, replace=False).tolist()):
                x, x_next = mb.paths.latents[:, j], mb.paths.latents[:, j + 1]
                dist = pol.step(mb.cond, x, x_next, j)
                with torch.no_grad():
                    ref = run.reference.step(mb.cond, x, x_next, j)
                loss, st = ddpo_step_loss(dist.log_prob, mb.paths.log_probs[:, j], mb.advantages,
                                          dist.mean, ref.mean, dist.std,
                                          clip_range=cfg.clip_range, kl_coef=cfg.kl_coef)
                (loss / n_steps).backward()
                for k in sums:
                    sums[k] += getattr(st, k)
                count += 1
            torch.nn.utils.clip_grad_norm_(list(pol.parameters()), cfg.max_grad_norm)
            optimizer.step()
    return {k: v / max(count, 1) for k, v in sums.items()}


def align(run: AlignRun, *, restart: bool = False, progress: bool = True,
          save_model: Callable[[AlignPolicy, list[EpochRecord]], None] | None = None) -> list[EpochRecord]:
    """Run (or resume) alignment to `config.epochs` epochs; returns the full history.
    `save_model` is called once at the end with the aligned policy."""
    cfg = run.config
    ckpt_path = run.work_dir / CHECKPOINT_NAME
    target_names = [t.name for t in run.targets]
    optimizer = torch.optim.AdamW(list(run.policy.parameters()), lr=cfg.lr, betas=cfg.adam_betas,
                                  weight_decay=cfg.weight_decay)
    tracker = WindowStatTracker(cfg.stat_buffer, cfg.stat_min_count, cfg.adv_clip)
    generator = torch.Generator().manual_seed(cfg.seed)
    rng = np.random.default_rng(cfg.seed)
    history: list[EpochRecord] = []
    start = 0
    if ckpt_path.exists() and not restart:
        state = AlignState.load(ckpt_path)
        state.check_compatible(config=cfg.to_dict(), base_model=run.base_model, targets=target_names,
                               path=ckpt_path)
        run.policy.load_state_dict(state.policy)
        optimizer.load_state_dict(state.optimizer)
        tracker.load_state_dict(state.tracker)
        generator.set_state(state.torch_rng)
        rng.bit_generator.state = state.numpy_rng
        history = [EpochRecord(**h) for h in state.history]
        start = state.epoch

    assert_invariants(run)
    bar = tqdm(range(start, cfg.epochs), initial=start, total=cfg.epochs, unit="epoch",
               desc=f"align ({run.executor.label})", disable=not progress, dynamic_ncols=True)
    for epoch in bar:
        t0 = time.monotonic()
        # ------------------------------------------------------------------ SAMPLING
        draws = draw_segments(run.targets, cfg.segments_per_epoch, cfg.segment_windows,
                              cfg.context_windows, rng)
        segs = [s for s in draws for _ in range(cfg.repeats_per_segment)]
        bar.set_description(f"align ({run.executor.label}): epoch {epoch + 1} rollouts")
        batch, report = collect_rollouts(run.policy, run.targets, segs, run.executor, run.reward_fn,
                                         generator, seed=cfg.seed * 100_003 + epoch,
                                         provenance={"align_epoch": epoch})
        adv, adv_stats = tracker.update(batch.keys, batch.rewards)
        batch.advantages = torch.from_numpy(adv)
        # ------------------------------------------------------------------ TRAINING
        bar.set_description(f"align ({run.executor.label}): epoch {epoch + 1} training")
        stats = train_epoch(run, batch, optimizer, rng)
        rec = EpochRecord(epoch=epoch + 1, reward_mean=float(batch.rewards.mean()),
                          reward_std=float(batch.rewards.std()), reward_min=float(batch.rewards.min()),
                          reward_max=float(batch.rewards.max()), windows=report.windows_scored,
                          unscored=report.windows_unscored, kl=stats["kl"], clipfrac=stats["clipfrac"],
                          approx_kl=stats["approx_kl"], seconds=time.monotonic() - t0)
        history.append(rec)
        bar.set_postfix(reward=f"{rec.reward_mean:.4f}±{rec.reward_std:.4f}", best=f"{rec.reward_max:.4f}",
                        kl=f"{rec.kl:.2e}", clip=f"{rec.clipfrac:.2f}")
        for cb in run.on_epoch:
            cb(rec)
        if (epoch + 1) % cfg.checkpoint_every == 0 or epoch + 1 == cfg.epochs:
            AlignState(epoch + 1, run.policy.state_dict(), optimizer.state_dict(), tracker.state_dict(),
                       [h.to_dict() for h in history], generator.get_state(), rng.bit_generator.state,
                       cfg.to_dict(), run.base_model, target_names).save(ckpt_path)
            plot_reward_curve(history, run.work_dir / CURVE_NAME, title=run.title,
                              simulated=run.executor.simulated)
    bar.close()
    if history:
        plot_reward_curve(history, run.work_dir / CURVE_NAME, title=run.title, simulated=run.executor.simulated)
    if save_model is not None:
        save_model(run.policy, history)
    return history
