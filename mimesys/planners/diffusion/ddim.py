"""The NumPy DDIM sampler over the export's encoder and denoiser graphs (any steps, guidance, η).

The update is the one in controller/model/noise_schedule.py (Song et al. 2021 eq. 12, predicted
x0 clipped to the valid latent box), computed from the ᾱ table in the manifest; classifier-free
guidance runs the conditional and the null context as one batch of 2 per step.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ...errors import ValidationError
from ..base import project_to_valid


def ddim_schedule(alpha_bar: np.ndarray, steps: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(timesteps [S] descending, ᾱ_t [S], ᾱ_prev [S]) with "leading+1" spacing, as
    controller/model/noise_schedule.DDIMSchedule.make (a test checks they agree)."""
    T = len(alpha_bar)
    if not 1 <= steps <= T:
        raise ValidationError(f"sampling steps must be in 1..{T}, got {steps}")
    ts = np.minimum((np.arange(steps, dtype=np.int64) * (T // steps) + 1)[::-1], T - 1)
    prev = np.concatenate([alpha_bar[ts[1:]], [alpha_bar[0]]])
    return ts.copy(), alpha_bar[ts].astype(np.float64), prev.astype(np.float64)


def step_coefficients(ab_t, ab_p, eta):
    """Per step: (√ᾱ_t, √(1−ᾱ_t), √ᾱ_prev, √(1−ᾱ_prev−σ²), σ)."""
    out = []
    for a_t, a_p in zip(ab_t, ab_p):
        sigma = eta * math.sqrt(max((1 - a_p) / (1 - a_t) * (1 - a_t / a_p), 0.0))
        out.append((math.sqrt(a_t), math.sqrt(1 - a_t), math.sqrt(a_p),
                    math.sqrt(max(1 - a_p - sigma ** 2, 0.0)), sigma))
    return out


@dataclass(frozen=True)
class SamplerSettings:
    steps: int
    guidance: float
    eta: float

    @classmethod
    def resolve(cls, defaults: dict, steps: int | None, guidance: float | None, eta: float | None) -> SamplerSettings:
        """The manifest's `sampler` settings, each overridden where given (not None)."""
        s = cls(int(steps if steps is not None else defaults["steps"]),
                float(guidance if guidance is not None else defaults["guidance"]),
                float(eta if eta is not None else defaults["eta"]))
        if s.guidance < 0 or s.eta < 0:
            raise ValidationError(f"guidance and eta must be ≥ 0, got {s}")
        return s


@dataclass(frozen=True)
class LatentScale:
    """The manifest's action_scale (controller/model/layout.py ActionScale), in NumPy."""

    offset: float
    scale: float
    log_floor: float = 0.0          # 0: a linear latent (exports before it existed)

    @classmethod
    def from_manifest(cls, a: dict) -> LatentScale:
        return cls(float(a["offset"]), float(a["scale"]), float(a.get("log_floor", 0.0)))

    def to_latent(self, a: np.ndarray) -> np.ndarray:
        u = np.log(np.maximum(a, 0.0) + self.log_floor) if self.log_floor > 0 else a
        return (u - self.offset) / self.scale

    def from_latent(self, x: np.ndarray) -> np.ndarray:
        u = self.offset + self.scale * x
        return np.exp(u) - self.log_floor if self.log_floor > 0 else u


class DdimSampler:
    """One window's composition [M, K] by the DDIM loop, step by step in Python."""

    def __init__(self, settings: SamplerSettings, alpha_bar: np.ndarray, box: tuple[float, float],
                 latent: LatentScale, shape: tuple[int, int], encoder, denoiser):
        self.settings, self.box, self.latent, self.shape = settings, box, latent, shape
        self.timesteps, ab_t, ab_p = ddim_schedule(alpha_bar, settings.steps)
        self.coef = step_coefficients(ab_t, ab_p, settings.eta)
        self.encoder, self.denoiser = encoder, denoiser
        # A model that ignores an input (e.g. the no-state ablation, prev_action) has no such graph input.
        self.encoder_inputs = {i.name for i in encoder.get_inputs()}

    def draw_noise(self, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray | None]:
        """x_T [1, M, K] and, when η > 0, the per-step noise [S, 1, M, K] (float32)."""
        shape = (1, *self.shape)
        x_T = rng.standard_normal(shape, dtype=np.float32)
        noise = rng.standard_normal((self.settings.steps, *shape), dtype=np.float32) if self.settings.eta > 0 else None
        return x_T, noise

    def sample(self, target, prev_obs, prev_action, x_T, noise=None,
               nudge: Callable[[np.ndarray], np.ndarray] | None = None) -> np.ndarray:
        """target, prev_obs [N] raw (NaN allowed); prev_action [M, K] -> composition [M, K] (valid),
        the predicted composition moved by `nudge` at each step when given."""
        w = self.settings.guidance
        guided = w != 1.0
        f32 = np.float32
        if guided:
            enc_in = {"target_obs": np.stack([target, target]).astype(f32),
                      "prev_obs": np.stack([prev_obs, prev_obs]).astype(f32),
                      "prev_action": np.stack([prev_action, prev_action]).astype(f32),
                      "keep": np.array([1.0, 0.0], f32)}
        else:
            enc_in = {"target_obs": target[None].astype(f32), "prev_obs": prev_obs[None].astype(f32),
                      "prev_action": prev_action[None].astype(f32), "keep": np.ones(1, f32)}
        h, g = self.encoder.run(None, {k: v for k, v in enc_in.items() if k in self.encoder_inputs})
        x = np.asarray(x_T, np.float64)
        lo, hi = self.box
        feed = {"thread_ctx": h, "global_ctx": g}
        rows = 2 if guided else 1
        for i, t in enumerate(self.timesteps):
            feed["x_t"] = np.repeat(x, rows, axis=0).astype(f32)
            feed["t"] = np.full(rows, t, np.int64)
            eps = self.denoiser.run(None, feed)[0].astype(np.float64)
            e = eps[1:2] + w * (eps[0:1] - eps[1:2]) if guided else eps
            sa, s1a, sp, dir_c, sigma = self.coef[i]
            x0 = np.clip((x - s1a * e) / sa, lo, hi)
            if nudge is not None:
                a0 = nudge(project_to_valid(self.latent.from_latent(x0[0])))
                x0 = np.clip(self.latent.to_latent(np.asarray(a0, np.float64))[None], lo, hi)
            e = (x - sa * x0) / s1a
            x = sp * x0 + dir_c * e
            if sigma > 0:
                x = x + sigma * noise[i]
        return project_to_valid(self.latent.from_latent(x[0]))
