"""Before/after comparison on held-out traces: generate each trace's plan the way a deployed
model does (sequentially, each window conditioned on the previous generated composition,
with the model's own sampler settings), execute it, and score it with the evaluation room's
normalized DTW (controller/evaluate/dtw.py) against the target.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from mimesys.plan import Plan
from mimesys.trace import Trace
from controller.evaluate.dtw import compare
from controller.model.policy import Context, DiffusionPolicy

from .executors import Executor


@torch.no_grad()
def generate_compositions(model: DiffusionPolicy, targets: list[np.ndarray], seed: int) -> list[np.ndarray]:
    """targets: [T_i, N] raw metrics in model order -> compositions [T_i, M, K] per target,
    all targets advancing together in one batch per window."""
    g = torch.Generator().manual_seed(seed)
    n = max(len(t) for t in targets)
    M, K, N = model.M, model.K, len(model.spec.metric_names)
    prev = np.zeros((len(targets), M, K), np.float32)
    out = [np.zeros((len(t), M, K), np.float32) for t in targets]
    for i in range(n):
        active = [r for r, t in enumerate(targets) if i < len(t)]
        tgt = np.stack([targets[r][i] for r in active])
        prev_obs = np.stack([targets[r][i - 1] if i > 0 else np.full(N, np.nan, np.float32) for r in active])
        ctx = model.context_from_numpy(tgt, prev_obs, prev[active])
        a = model.sample(ctx, generator=g).actions.cpu().numpy().astype(np.float32)
        prev[active] = a
        for j, r in enumerate(active):
            out[r][i] = a[j]
    return out


@dataclass(frozen=True)
class HeldOutScore:
    trace: str
    seed: int
    dtw: dict            # metric -> normalized DTW in [0, 1] (NaN metrics left out)

    @property
    def mean(self) -> float:
        return float(np.mean(list(self.dtw.values()))) if self.dtw else float("nan")


def score_heldout(model: DiffusionPolicy, traces: dict[str, Trace], executor: Executor, *, metrics: list[str],
                  seeds: list[int], peaks: dict | None = None) -> list[HeldOutScore]:
    """Generate, execute and DTW-score every (trace, seed). Only metrics measured in both the
    target and the executed trace count."""
    names = model.spec.metric_names
    order = list(traces)
    targets = [traces[n].select(names) for n in order]
    schema = {m.name: m for m in model.spec.metrics}
    scores = []
    for seed in seeds:
        comps = generate_compositions(model, targets, seed)
        plans = [Plan(c, list(model.spec.catalog_names), model.spec.catalog_hash, window_s=model.spec.window_s,
                      seed=seed, provenance={"kind": "align-heldout", "target": n}) for n, c in zip(order, comps)]
        results = executor.execute(plans, names)
        for n, res in zip(order, results):
            executed = Trace(res.values, [schema[x] for x in names], window_s=model.spec.window_s,
                             simulated=res.simulated)
            wanted = [m for m in metrics if m in traces[n].names and m in names]
            got = compare(traces[n], executed, wanted, peaks=peaks)
            scores.append(HeldOutScore(n, seed, {m: r.distance for m, r in got.items() if np.isfinite(r.distance)}))
    return scores


def mean_dtw(scores: list[HeldOutScore]) -> float:
    return float(np.mean([s.mean for s in scores]))
