"""The DDPO objective for one denoising step: PPO's clipped ratio + a KL penalty.

Each denoising step x_t -> x_{t-1} is a Gaussian action, so the policy-gradient loss is
PPO's clipped surrogate on the ratio of the step's probability under the current and
the sampling-time parameters (Schulman et al. 2017; as in kvablack/ddpo-pytorch,
scripts/train.py). The KL term keeps the policy near the frozen pretrained model: both
step distributions share the same variance (set by η and the schedule), so their KL
is ||μ_θ − μ_ref||² / (2σ²) — the DPOK form (Fan et al. 2023) — averaged over the
composition's entries like the log-probability is.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class StepLossStats:
    """Detached diagnostics of one step's loss (all scalars)."""

    policy_loss: float
    kl: float            # mean KL(π_θ || π_ref) per sample for this step
    approx_kl: float     # ½·E[(log π_θ − log π_old)²], drift from the sampling-time policy
    clipfrac: float      # fraction of samples whose ratio left [1 − clip, 1 + clip]


def clipped_surrogate(log_prob: torch.Tensor, old_log_prob: torch.Tensor, advantages: torch.Tensor,
                      clip_range: float) -> torch.Tensor:
    """PPO loss to minimise. All [B]; old_log_prob and advantages carry no gradient.

    loss = mean(max(−A·r, −A·clip(r, 1−ε, 1+ε))), r = exp(log π_θ − log π_old):
    the ratio's incentive stops once it has moved ε in the advantage's direction.
    """
    if not (log_prob.shape == old_log_prob.shape == advantages.shape) or log_prob.ndim != 1:
        raise ValueError(f"expected matching [B] tensors, got {tuple(log_prob.shape)}, "
                         f"{tuple(old_log_prob.shape)}, {tuple(advantages.shape)}")
    ratio = torch.exp(log_prob - old_log_prob.detach())
    advantages = advantages.detach()
    unclipped = -advantages * ratio
    clipped = -advantages * torch.clamp(ratio, 1.0 - clip_range, 1.0 + clip_range)
    return torch.mean(torch.maximum(unclipped, clipped))


def gaussian_kl_same_std(mean: torch.Tensor, ref_mean: torch.Tensor, std: torch.Tensor) -> torch.Tensor:
    """KL(N(mean, σ²) || N(ref_mean, σ²)) per sample, averaged over all but the batch dim.

    mean, ref_mean: [B, ...]; std: broadcastable to them (σ > 0). Returns [B]."""
    kl = (mean - ref_mean.detach()) ** 2 / (2 * std ** 2)
    return kl.reshape(kl.shape[0], -1).mean(dim=1)


def ddpo_step_loss(log_prob: torch.Tensor, old_log_prob: torch.Tensor, advantages: torch.Tensor,
                   mean: torch.Tensor, ref_mean: torch.Tensor, std: torch.Tensor, *,
                   clip_range: float, kl_coef: float) -> tuple[torch.Tensor, StepLossStats]:
    """Loss for one denoising step of a minibatch: clipped surrogate + kl_coef · KL to the reference."""
    policy_loss = clipped_surrogate(log_prob, old_log_prob, advantages, clip_range)
    kl = gaussian_kl_same_std(mean, ref_mean, std)
    loss = policy_loss + kl_coef * kl.mean()
    with torch.no_grad():
        diff = log_prob - old_log_prob
        ratio = torch.exp(diff)
        stats = StepLossStats(
            policy_loss=float(policy_loss),
            kl=float(kl.mean()),
            approx_kl=float(0.5 * torch.mean(diff ** 2)),
            clipfrac=float(torch.mean((torch.abs(ratio - 1.0) > clip_range).float())),
        )
    return loss, stats
