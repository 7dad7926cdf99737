"""The diffusion policy: networks + noise schedule + normalization, with the three
operations everything else uses — compute_loss (training), sample (generation, and
rollouts for alignment with per-step log-probabilities), step_log_prob (alignment's
re-evaluation of one denoising step under the current weights). The last two are
guided DDIM, module functions below the class.

Models p(a_t | o_t, a_{t−1}, o_{t−1}) (the MIMESYS paper §4.2.2, state-aware
conditioning) with ε-prediction DDPM training (Ho et al. 2020) and classifier-free
guidance (Ho & Salimans 2022). Compositions live in a standardized latent space
(layout.ActionScale).

Shapes: B windows, M stressors, K threads, N metrics, S sampling steps.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from mimesys.metrics import MetricSpec

from .config import ModelConfig
from .layout import ActionScale, MetricLayout, Normalizer
from .networks import ContextEncoder, Denoiser
from .noise_schedule import DDIMSchedule, DDIMStep, cosine_alpha_bar, ddim_step


@dataclass
class Context:
    """What a_t is conditioned on, in raw metric units and model metric order.

    target_obs  [B, N]     o_t (NaN = not measured)
    prev_obs    [B, N]     o_{t−1} (NaN at a trace's first window)
    prev_action [B, M, K]  a_{t−1} (zeros = idle before the first window)
    """

    target_obs: torch.Tensor
    prev_obs: torch.Tensor
    prev_action: torch.Tensor

    def __post_init__(self):
        B = self.target_obs.shape[0]
        if self.target_obs.ndim != 2 or self.prev_obs.shape != self.target_obs.shape \
                or self.prev_action.ndim != 3 or self.prev_action.shape[0] != B:
            raise ValueError(f"context: target_obs {tuple(self.target_obs.shape)}, prev_obs "
                             f"{tuple(self.prev_obs.shape)}, prev_action {tuple(self.prev_action.shape)}; "
                             f"need [B, N], [B, N], [B, M, K]")

    def __len__(self) -> int:
        return int(self.target_obs.shape[0])

    def to(self, device) -> "Context":
        return Context(self.target_obs.to(device), self.prev_obs.to(device), self.prev_action.to(device))

    def index(self, idx) -> "Context":
        return Context(self.target_obs[idx], self.prev_obs[idx], self.prev_action[idx])


@dataclass
class TrainBatch:
    context: Context
    action: torch.Tensor   # [B, M, K] a_t, valid compositions


@dataclass
class SampleOutput:
    actions: torch.Tensor    # [B, M, K] valid compositions (projected)
    latents: torch.Tensor    # [B, S + 1, M, K] x_T, ..., x_0 as sampled
    log_probs: torch.Tensor  # [B, S] log π(x_{i+1} | x_i, c) per step (NaN where σ = 0, i.e. η = 0)


@dataclass(frozen=True)
class ModelSpec:
    """What the model was trained for; travels with every checkpoint and export."""

    metrics: tuple[MetricSpec, ...]
    catalog_names: tuple[str, ...]
    catalog_hash: str
    threads: int
    window_s: float
    host_fingerprint: dict

    @property
    def metric_names(self) -> list[str]:
        return [m.name for m in self.metrics]

    def to_dict(self) -> dict:
        return {"metrics": [m.to_dict() for m in self.metrics], "catalog_names": list(self.catalog_names),
                "catalog_hash": self.catalog_hash, "threads": self.threads, "window_s": self.window_s,
                "host_fingerprint": self.host_fingerprint}

    @classmethod
    def from_dict(cls, d: dict) -> "ModelSpec":
        return cls(tuple(MetricSpec.from_dict(m) for m in d["metrics"]), tuple(d["catalog_names"]),
                   d["catalog_hash"], int(d["threads"]), float(d["window_s"]), dict(d["host_fingerprint"]))


def project_to_valid(a: torch.Tensor) -> torch.Tensor:
    """[..., M, K] -> entries clipped to [0, 1], each thread's column scaled to sum ≤ 1."""
    a = a.clamp(0.0, 1.0)
    return a / a.sum(dim=-2, keepdim=True).clamp(min=1.0)


class DiffusionPolicy(nn.Module):
    def __init__(self, spec: ModelSpec, config: ModelConfig, normalizer: Normalizer,
                 action_scale: ActionScale = ActionScale()):
        super().__init__()
        self.spec, self.config, self.normalizer, self.action_scale = spec, config, normalizer, action_scale
        self.layout = MetricLayout.build(spec.metric_names, spec.threads)
        M = len(spec.catalog_names)
        self.encoder = ContextEncoder(self.layout, normalizer, M, config.hidden,
                                      config.use_prev_action, config.use_prev_obs)
        self.alpha_bar_np = cosine_alpha_bar(config.train_timesteps)
        self.denoiser = Denoiser(M, config.hidden, config.blocks, config.train_timesteps, config.prediction,
                                 torch.tensor(self.alpha_bar_np, dtype=torch.float64))
        self.register_buffer("alpha_bar", torch.tensor(self.alpha_bar_np, dtype=torch.float32))

    @property
    def M(self) -> int:
        return len(self.spec.catalog_names)

    @property
    def K(self) -> int:
        return self.spec.threads

    def schedule(self, steps: int | None = None) -> DDIMSchedule:
        return DDIMSchedule.make(self.alpha_bar_np, steps or self.config.sample_steps)

    @property
    def latent_box(self) -> tuple[float, float]:
        return (self.action_scale.lo, self.action_scale.hi)

    def to_latent(self, a: torch.Tensor) -> torch.Tensor:
        return self.action_scale.to_latent(a, torch)

    def from_latent(self, x: torch.Tensor) -> torch.Tensor:
        return self.action_scale.from_latent(x, torch)

    # -- training ---------------------------------------------------------------
    def compute_loss(self, batch: TrainBatch, generator: torch.Generator | None = None) -> torch.Tensor:
        """ε- (or x_0-, config.prediction) MSE with random context dropout (CFG) and random metric hiding."""
        ctx, a0 = batch.context, batch.action
        B, dev = a0.shape[0], a0.device
        rand = lambda *shape: torch.rand(shape, generator=generator, device=dev)  # noqa: E731
        x0 = self.to_latent(a0)
        t = torch.randint(0, self.config.train_timesteps, (B,), generator=generator, device=dev)
        eps = torch.randn(x0.shape, generator=generator, device=dev)
        ab = self.alpha_bar[t][:, None, None]
        x_t = ab.sqrt() * x0 + (1 - ab).sqrt() * eps
        keep = (rand(B) >= self.config.cond_drop).float()
        target, prev = ctx.target_obs, ctx.prev_obs
        if self.config.metric_drop > 0:
            nan = torch.full_like(target, float("nan"))
            target = torch.where(rand(*target.shape) < self.config.metric_drop, nan, target)
            prev = torch.where(rand(*prev.shape) < self.config.metric_drop, nan, prev)
        h, g = self.encoder(target, prev, ctx.prev_action, keep)
        out = self.denoiser.head(x_t, t, h, g)
        return F.mse_loss(out, x0 if self.config.prediction == "x0" else eps)

    def forward(self, batch: TrainBatch, generator: torch.Generator | None = None) -> torch.Tensor:
        """= compute_loss; DistributedDataParallel synchronizes gradients through forward."""
        return self.compute_loss(batch, generator)

    # -- sampling (the functions below) ------------------------------------------------
    def sample(self, ctx: Context, *, steps: int | None = None, guidance: float | None = None,
               eta: float | None = None, generator: torch.Generator | None = None,
               x_T: torch.Tensor | None = None, noise: torch.Tensor | None = None) -> SampleOutput:
        """Draw one composition per context row with DDIM, recording the path and each
        step's log-probability (finite when η > 0). Gradients flow if enabled by the caller.
        x_T [B, M, K] and noise [S, B, M, K] replace the generator's draws when given."""
        return sample(self, ctx, steps=steps, guidance=guidance, eta=eta, generator=generator,
                               x_T=x_T, noise=noise)

    def step_log_prob(self, ctx: Context, latents: torch.Tensor, next_latents: torch.Tensor, step: int, *,
                      steps: int | None = None, guidance: float | None = None, eta: float) -> DDIMStep:
        """Re-evaluate sampling step `step` (0 = the first, from x_T): the log-probability of
        next_latents [B, M, K] given latents [B, M, K] under the current weights (differentiable)."""
        return step_log_prob(self, ctx, latents, next_latents, step, steps=steps, guidance=guidance,
                                      eta=eta)

    # -- convenience --------------------------------------------------------------
    def context_from_numpy(self, target_obs: np.ndarray, prev_obs: np.ndarray, prev_action: np.ndarray) -> Context:
        dev = self.alpha_bar.device
        f = lambda x: torch.as_tensor(np.asarray(x, np.float32), device=dev)  # noqa: E731
        return Context(f(target_obs), f(prev_obs), f(prev_action))

    def parameter_count(self) -> int:
        return sum(p.numel() for p in self.parameters())


# -- guided DDIM sampling: module functions, so the class stays the networks and the loss --

def encode(policy: DiffusionPolicy, ctx: Context, guidance: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Context tokens for guided denoising: [B] conditional rows, then (if guidance ≠ 1)
    [B] null rows. -> thread_ctx [B or 2B, K, D], global_ctx [B or 2B, D]."""
    ones = torch.ones_like(ctx.target_obs[:, 0])          # (written so that ONNX tracing keeps B dynamic)
    if guidance == 1.0:
        return policy.encoder(ctx.target_obs, ctx.prev_obs, ctx.prev_action, ones)
    keep = torch.cat([ones, torch.zeros_like(ones)])
    two = lambda x: torch.cat([x, x])  # noqa: E731
    return policy.encoder(two(ctx.target_obs), two(ctx.prev_obs), two(ctx.prev_action), keep)


def guided_eps(policy: DiffusionPolicy, x_t: torch.Tensor, t: int, tokens, guidance: float) -> torch.Tensor:
    """x_t [B, M, K] -> ε̂ = ε_u + w (ε_c − ε_u), one batched call of 2B rows."""
    h, g = tokens
    B = x_t.shape[0]
    if guidance == 1.0:
        return policy.denoiser(x_t, torch.full_like(x_t[:, 0, 0], t, dtype=torch.long), h, g)
    x2 = torch.cat([x_t, x_t])
    eps = policy.denoiser(x2, torch.full_like(x2[:, 0, 0], t, dtype=torch.long), h, g)
    eps_c, eps_u = eps[:B], eps[B:]
    return eps_u + guidance * (eps_c - eps_u)


def sample(policy: DiffusionPolicy, ctx: Context, *, steps: int | None, guidance: float | None,
           eta: float | None, generator: torch.Generator | None, x_T: torch.Tensor | None,
           noise: torch.Tensor | None) -> SampleOutput:
    """DiffusionPolicy.sample: one composition per context row, the path and each step's log-prob."""
    sched = policy.schedule(steps)
    w = policy.config.guidance if guidance is None else float(guidance)
    eta = policy.config.eta if eta is None else float(eta)
    dev = ctx.target_obs.device
    tokens = encode(policy, ctx, w)
    x = x_T if x_T is not None else torch.randn((len(ctx), policy.M, policy.K), generator=generator, device=dev)
    latents, log_probs = [x], []
    for i in range(sched.steps):
        eps = guided_eps(policy, x, int(sched.timesteps[i]), tokens, w)
        step = ddim_step(eps, x, sched.alpha_bar_t[i], sched.alpha_bar_prev[i], eta, clip=policy.latent_box,
                         generator=generator, noise=None if noise is None else noise[i])
        x = step.prev_sample
        latents.append(x)
        log_probs.append(step.log_prob)
    actions = project_to_valid(policy.from_latent(x))
    return SampleOutput(actions, torch.stack(latents, dim=1), torch.stack(log_probs, dim=1))


def step_log_prob(policy: DiffusionPolicy, ctx: Context, latents: torch.Tensor, next_latents: torch.Tensor,
                  step: int, *, steps: int | None, guidance: float | None, eta: float) -> DDIMStep:
    """DiffusionPolicy.step_log_prob: sampling step `step` re-evaluated under the current weights."""
    sched = policy.schedule(steps)
    if not 0 <= step < sched.steps:
        raise ValueError(f"step {step} outside 0..{sched.steps - 1}")
    w = policy.config.guidance if guidance is None else float(guidance)
    eps = guided_eps(policy, latents, int(sched.timesteps[step]), encode(policy, ctx, w), w)
    return ddim_step(eps, latents, sched.alpha_bar_t[step], sched.alpha_bar_prev[step], float(eta),
                     clip=policy.latent_box, prev_sample=next_latents)
