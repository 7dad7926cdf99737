"""What alignment needs from the diffusion model, as typed batches and one protocol.

The model room owns the networks and the sampler; alignment only needs to (1) sample a
composition while recording the denoising path and each step's log-probability, and
(2) re-evaluate one step's Gaussian (log-prob, mean, std) under the current weights.
`controller/align/model_policy.py` implements this over the model room's policy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np
import torch


@dataclass
class Conditions:
    """What a composition is conditioned on, for B windows (raw units, model metric order).

    target_obs [B, N]: the window's target metrics (NaN = not in the trace)
    prev_obs   [B, N]: the previous target window's metrics (NaN at a trace's first window)
    prev_action [B, M, K]: the composition generated for the previous window (zeros = idle)
    """

    target_obs: torch.Tensor
    prev_obs: torch.Tensor
    prev_action: torch.Tensor

    def __post_init__(self):
        B = self.target_obs.shape[0]
        if self.prev_obs.shape != self.target_obs.shape or self.prev_action.ndim != 3 \
                or self.prev_action.shape[0] != B:
            raise ValueError(f"conditions: target_obs {tuple(self.target_obs.shape)}, prev_obs "
                             f"{tuple(self.prev_obs.shape)}, prev_action {tuple(self.prev_action.shape)} "
                             f"must be [B, N], [B, N], [B, M, K]")

    def __len__(self) -> int:
        return int(self.target_obs.shape[0])

    def index(self, idx) -> "Conditions":
        return Conditions(self.target_obs[idx], self.prev_obs[idx], self.prev_action[idx])

    @classmethod
    def cat(cls, parts: list["Conditions"]) -> "Conditions":
        return cls(torch.cat([p.target_obs for p in parts]), torch.cat([p.prev_obs for p in parts]),
                   torch.cat([p.prev_action for p in parts]))


@dataclass
class Trajectories:
    """B sampled denoising paths.

    latents   [B, S + 1, *X]: x_T, ..., x_0 in the model's sample space
    log_probs [B, S]: log π(x_{j+1} | x_j, c) of each step as sampled
    actions   [B, M, K] float32 (numpy): the valid compositions the paths decode to
    """

    latents: torch.Tensor
    log_probs: torch.Tensor
    actions: np.ndarray

    def __post_init__(self):
        B, S1 = self.latents.shape[:2]
        if self.log_probs.shape != (B, S1 - 1) or self.actions.shape[0] != B:
            raise ValueError(f"trajectories: latents {tuple(self.latents.shape)}, log_probs "
                             f"{tuple(self.log_probs.shape)}, actions {self.actions.shape} disagree")

    @property
    def steps(self) -> int:
        return int(self.log_probs.shape[1])

    def index(self, idx) -> "Trajectories":
        return Trajectories(self.latents[idx], self.log_probs[idx], self.actions[idx])

    @classmethod
    def cat(cls, parts: list["Trajectories"]) -> "Trajectories":
        return cls(torch.cat([p.latents for p in parts]), torch.cat([p.log_probs for p in parts]),
                   np.concatenate([p.actions for p in parts]))


@dataclass
class StepDistribution:
    """One denoising step's Gaussian for B samples: log_prob [B] of the given next latent,
    mean [B, *X], std broadcastable to mean."""

    log_prob: torch.Tensor
    mean: torch.Tensor
    std: torch.Tensor


class AlignPolicy(Protocol):
    metric_names: list[str]      # model metric order (N)
    catalog_names: list[str]     # stressor order (M)
    catalog_hash: str
    threads: int                 # K
    window_s: float
    steps: int                   # denoising steps S of the η > 0 sampler

    def normalize_obs(self, values: np.ndarray) -> np.ndarray:
        """[..., N] raw -> the model's normalized metric space (NaN stays NaN)."""

    def sample(self, cond: Conditions, generator: torch.Generator) -> Trajectories:
        """Sample one composition per window with the η > 0 DDIM sampler, recording the path."""

    def step(self, cond: Conditions, latents: torch.Tensor, next_latents: torch.Tensor,
             step: int) -> StepDistribution:
        """Re-evaluate denoising step `step` (0 = the first, from x_T) under the current weights."""

    def parameters(self):
        """Trainable parameters."""

    def frozen_copy(self) -> "AlignPolicy":
        """A copy of the current weights with gradients off: the KL reference."""
