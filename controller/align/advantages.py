"""Advantages normalized per target window, with running statistics over a buffer.

Some target windows are simply harder to reproduce than others (a burst the catalog
cannot reach), so raw rewards mostly say *which window* was drawn, not whether the
policy did well on it. As DDPO's per-prompt stat tracker does for prompts
(kvablack/ddpo-pytorch, ddpo_pytorch/stat_tracking.py), each target window — keyed by
(trace, window index) — keeps its last `buffer_size` rewards, and a new reward is scored
against that window's mean and standard deviation. Until a window has `min_count`
rewards it is scored against the whole batch. Changed from the original: keys are
target windows, the buffer state is saved in checkpoints, and clipping is part of it.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Hashable

import numpy as np

EPS = 1e-6


@dataclass(frozen=True)
class AdvantageStats:
    windows_tracked: int      # distinct target windows with a buffer
    from_window_stats: int    # rewards in this batch scored against their window's own buffer
    from_batch_stats: int     # rewards scored against the batch (window seen < min_count times)
    clipped: int              # advantages that hit ±clip


class WindowStatTracker:
    def __init__(self, buffer_size: int = 32, min_count: int = 4, clip: float = 3.0):
        if buffer_size < 2 or not 2 <= min_count <= buffer_size or clip <= 0:
            raise ValueError(f"need buffer_size ≥ 2, 2 ≤ min_count ≤ buffer_size, clip > 0; got "
                             f"{buffer_size}, {min_count}, {clip}")
        self.buffer_size, self.min_count, self.clip = buffer_size, min_count, clip
        self._buffers: dict[Hashable, deque] = {}

    def update(self, keys: list[Hashable], rewards: np.ndarray) -> tuple[np.ndarray, AdvantageStats]:
        """keys: B target-window keys; rewards: float [B] (finite). Returns clipped advantages
        float32 [B]. The batch's rewards join their windows' buffers before scoring, so a window
        drawn several times in one epoch is compared with its own siblings."""
        rewards = np.asarray(rewards, dtype=np.float64)
        if rewards.ndim != 1 or len(keys) != rewards.shape[0]:
            raise ValueError(f"keys ({len(keys)}) and rewards {rewards.shape} must be [B]")
        if not np.isfinite(rewards).all():
            raise ValueError("rewards must be finite; drop windows without a reward before scoring")
        batch_mean, batch_std = rewards.mean(), rewards.std()
        adv = np.empty_like(rewards)
        own = 0
        by_key: dict[Hashable, list[int]] = {}
        for i, k in enumerate(keys):
            by_key.setdefault(k, []).append(i)
        for k, idx in by_key.items():
            buf = self._buffers.setdefault(k, deque(maxlen=self.buffer_size))
            buf.extend(rewards[idx].tolist())
            if len(buf) >= self.min_count:
                mean, std = float(np.mean(buf)), float(np.std(buf))
                own += len(idx)
            else:
                mean, std = batch_mean, batch_std
            adv[idx] = (rewards[idx] - mean) / (std + EPS)
        clipped = int((np.abs(adv) > self.clip).sum())
        adv = np.clip(adv, -self.clip, self.clip)
        return adv.astype(np.float32), AdvantageStats(len(self._buffers), own, len(keys) - own, clipped)

    # -- checkpoints: keys are (trace, window) tuples; JSON-able as lists -----------------------
    def state_dict(self) -> dict:
        return {"buffer_size": self.buffer_size, "min_count": self.min_count, "clip": self.clip,
                "buffers": [[list(k) if isinstance(k, tuple) else k, list(v)] for k, v in self._buffers.items()]}

    def load_state_dict(self, state: dict) -> None:
        self._buffers = {}
        for k, values in state["buffers"]:
            key = tuple(k) if isinstance(k, list) else k
            self._buffers[key] = deque(values, maxlen=self.buffer_size)
