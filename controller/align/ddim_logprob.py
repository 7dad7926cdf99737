"""One DDIM denoising step with η > 0 and the Gaussian log-probability of its result.

Adapted from kvablack/ddpo-pytorch, ddpo_pytorch/diffusers_patch/ddim_with_logprob.py
(itself after diffusers' DDIMScheduler.step; Song et al. 2021, eq. 12). Changed: a pure
function of the schedule values ᾱ_t and ᾱ_prev instead of a patched scheduler method,
so it works with any ε-prediction model; it also returns the step's mean and standard
deviation (the KL penalty to the pretrained model needs them), and refuses a step whose
standard deviation is 0 instead of returning an infinite log-probability.

    x0̂  = (x_t − √(1−ᾱ_t)·ε) / √ᾱ_t                    (optionally clipped to ±clip_x0)
    σ_t = η · √((1−ᾱ_prev)/(1−ᾱ_t)) · √(1 − ᾱ_t/ᾱ_prev)
    μ   = √ᾱ_prev · x0̂ + √(1−ᾱ_prev−σ_t²) · ε̂
    x_prev ~ N(μ, σ_t² I);  log π = mean over entries of log N(x_prev; μ, σ_t²)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


@dataclass
class DDIMStep:
    prev_sample: torch.Tensor   # [B, *X] x_{t-1} (sampled, or the one given)
    log_prob: torch.Tensor      # [B] mean over entries of log N(prev_sample; mean, std²)
    mean: torch.Tensor          # [B, *X]
    std: torch.Tensor           # scalar tensor (same for every entry of the step)


def ddim_variance(alpha_bar_t: torch.Tensor, alpha_bar_prev: torch.Tensor) -> torch.Tensor:
    return (1 - alpha_bar_prev) / (1 - alpha_bar_t) * (1 - alpha_bar_t / alpha_bar_prev)


def ddim_step_with_logprob(eps: torch.Tensor, x_t: torch.Tensor, alpha_bar_t: float | torch.Tensor,
                           alpha_bar_prev: float | torch.Tensor, eta: float, *,
                           prev_sample: torch.Tensor | None = None, generator: torch.Generator | None = None,
                           clip_x0: float | None = None) -> DDIMStep:
    """eps, x_t: [B, *X]. With prev_sample=None a new x_{t-1} is drawn (using `generator`);
    otherwise the log-probability of the given one is evaluated (its gradient flows only
    through the mean, as in DDPO)."""
    a_t = torch.as_tensor(alpha_bar_t, dtype=x_t.dtype, device=x_t.device)
    a_prev = torch.as_tensor(alpha_bar_prev, dtype=x_t.dtype, device=x_t.device)
    x0 = (x_t - torch.sqrt(1 - a_t) * eps) / torch.sqrt(a_t)
    if clip_x0 is not None:
        x0 = x0.clamp(-clip_x0, clip_x0)
        eps = (x_t - torch.sqrt(a_t) * x0) / torch.sqrt(1 - a_t)   # ε consistent with the clipped x0̂
    std = eta * torch.sqrt(ddim_variance(a_t, a_prev).clamp(min=0))
    if not bool(std > 0):
        raise ValueError(f"DDIM step has σ = 0 (η={eta}, ᾱ_t={float(a_t):.6g}, ᾱ_prev={float(a_prev):.6g}): "
                         "no log-probability; use η > 0 and a final ᾱ below 1")
    mean = torch.sqrt(a_prev) * x0 + torch.sqrt((1 - a_prev - std ** 2).clamp(min=0)) * eps
    if prev_sample is None:
        noise = torch.randn(x_t.shape, generator=generator, dtype=x_t.dtype, device=x_t.device)
        prev_sample = mean + std * noise
    log_prob = -((prev_sample.detach() - mean) ** 2) / (2 * std ** 2) - torch.log(std) - HALF_LOG_2PI
    log_prob = log_prob.reshape(log_prob.shape[0], -1).mean(dim=1)
    return DDIMStep(prev_sample, log_prob, mean, std)
