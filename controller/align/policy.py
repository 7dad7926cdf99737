"""The diffusion model as an alignment policy.

The model room's DiffusionPolicy (controller/model/policy.py) already samples with a
recorded denoising path and per-step log-probabilities, and re-evaluates one step
(`step_log_prob`, with the DDIM-with-log-prob step of controller/model/noise_schedule.py,
adapted from kvablack/ddpo-pytorch). `AlignPolicy` fixes the sampler settings alignment
uses (η > 0, steps, guidance) and returns typed batches the loop can index and stack.

Shapes: B windows, M stressors, K threads, N metrics, S denoising steps.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from controller.model.policy import Context, DiffusionPolicy

from .config import AlignConfig


def cat_contexts(parts: list[Context]) -> Context:
    return Context(torch.cat([p.target_obs for p in parts]), torch.cat([p.prev_obs for p in parts]),
                   torch.cat([p.prev_action for p in parts]))


@dataclass
class Trajectories:
    """B sampled denoising paths.

    latents   [B, S + 1, M, K]: x_T, ..., x_0 as sampled
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
    mean [B, M, K], std (a scalar tensor: the same σ for every entry of the step)."""

    log_prob: torch.Tensor
    mean: torch.Tensor
    std: torch.Tensor


class AlignPolicy(nn.Module):
    """DiffusionPolicy + the η > 0 sampler settings alignment trains under."""

    def __init__(self, model: DiffusionPolicy, *, eta: float, steps: int | None = None,
                 guidance: float | None = None):
        super().__init__()
        if not eta > 0:
            raise ValueError(f"alignment needs η > 0 (a log-probability per step), got {eta}")
        self.model = model
        self.eta = float(eta)
        self.sample_steps = int(steps or model.config.sample_steps)
        self.guidance = float(model.config.guidance if guidance is None else guidance)

    @classmethod
    def from_config(cls, model: DiffusionPolicy, cfg: AlignConfig) -> "AlignPolicy":
        return cls(model, eta=cfg.eta, steps=cfg.sample_steps, guidance=cfg.guidance_weight)

    # what rollouts and rewards need to know about the model
    @property
    def metric_names(self) -> list[str]:
        return self.model.spec.metric_names

    @property
    def catalog_names(self) -> list[str]:
        return list(self.model.spec.catalog_names)

    @property
    def catalog_hash(self) -> str:
        return self.model.spec.catalog_hash

    @property
    def threads(self) -> int:
        return self.model.K

    @property
    def window_s(self) -> float:
        return self.model.spec.window_s

    @property
    def steps(self) -> int:
        return self.model.schedule(self.sample_steps).steps

    def normalize_obs(self, values: np.ndarray) -> np.ndarray:
        """[..., N] raw -> the model's normalized metric space (z-scores), NaN stays NaN."""
        return self.model.normalizer.normalize(values)

    @torch.no_grad()
    def sample(self, ctx: Context, generator: torch.Generator) -> Trajectories:
        out = self.model.sample(ctx, steps=self.sample_steps, guidance=self.guidance, eta=self.eta,
                                generator=generator)
        return Trajectories(out.latents, out.log_probs, out.actions.cpu().numpy().astype(np.float32))

    def step(self, ctx: Context, latents: torch.Tensor, next_latents: torch.Tensor, step: int) -> StepDistribution:
        st = self.model.step_log_prob(ctx, latents, next_latents, step, steps=self.sample_steps,
                                      guidance=self.guidance, eta=self.eta)
        return StepDistribution(st.log_prob, st.mean, torch.as_tensor(st.std, dtype=st.mean.dtype))

    def frozen_copy(self) -> "AlignPolicy":
        ref = copy.deepcopy(self)
        for p in ref.parameters():
            p.requires_grad_(False)
        return ref.eval()
