"""Noise schedule and the DDIM sampling step (with its Gaussian log-probability).

Cosine schedule: Nichol & Dhariwal 2021 ("Improved DDPM"), ᾱ(t) = cos²(((t/T)+s)/(1+s)·π/2)
normalized to ᾱ(0) = 1, per-step β clipped to 0.999. DDIM: Song et al. 2021, eq. 12.
The per-step log-probability with η > 0 follows kvablack/ddpo-pytorch
(ddpo_pytorch/diffusers_patch/ddim_with_logprob.py); changed: a function of plain
ᾱ values (no scheduler object), predicted x0 clipped to the valid latent box (compositions in [0, 1]),
and the last step ends at ᾱ of training step 0 (< 1) instead of 1, so every step
including the last has σ > 0 and a finite log-probability.

    x0̂  = clip((x_t − √(1−ᾱ_t)·ε) / √ᾱ_t, lo, hi);  ε ← (x_t − √ᾱ_t·x0̂) / √(1−ᾱ_t)
    σ   = η · √((1−ᾱ_prev)/(1−ᾱ_t)) · √(1 − ᾱ_t/ᾱ_prev)
    μ   = √ᾱ_prev · x0̂ + √(1−ᾱ_prev−σ²) · ε
    x_prev = μ + σ·z,  log π = mean over entries of log N(x_prev; μ, σ²)

The NumPy sampler in mimesys/planners/diffusion/ddim.py implements the same update from the values
this module writes into the export manifest (timesteps, ᾱ_t, ᾱ_prev); a test checks
the two agree.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


def cosine_alpha_bar(train_timesteps: int, s: float = 0.008) -> np.ndarray:
    """ᾱ for t = 0..T-1 (float64 [T]); ᾱ[t] is the signal fraction after t+1 noising steps."""
    T = train_timesteps
    f = lambda u: math.cos((u / T + s) / (1 + s) * math.pi / 2) ** 2  # noqa: E731
    betas = np.array([min(1 - f(t + 1) / f(t), 0.999) for t in range(T)])
    return np.cumprod(1 - betas)


@dataclass(frozen=True)
class DDIMSchedule:
    """The S sampling steps: timesteps [S] descending, ᾱ_t [S], ᾱ_prev [S]."""

    timesteps: np.ndarray
    alpha_bar_t: np.ndarray
    alpha_bar_prev: np.ndarray

    @classmethod
    def make(cls, alpha_bar: np.ndarray, steps: int) -> "DDIMSchedule":
        T = len(alpha_bar)
        if not 1 <= steps <= T:
            raise ValueError(f"sampling steps must be in 1..{T}, got {steps}")
        # "leading" spacing with offset 1 (as DDPO uses it): [.., 2T/S + 1, T/S + 1, 1]. It does not
        # start at t = T − 1, where the cosine schedule leaves √ᾱ ≈ 5e-5 and x0̂ = (x − √(1−ᾱ)ε)/√ᾱ
        # amplifies the denoiser's error 20 000-fold; the first step's ᾱ is ~0.02 instead.
        stride = T // steps
        ts = (np.arange(steps, dtype=np.int64) * stride + 1)[::-1].copy()
        ts = np.minimum(ts, T - 1)
        prev = np.concatenate([alpha_bar[ts[1:]], [alpha_bar[0]]])
        return cls(ts, alpha_bar[ts].astype(np.float64), prev.astype(np.float64))

    @property
    def steps(self) -> int:
        return int(len(self.timesteps))

    def sigma(self, i: int, eta: float) -> float:
        a_t, a_p = self.alpha_bar_t[i], self.alpha_bar_prev[i]
        return float(eta * math.sqrt(max((1 - a_p) / (1 - a_t) * (1 - a_t / a_p), 0.0)))

    def to_dict(self) -> dict:
        return {"timesteps": self.timesteps.tolist(), "alpha_bar_t": self.alpha_bar_t.tolist(),
                "alpha_bar_prev": self.alpha_bar_prev.tolist()}


@dataclass
class DDIMStep:
    prev_sample: torch.Tensor   # [B, M, K]
    log_prob: torch.Tensor      # [B] mean over entries of log N(prev_sample; mean, σ²); NaN if σ = 0
    mean: torch.Tensor          # [B, M, K]
    std: float                  # σ of this step
    pred_x0: torch.Tensor       # [B, M, K] clipped x0̂


def ddim_step(eps: torch.Tensor, x_t: torch.Tensor, alpha_bar_t: float, alpha_bar_prev: float,
              eta: float, *, clip: tuple[float, float] = (-1.0, 1.0), prev_sample: torch.Tensor | None = None,
              generator: torch.Generator | None = None, noise: torch.Tensor | None = None) -> DDIMStep:
    """eps, x_t: [B, M, K]. prev_sample None: draw x_prev (σ > 0) or take the mean (σ = 0);
    given: evaluate its log-probability (gradient flows through the mean only, as in DDPO).
    clip: the valid latent box that x0̂ is clipped to. noise: the standard normal draw to use
    instead of one from `generator` (the exported sampler takes its noise as an input)."""
    a_t, a_p = float(alpha_bar_t), float(alpha_bar_prev)
    x0 = ((x_t - math.sqrt(1 - a_t) * eps) / math.sqrt(a_t)).clamp(clip[0], clip[1])
    eps = (x_t - math.sqrt(a_t) * x0) / math.sqrt(1 - a_t)
    std = float(eta * math.sqrt(max((1 - a_p) / (1 - a_t) * (1 - a_t / a_p), 0.0)))
    mean = math.sqrt(a_p) * x0 + math.sqrt(max(1 - a_p - std ** 2, 0.0)) * eps
    if prev_sample is None:
        if std > 0:
            if noise is None:
                noise = torch.randn(x_t.shape, generator=generator, dtype=x_t.dtype, device=x_t.device)
            prev_sample = mean + std * noise
        else:
            prev_sample = mean
    if std > 0:
        lp = -((prev_sample.detach() - mean) ** 2) / (2 * std ** 2) - math.log(std) - HALF_LOG_2PI
        log_prob = lp.reshape(lp.shape[0], -1).mean(dim=1)
    else:
        log_prob = torch.full((x_t.shape[0],), float("nan"), dtype=x_t.dtype, device=x_t.device)
    return DDIMStep(prev_sample, log_prob, mean, std, x0)
