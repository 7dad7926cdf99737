"""Walking a trace's windows, each composition conditioned on the one generated before it:
in order, one window at a time, or by stretches advanced side by side through the fused graph."""

from __future__ import annotations

from typing import Callable

import numpy as np

from ..base import project_to_valid

# in_stretches: a stretch's own windows, and the windows it replays first (a taught model's
# state carries a change 15-20 windows on)
STRETCH_WINDOWS = 64
WARMUP_WINDOWS = 24

SampleWindow = Callable[..., np.ndarray]   # (target, prev_obs, prev_action, rng, nudge=) -> [M, K]


def in_order(sample_window: SampleWindow, values: np.ndarray, shape: tuple[int, int], rng: np.random.Generator,
             progress=None, nudge: Callable[[np.ndarray, int], np.ndarray] | None = None) -> np.ndarray:
    """values [T, N] -> compositions [T, M, K], one window after the other.

    (Solving the chain for all windows at once, as a fixed point over time, was tried: a
    taught model's state carries a change 15-20 windows on, so the sweeps cost more than
    the batching saves: 400 windows/s against 1,430 one window at a time.)"""
    T = values.shape[0]
    comps = np.zeros((T, *shape), np.float32)
    prev_a = np.zeros(shape, np.float32)
    prev_o = np.full(values.shape[1], np.nan, np.float32)
    for t in range(T):
        step = None if nudge is None else (lambda a, t=t: nudge(a, t))
        comps[t] = prev_a = sample_window(values[t], prev_o, prev_a, rng, nudge=step)
        prev_o = values[t]
        if progress is not None:
            progress(t + 1, T)
    return comps


def in_stretches(run_fused: Callable[[dict], np.ndarray], values: np.ndarray, shape: tuple[int, int],
                 rng: np.random.Generator, progress=None) -> np.ndarray:
    """values [T, N] -> compositions [T, M, K], the trace cut into stretches of
    STRETCH_WINDOWS advanced side by side, one batched call of the fused graph per window.

    A window's composition depends on the one generated before it, so each stretch first
    replays the WARMUP_WINDOWS before its own from idle (their outputs discarded): the
    chain forgets where it started within them, and each stretch then runs on the state
    the chain in order would have. Window t draws the same x_T whichever stretch generates
    it (η = 0: nothing else is drawn), and a trace of one stretch is generated exactly as in
    order."""
    (T, N), (M, K) = values.shape, shape
    x_T = rng.standard_normal((T, M, K), dtype=np.float32)
    firsts = np.arange(0, T, STRETCH_WINDOWS)                      # each stretch's first own window
    begins = np.maximum(firsts - WARMUP_WINDOWS, 0)                # where it starts (warm-up included)
    ends = np.minimum(firsts + STRETCH_WINDOWS, T)
    comps = np.zeros((T, M, K), np.float32)
    state = np.zeros((len(firsts), M, K), np.float32)              # each stretch's previous composition
    obs = np.vstack([np.full((1, N), np.nan, np.float32), values.astype(np.float32)])   # obs[t] = window t − 1
    done = 0
    for j in range(int((ends - begins).max())):
        rows = np.flatnonzero(begins + j < ends)
        t = begins[rows] + j
        feed = {"target_obs": values[t].astype(np.float32), "prev_obs": obs[t], "prev_action": state[rows],
                "x_T": x_T[t]}
        a = project_to_valid(run_fused(feed))
        state[rows] = a
        own = t >= firsts[rows]
        comps[t[own]] = a[own]
        done += int(own.sum())
        if progress is not None:
            progress(done, T)
    return comps
