"""Alignment configuration: one frozen dataclass of commented defaults.

Defaults follow the MIMESYS paper (§6: DDPO, learning rate 3e-6, advantage clip 3, equal
weight per resource type, 1 s windows) and its artifact's RL config (KL coefficient 0.05
to the pretrained model, one inner epoch); the PPO clip range and the per-window
statistics buffer follow kvablack/ddpo-pytorch (config/base.py). Runs override single
fields by name (`AlignConfig.from_overrides`), never by code.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from mimesys.config import check_known
from mimesys.errors import ConfigError


@dataclass(frozen=True)
class AlignConfig:
    # -- policy: the DDIM sampler that DDPO treats as a sequence of Gaussian actions --------
    eta: float = 1.0                   # DDIM stochasticity; > 0 so each step has a log-prob (DDPO uses 1.0)
    sample_steps: int | None = None    # DDIM steps per composition; None = the model's sampler setting
    guidance_weight: float | None = None  # classifier-free guidance; None = the model's setting

    # -- rollouts: sequential over real trace segments, batched across agents ---------------
    segment_windows: int = 8           # consecutive target windows per rollout; state carried across them
    segments_per_epoch: int = 4        # distinct segments drawn per epoch (spread over the agents)
    repeats_per_segment: int = 2       # rollouts of each drawn segment per epoch (different noise)
    context_windows: int = 1           # windows generated + executed before a segment to set its state; not scored
    run_repetitions: int = 1           # agent-side repetitions of each rollout plan (reward uses their mean)

    # -- reward: − weighted L1 in the model's normalized metric space -----------------------
    # (pattern, weight) pairs matched with fnmatch against metric names, applied in order on
    # top of the default: equal total weight per resource type (name prefix: cpu, mem, disk, ...).
    reward_weights: tuple[tuple[str, float], ...] = ()

    # -- advantages: normalized per target window with running statistics --------------------
    stat_buffer: int = 32              # rewards kept per target window (trace, window index)
    stat_min_count: int = 4            # below this many, normalize with the epoch's global statistics
    adv_clip: float = 3.0              # advantages clipped to ±adv_clip (paper §6)

    # -- PPO over denoising steps -------------------------------------------------------------
    clip_range: float = 1e-4           # ratio clip, as in DDPO (ratios stay near 1 at this learning rate)
    kl_coef: float = 0.05              # KL penalty to the frozen pretrained model, per denoising step
    timestep_fraction: float = 1.0     # fraction of denoising steps trained per sample (DDPO)
    inner_epochs: int = 1              # optimisation passes over each epoch's samples
    train_batch_size: int = 16         # windows per gradient step
    lr: float = 3e-6                   # low, to keep what pretraining learned (paper §6)
    adam_betas: tuple[float, float] = (0.9, 0.999)
    weight_decay: float = 1e-4
    max_grad_norm: float = 1.0

    # -- loop -----------------------------------------------------------------------------------
    epochs: int = 20
    checkpoint_every: int = 1          # epochs between resumable checkpoints
    seed: int = 0

    def validate(self) -> "AlignConfig":
        """Raise ConfigError naming the first bad field; returns self."""
        checks = [
            ("eta", self.eta > 0, "must be > 0: with eta = 0 DDIM is deterministic and has no log-probability"),
            ("sample_steps", self.sample_steps is None or self.sample_steps >= 2, "must be ≥ 2 or None"),
            ("guidance_weight", self.guidance_weight is None or self.guidance_weight >= 0, "must be ≥ 0 or None"),
            ("segment_windows", self.segment_windows >= 1, "must be ≥ 1"),
            ("segments_per_epoch", self.segments_per_epoch >= 1, "must be ≥ 1"),
            ("repeats_per_segment", self.repeats_per_segment >= 1, "must be ≥ 1"),
            ("context_windows", self.context_windows >= 0, "must be ≥ 0"),
            ("run_repetitions", self.run_repetitions >= 1, "must be ≥ 1"),
            ("stat_buffer", self.stat_buffer >= 2, "must be ≥ 2"),
            ("stat_min_count", 2 <= self.stat_min_count <= self.stat_buffer, "must be in [2, stat_buffer]"),
            ("adv_clip", self.adv_clip > 0, "must be > 0"),
            ("clip_range", 0 < self.clip_range < 1, "must be in (0, 1)"),
            ("kl_coef", self.kl_coef >= 0, "must be ≥ 0"),
            ("timestep_fraction", 0 < self.timestep_fraction <= 1, "must be in (0, 1]"),
            ("inner_epochs", self.inner_epochs >= 1, "must be ≥ 1"),
            ("train_batch_size", self.train_batch_size >= 1, "must be ≥ 1"),
            ("lr", self.lr > 0, "must be > 0"),
            ("max_grad_norm", self.max_grad_norm > 0, "must be > 0"),
            ("epochs", self.epochs >= 1, "must be ≥ 1"),
            ("checkpoint_every", self.checkpoint_every >= 1, "must be ≥ 1"),
        ]
        for name, ok, why in checks:
            if not ok:
                raise ConfigError(f"align config: {name}={getattr(self, name)!r} {why}")
        for i, pair in enumerate(self.reward_weights):
            if len(pair) != 2 or not isinstance(pair[0], str) or not float(pair[1]) >= 0:
                raise ConfigError(f"align config: reward_weights[{i}]={pair!r} must be (pattern, weight ≥ 0)")
        return self

    @classmethod
    def field_names(cls) -> list[str]:
        return [f.name for f in dataclasses.fields(cls)]

    @classmethod
    def from_overrides(cls, overrides: dict | None = None, base: "AlignConfig | None" = None) -> "AlignConfig":
        """Defaults (or `base`) with fields replaced by name; an unknown name is an error listing the valid ones."""
        overrides = dict(overrides or {})
        check_known(overrides, cls.field_names(), "align config", noun="field")
        if "reward_weights" in overrides:
            overrides["reward_weights"] = tuple((str(p), float(w)) for p, w in overrides["reward_weights"])
        if "adam_betas" in overrides:
            overrides["adam_betas"] = tuple(float(b) for b in overrides["adam_betas"])
        return dataclasses.replace(base or cls(), **overrides).validate()

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["reward_weights"] = [list(p) for p in self.reward_weights]
        d["adam_betas"] = list(self.adam_betas)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "AlignConfig":
        return cls.from_overrides(d)

    @property
    def rollouts_per_epoch(self) -> int:
        return self.segments_per_epoch * self.repeats_per_segment


# Small named overrides, as in ddpo-pytorch's config files: `mimesys align --preset NAME`.
PRESETS: dict[str, dict] = {
    # Paper defaults.
    "paper": {},
    # Short runs on a 2-core machine against simulated agents: a larger learning rate and
    # clip range so that a few epochs move a small CPU model measurably; 4 rollouts of each
    # segment so every target window has its own statistics from the first epoch.
    # (Leaving the last, σ ~ 1e-2 DDIM steps out of the update was tried and is harmful: their
    # KL is then unconstrained, and after 7-27 epochs the policy drifted away and collapsed.)
    "sim-fast": {"lr": 3e-4, "clip_range": 0.2, "segment_windows": 8, "segments_per_epoch": 4,
                 "repeats_per_segment": 4, "train_batch_size": 32},
    # Against the host's forward model (`--forward`): rollouts cost microseconds, so many more
    # segments per epoch than agents could run; sim-fast's step sizes.
    "forward": {"lr": 3e-4, "clip_range": 0.2, "segment_windows": 8, "segments_per_epoch": 16,
                "repeats_per_segment": 4, "train_batch_size": 64, "epochs": 30},
}


def preset(name: str) -> dict:
    try:
        return dict(PRESETS[name])
    except KeyError:
        raise ConfigError(f"unknown align preset {name!r}; known: {', '.join(PRESETS)}") from None

