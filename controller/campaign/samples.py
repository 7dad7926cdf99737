"""A campaign's samples from its chain records, and the spread filter.

Pure functions of arrays, so that reading the store and ending a round filter alike: a sample
whose spread over repetitions exceeds `threshold` x the observed range of a key metric is
unstable; the range has a floor per unit, so a metric that barely moved (an idle NIC) cannot
drop everything.
"""

from __future__ import annotations

import numpy as np

from ..dataset import samples_from_chain
from .coverage import UNIT_FLOOR

COLUMNS = ("prev_action", "action", "prev_obs", "obs", "obs_spread")


def chain_samples(records: list[dict], M: int, K: int, N: int, profile_key: str) -> tuple[dict, np.ndarray]:
    """The samples of chain `records`: the dataset's columns and "round" [S]; and which of them
    came from the record `profile_key` (bool [S])."""
    parts, rounds, profiled = [], [], []
    for rec in records:
        R, L = rec["shape"][0], rec["shape"][1]
        comps = np.frombuffer(rec["comps"], "<f4").reshape(L, M, K)
        obs = np.frombuffer(rec["obs"], "<f4").reshape(R, L, N)
        parts.append(samples_from_chain(comps, obs))
        rounds.append(np.full(L - 1, rec["round"], np.int32))
        profiled.append(np.full(L - 1, rec["key"] == profile_key))
    if not parts:
        z = np.zeros((0, M, K), np.float32)
        zn = np.zeros((0, N), np.float32)
        return dict(zip(COLUMNS, (z, z, zn, zn, zn)), round=np.zeros(0, np.int32)), np.zeros(0, bool)
    out = dict(zip(COLUMNS, (np.concatenate(x) for x in zip(*parts))))
    out["round"] = np.concatenate(rounds)
    return out, np.concatenate(profiled)


def spread_filter(samples: dict, ki: list[int], units: list[str], threshold: float, round_done) -> np.ndarray:
    """Which `samples` are stable (bool [S]): each round's against the range its round_done record
    holds (`round_done(r)`), an unfinished round's against the range observed through it."""
    keep = np.ones(len(samples["round"]), bool)
    for r in np.unique(samples["round"]):
        rec = round_done(int(r))
        if rec is not None:
            lo, hi = np.frombuffer(rec["lo"], "<f4"), np.frombuffer(rec["hi"], "<f4")
        else:
            lo, hi = observed_range(samples["obs"][samples["round"] <= r][:, ki])
        sel = samples["round"] == r
        keep[sel] = stable(samples["obs_spread"][sel][:, ki], lo, hi, units, threshold)
    return keep


def observed_range(obs_key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(lo, hi) float32 [N_key] of observations [S, N_key]; zeros where none."""
    with np.errstate(all="ignore"):
        lo = np.nanmin(obs_key, axis=0) if len(obs_key) else np.zeros(obs_key.shape[1])
        hi = np.nanmax(obs_key, axis=0) if len(obs_key) else np.zeros(obs_key.shape[1])
    return np.nan_to_num(lo).astype(np.float32), np.nan_to_num(hi).astype(np.float32)


def stable(spread: np.ndarray, lo: np.ndarray, hi: np.ndarray, units: list[str], threshold: float) -> np.ndarray:
    """bool [S]: no key metric's spread [S, N_key] exceeds `threshold` x its floored range."""
    floor = np.array([UNIT_FLOOR.get(u, 0.0) for u in units])
    rng = np.maximum(hi - lo, floor)
    with np.errstate(invalid="ignore"):
        bad = np.nan_to_num(spread, nan=0.0) > threshold * rng
    return ~bad.any(axis=1)
