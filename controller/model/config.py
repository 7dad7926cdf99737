"""Model and sampler defaults (one commented place). Frozen; unknown keys fail at load."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields

from mimesys.config import check_known
from mimesys.errors import ConfigError


@dataclass(frozen=True)
class ModelConfig:
    hidden: int = 64                  # token width D (64 × 2 blocks: ~1 ms per window on one CPU core)
    blocks: int = 2                   # equivariant blocks in the denoiser
    train_timesteps: int = 1000       # DDPM training steps (cosine schedule)
    use_prev_action: bool = True      # state-aware conditioning on a_{t-1} (the paper's §4.2.2)
    use_prev_obs: bool = False        # also condition on o_{t-1}: off, as in the paper (c = g(o_t, a_{t-1}));
                                      # on the simulated host it did worse (bench/model_quality.py)
    cond_drop: float = 0.1            # classifier-free guidance: P(context replaced by null tokens)
    metric_drop: float = 0.03         # P(one input metric hidden as NaN) in training: robustness to gaps
    prediction: str = "x0"            # the denoiser's head: "x0" (the clean latent) or "eps" (ε, Ho et al.);
                                      # x0: 0.159 vs 0.192 predicted error on six real mixes (taught, 3000 steps)
    action_log_floor: float = 0.0     # > 0: compositions denoised as log(a + this) (layout.ActionScale); 0 = linear
    # Sampler defaults (travel in the checkpoint and the export manifest).
    sample_steps: int = 5             # DDIM steps (x0-prediction: 5 as good as 10, at twice the speed)
    guidance: float = 1.5             # ε = ε_u + w (ε_c − ε_u); 1 = no guidance (one pass per step)
    eta: float = 0.0                  # DDIM η for generation (0 = deterministic given x_T)

    def __post_init__(self):
        checks = [(self.hidden >= 8, "hidden >= 8"), (self.blocks >= 1, "blocks >= 1"),
                  (self.train_timesteps >= 10, "train_timesteps >= 10"),
                  (0 <= self.cond_drop < 1, "0 <= cond_drop < 1"), (0 <= self.metric_drop < 1, "0 <= metric_drop < 1"),
                  (1 <= self.sample_steps <= self.train_timesteps, "1 <= sample_steps <= train_timesteps"),
                  (self.guidance >= 0, "guidance >= 0"), (self.eta >= 0, "eta >= 0"),
                  (0 <= self.action_log_floor < 1, "0 <= action_log_floor < 1"),
                  (self.prediction in ("eps", "x0"), "prediction 'eps' or 'x0'")]
        for ok, what in checks:
            if not ok:
                raise ConfigError(f"model config: need {what}")

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "ModelConfig":
        # A model saved before the x0 head existed was trained with ε-prediction.
        return cls(**{"prediction": "eps", **_known(cls, d, "model config")})


def _known(cls, d: dict, what: str) -> dict:
    check_known(d, sorted(f.name for f in fields(cls)), what)
    return dict(d)
