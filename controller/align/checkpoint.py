"""Resumable alignment state: one file, written atomically after each checkpoint epoch.

It holds the policy and optimizer state, the per-window reward buffers, the history,
the random generators' states, the resolved config and the identity of the starting
model, so a resumed run continues exactly where the last checkpoint left it and refuses
to continue from a different model or a different config.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from mimesys.errors import ConfigError

from ..model.checkpoint import load_torch_file, save_torch_atomic

FORMAT = "mimesys.align-checkpoint"
VERSION = 1


@dataclass
class AlignState:
    epoch: int                 # epochs completed
    policy: dict               # policy state_dict
    optimizer: dict
    tracker: dict              # WindowStatTracker.state_dict()
    history: list[dict]        # EpochRecord dicts
    torch_rng: torch.Tensor    # torch.Generator state used for sampling
    numpy_rng: dict            # np.random.Generator bit_generator.state
    config: dict               # AlignConfig.to_dict()
    base_model: dict           # identity of the pretrained model: path, sha256
    targets: list[str]         # target trace names, in order (segment keys index into this)

    def save(self, path: Path | str) -> None:
        save_torch_atomic(path, {"format": FORMAT, "version": VERSION, **self.__dict__})

    @classmethod
    def load(cls, path: Path | str) -> "AlignState":
        d = load_torch_file(path, "alignment checkpoint", ConfigError)
        if d.get("format") != FORMAT:
            raise ConfigError(f"{path}: not an alignment checkpoint (format={d.get('format')!r})")
        if d.get("version") != VERSION:
            raise ConfigError(f"{path}: checkpoint version {d.get('version')} not supported (this build: {VERSION})")
        d.pop("format"), d.pop("version")
        return cls(**d)

    def check_compatible(self, *, config: dict, base_model: dict, targets: list[str], path) -> None:
        """A resume must continue the same run: same starting model, targets and config
        (except the number of epochs, which may be raised to train longer)."""
        if self.base_model.get("sha256") != base_model.get("sha256"):
            raise ConfigError(f"{path}: checkpoint was made from model {self.base_model.get('path')} "
                              f"({self.base_model.get('sha256', '')[:12]}), not {base_model.get('path')} "
                              f"({base_model.get('sha256', '')[:12]}); use a fresh --work-dir or --restart")
        if self.targets != targets:
            raise ConfigError(f"{path}: checkpoint targets {self.targets} differ from {targets}; "
                              f"use a fresh --work-dir or --restart")
        diff = sorted(k for k in set(config) | set(self.config)
                      if k != "epochs" and config.get(k) != self.config.get(k))
        if diff:
            raise ConfigError(f"{path}: config differs from the checkpoint's in {diff} "
                              f"(checkpoint: {[self.config.get(k) for k in diff]}, now: "
                              f"{[config.get(k) for k in diff]}); use a fresh --work-dir or --restart")
