"""Rollouts: generate plans for target segments window by window, execute them, score them.

All rollouts of an epoch advance together: at generation step i the policy samples one
composition for window i of every rollout in a single batch, each conditioned on its own
target window and on the composition it generated for window i − 1 (state-aware, as at
deployment). Each rollout then becomes one plan, and the executor runs the plans
concurrently, one per agent at a time. A window's reward compares what its agent measured
with the target window.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from mimesys.plan import Plan
from controller.model.policy import Context

from .executors import Executor
from .policy import AlignPolicy, Trajectories, cat_contexts
from .reward import RewardFunction
from .targets import Segment, TargetTrace


@dataclass
class RolloutBatch:
    """The scored windows of one epoch, flattened over rollouts × windows (B rows)."""

    cond: Context
    paths: Trajectories
    rewards: np.ndarray                 # float64 [B], finite
    keys: list[tuple[int, int]]         # (target trace index, window index) of each row
    advantages: torch.Tensor | None = None   # float32 [B], set by the loop

    def __len__(self) -> int:
        return len(self.keys)

    def index(self, idx) -> "RolloutBatch":
        idx_list = idx.tolist() if isinstance(idx, (np.ndarray, torch.Tensor)) else list(idx)
        return RolloutBatch(self.cond.index(idx), self.paths.index(idx), self.rewards[idx_list],
                            [self.keys[i] for i in idx_list],
                            None if self.advantages is None else self.advantages[idx])


@dataclass(frozen=True)
class RolloutReport:
    rollouts: int
    windows_scored: int
    windows_unscored: int     # no metric measured in both the executed and the target window
    simulated: bool           # executed by simulated agents
    agents: tuple[str, ...]   # who executed each rollout, in order


def _conditions(targets: list[TargetTrace], segs: list[Segment], window_offset: int,
                prev_action: np.ndarray) -> Context:
    target = np.stack([targets[s.trace].values[s.first + window_offset] for s in segs])
    prev = np.stack([targets[s.trace].values[s.first + window_offset - 1] if s.first + window_offset > 0
                     else np.full(targets[s.trace].values.shape[1], np.nan, np.float32) for s in segs])
    return Context(torch.from_numpy(target), torch.from_numpy(prev), torch.from_numpy(prev_action))


@torch.no_grad()
def generate_segments(policy: AlignPolicy, targets: list[TargetTrace], segs: list[Segment],
                      generator: torch.Generator) -> tuple[list[Context], list[Trajectories]]:
    """Sequential, batched generation. Returns, per generation step i, the conditions and the
    sampled paths of the rollouts that have a window i (segments may differ in length)."""
    M, K = len(policy.catalog_names), policy.threads
    n = max(len(s.windows) for s in segs)
    prev = np.zeros((len(segs), M, K), np.float32)       # idle before the first generated window
    conds, paths = [], []
    for i in range(n):
        active = [r for r, s in enumerate(segs) if i < len(s.windows)]
        cond = _conditions(targets, [segs[r] for r in active], i, prev[active])
        out = policy.sample(cond, generator)
        prev[active] = out.actions
        conds.append(cond)
        paths.append(out)
    return conds, paths


def collect_rollouts(policy: AlignPolicy, targets: list[TargetTrace], segs: list[Segment],
                     executor: Executor, reward_fn: RewardFunction, generator: torch.Generator,
                     *, seed: int, provenance: dict | None = None) -> tuple[RolloutBatch, RolloutReport]:
    """SAMPLING for one epoch: generate every segment's plan, execute them all, score the
    non-context windows. Windows without a reward are dropped (and counted)."""
    conds, paths = generate_segments(policy, targets, segs, generator)

    # one plan per rollout: [context + length, M, K]
    plans = []
    for r, s in enumerate(segs):
        comps = np.stack([paths[i].actions[_row(segs, i, r)] for i in range(len(s.windows))])
        plans.append(Plan(np.clip(comps, 0.0, 1.0).astype(np.float32), list(policy.catalog_names),
                          policy.catalog_hash, window_s=policy.window_s, seed=seed + r,
                          provenance={"kind": "align-rollout", "target": targets[s.trace].name,
                                      "windows": [s.first, s.start + s.length], **(provenance or {})}))
    results = executor.execute(plans, list(policy.metric_names))

    rows_cond, rows_path, rewards, keys = [], [], [], []
    unscored = 0
    for r, (s, res) in enumerate(zip(segs, results)):
        if res.values.shape[0] != len(s.windows):
            raise RuntimeError(f"agent {res.agent} returned {res.values.shape[0]} windows for a "
                               f"{len(s.windows)}-window rollout plan")
        for i in range(s.context, len(s.windows)):
            w = s.first + i
            rew = float(reward_fn(res.values[i], targets[s.trace].values[w]))
            if not np.isfinite(rew):
                unscored += 1
                continue
            row = _row(segs, i, r)
            rows_cond.append(conds[i].index([row]))
            rows_path.append(paths[i].index([row]))
            rewards.append(rew)
            keys.append((s.trace, w))
    if not keys:
        raise RuntimeError("no executed window could be scored: the agents measure none of the "
                           "target traces' metrics")
    batch = RolloutBatch(cat_contexts(rows_cond), Trajectories.cat(rows_path),
                         np.asarray(rewards, np.float64), keys)
    report = RolloutReport(len(segs), len(keys), unscored, bool(executor.simulated),
                           tuple(res.agent for res in results))
    return batch, report


def _row(segs: list[Segment], i: int, r: int) -> int:
    """Row of rollout r in generation step i's batch (only rollouts with a window i are in it)."""
    return sum(1 for q in range(r) if i < len(segs[q].windows))
