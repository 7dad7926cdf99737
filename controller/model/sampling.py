"""Sampling from a DiffusionPolicy: DDIM (noise_schedule.ddim_step) with classifier-free
guidance (Ho & Salimans 2022), recording the path and each step's log-probability.

Apart from the policy (policy.py), which owns the networks and their training loss; this is
what generation and alignment do with them. Guidance runs the conditional and the null rows
as one batched call of 2B rows: ε̂ = ε_u + w (ε_c − ε_u).

Shapes: B windows, M stressors, K threads, S sampling steps.
"""

from __future__ import annotations

import torch

from .noise_schedule import DDIMStep, ddim_step
from .policy import Context, DiffusionPolicy, SampleOutput, project_to_valid


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
