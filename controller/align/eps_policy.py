"""An ε-prediction diffusion model as an alignment policy (the AlignPolicy protocol).

Whatever network predicts ε, alignment needs the same three things from it: encode the
conditions, predict the (guided) noise at a timestep, and decode a final sample into a
valid composition. `EpsPolicy` takes those as callables plus the noise schedule, and
runs the η > 0 DDIM sampler of ddim_logprob.py over them, recording each step.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import torch
from torch import nn

from .ddim_logprob import ddim_step_with_logprob
from .policy import Conditions, StepDistribution, Trajectories


@dataclass(frozen=True)
class DiffusionSchedule:
    """alphas_cumprod [T_train] (ᾱ), the inference timesteps in sampling order (descending),
    and ᾱ after the last step (must be < 1 for the last step to have a log-probability)."""

    alphas_cumprod: torch.Tensor
    timesteps: tuple[int, ...]
    final_alpha_cumprod: float

    def alpha_pair(self, j: int) -> tuple[torch.Tensor, torch.Tensor]:
        a_t = self.alphas_cumprod[self.timesteps[j]]
        if j + 1 < len(self.timesteps):
            a_prev = self.alphas_cumprod[self.timesteps[j + 1]]
        else:
            a_prev = torch.as_tensor(self.final_alpha_cumprod, dtype=self.alphas_cumprod.dtype)
        return a_t, a_prev


class EpsPolicy(nn.Module):
    """AlignPolicy over an ε-network.

    encode(cond: Conditions) -> C                        (model-specific conditioning, may be a tuple)
    guided_eps(net, x_t [B, *X], t [B] long, C) -> ε     (with classifier-free guidance applied)
    decode(x0 [B, *X]) -> np.ndarray float32 [B, M, K]   (a valid composition: ≥ 0, column sums ≤ 1)
    normalize_obs(values [..., N]) -> normalized metrics (the model's normalization)
    """

    def __init__(self, net: nn.Module, *, schedule: DiffusionSchedule, sample_shape: tuple[int, ...],
                 encode: Callable[[Conditions], Any], guided_eps: Callable[..., torch.Tensor],
                 decode: Callable[[torch.Tensor], np.ndarray], normalize_obs: Callable[[np.ndarray], np.ndarray],
                 metric_names: list[str], catalog_names: list[str], catalog_hash: str, threads: int,
                 window_s: float, eta: float, clip_x0: float | None = None):
        super().__init__()
        self.net = net
        self.schedule = schedule
        self.sample_shape = tuple(sample_shape)
        self._encode, self._guided_eps, self._decode, self._normalize = encode, guided_eps, decode, normalize_obs
        self.metric_names, self.catalog_names = list(metric_names), list(catalog_names)
        self.catalog_hash, self.threads, self.window_s = catalog_hash, int(threads), float(window_s)
        self.eta, self.clip_x0 = float(eta), clip_x0

    @property
    def steps(self) -> int:
        return len(self.schedule.timesteps)

    def normalize_obs(self, values: np.ndarray) -> np.ndarray:
        return self._normalize(values)

    def _eps(self, x: torch.Tensor, j: int, c) -> torch.Tensor:
        t = torch.full((x.shape[0],), int(self.schedule.timesteps[j]), dtype=torch.long, device=x.device)
        return self._guided_eps(self.net, x, t, c)

    @torch.no_grad()
    def sample(self, cond: Conditions, generator: torch.Generator) -> Trajectories:
        """[B] windows -> Trajectories(latents [B, S+1, *X], log_probs [B, S], actions [B, M, K])."""
        c = self._encode(cond)
        x = torch.randn((len(cond), *self.sample_shape), generator=generator)
        latents, log_probs = [x], []
        for j in range(self.steps):
            a_t, a_prev = self.schedule.alpha_pair(j)
            st = ddim_step_with_logprob(self._eps(x, j, c), x, a_t, a_prev, self.eta,
                                        generator=generator, clip_x0=self.clip_x0)
            x = st.prev_sample
            latents.append(x)
            log_probs.append(st.log_prob)
        return Trajectories(torch.stack(latents, 1), torch.stack(log_probs, 1), self._decode(x))

    def step(self, cond: Conditions, latents: torch.Tensor, next_latents: torch.Tensor, step: int) -> StepDistribution:
        a_t, a_prev = self.schedule.alpha_pair(step)
        st = ddim_step_with_logprob(self._eps(latents, step, self._encode(cond)), latents, a_t, a_prev,
                                    self.eta, prev_sample=next_latents, clip_x0=self.clip_x0)
        return StepDistribution(st.log_prob, st.mean, st.std)

    def frozen_copy(self) -> "EpsPolicy":
        ref = copy.deepcopy(self)
        for p in ref.parameters():
            p.requires_grad_(False)
        return ref.eval()
