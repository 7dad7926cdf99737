"""`replay --fold-threads`: run a plan with more threads than this host has CPUs by folding
thread k onto CPU slot k mod n. A slot's fractions are the sum of its threads'; where that
sum exceeds the window, the slot's column is scaled down to fill it exactly (the proportions
between stressors kept), and how much work that dropped is reported — never hidden."""

from __future__ import annotations

import dataclasses

import numpy as np

from mimesys.errors import ValidationError
from mimesys.plan import Plan


def fold_threads(plan: Plan, slots: int) -> tuple[Plan, dict]:
    """(plan with min(K, slots) threads, report {from_threads, to_threads, dropped_fraction,
    windows_scaled})."""
    if slots < 1:
        raise ValidationError(f"cannot fold a plan onto {slots} CPUs")
    a = np.asarray(plan.compositions, np.float64)       # [T, M, K]
    T, M, K = a.shape
    if K <= slots:
        return plan, {"from_threads": K, "to_threads": K, "dropped_fraction": 0.0, "windows_scaled": 0}
    folded = np.zeros((T, M, slots), np.float64)
    for k in range(K):
        folded[:, :, k % slots] += a[:, :, k]
    busy = folded.sum(axis=1, keepdims=True)             # [T, 1, slots]
    scale = np.where(busy > 1.0, 1.0 / np.maximum(busy, 1e-12), 1.0)
    out = folded * scale
    planned = a.sum()
    dropped = float((planned - out.sum()) / planned) if planned > 0 else 0.0
    report = {"from_threads": K, "to_threads": slots, "dropped_fraction": round(dropped, 6),
              "windows_scaled": int((scale < 1.0).any(axis=(1, 2)).sum())}
    prov = {**plan.provenance, "folded_threads": report}
    # float32 rounding can leave a column a hair above 1: the plan validator would refuse it.
    out32 = out.astype(np.float32)
    col = out32.sum(axis=1, keepdims=True)
    out32 = np.where(col > 1.0, out32 / col * np.float32(1 - 1e-6), out32).astype(np.float32)
    # a core busy target names one thread's core: folded threads share cores, nothing to hold
    if plan.core_busy_target is not None:
        report["core_busy_target"] = "dropped (folded threads share cores)"
    return dataclasses.replace(plan, compositions=out32, provenance=prov, core_busy_target=None), report
