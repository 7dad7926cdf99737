"""The reward curve of an alignment run as a PNG (matplotlib, Agg backend)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np


@dataclass(frozen=True)
class EpochRecord:
    """What one epoch's rollouts scored; a row of the run's history (also in checkpoints)."""

    epoch: int
    reward_mean: float
    reward_std: float
    reward_min: float
    reward_max: float
    windows: int              # scored windows this epoch
    unscored: int             # windows without a reward (no metric measured in both)
    kl: float                 # mean KL to the pretrained model over the epoch's training steps
    clipfrac: float
    approx_kl: float
    seconds: float            # wall time of the epoch (sampling + execution + training)

    def to_dict(self) -> dict:
        return asdict(self)


def plot_reward_curve(history: list[EpochRecord], path: Path | str, *, title: str,
                      simulated: bool) -> Path:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    ep = np.array([h.epoch for h in history])
    mean = np.array([h.reward_mean for h in history])
    std = np.array([h.reward_std for h in history])
    fig, (ax, ax_kl) = plt.subplots(2, 1, figsize=(7, 5.5), sharex=True,
                                    gridspec_kw={"height_ratios": [3, 1.2]})
    ax.plot(ep, mean, marker="o", ms=3, lw=0.8, label="mean reward (epoch's rollouts)")
    if len(mean) >= 5:
        # each epoch draws different target segments, so the raw mean also moves with their difficulty
        w = 5
        smooth = np.convolve(mean, np.ones(w) / w, mode="valid")
        ax.plot(ep[w - 1:], smooth, color="k", lw=1.6, label=f"{w}-epoch moving average")
    ax.fill_between(ep, mean - std, mean + std, alpha=0.25, label="± 1 std over windows")
    ax.plot(ep, [h.reward_max for h in history], lw=0.8, ls=":", color="C2", label="best window")
    ax.set_ylabel("reward = − weighted L1\n(normalized metrics)")
    label = "SIMULATED agents" if simulated else "real agents"
    ax.set_title(f"{title} — {label}")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    ax_kl.plot(ep, [h.kl for h in history], color="C3", marker=".", label="KL to pretrained")
    ax_kl.set_xlabel("epoch")
    ax_kl.set_ylabel("KL / step")
    ax_kl.grid(alpha=0.3)
    ax_kl.legend(fontsize=8)
    fig.tight_layout()
    from mimesys.fsutil import atomic_write_with
    atomic_write_with(path, lambda tmp: fig.savefig(tmp, dpi=110, format="png"))
    plt.close(fig)
    return path
