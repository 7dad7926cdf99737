"""Who executes rollout plans: real agents through the fleet client, or simulated agents.

Both give, per plan, the measured metrics of every plan window in the model's metric
order (mean over the run's repetitions). Simulated executions are marked `simulated`
and every report built on them says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from agentd.backend import ExecutedWindow
from agentd.plan import Plan


@dataclass
class Execution:
    """One executed rollout plan."""

    values: np.ndarray    # float32 [T, N] measured metrics per plan window, model metric order, NaN = unmeasured
    agent: str            # which agent ran it (URL, or "sim:<i>")
    simulated: bool


class Executor(Protocol):
    simulated: bool
    label: str            # for progress and reports, e.g. "2 agents (fleet.toml)" or "4 simulated agents"

    def execute(self, plans: list[Plan], metric_names: list[str]) -> list[Execution]:
        """Run every plan (concurrently across agents, one at a time per agent); results in plan order."""


def windows_to_values(windows: list[ExecutedWindow], schema: list[str], metric_names: list[str],
                      T: int) -> np.ndarray:
    """Measured windows -> float32 [T, len(metric_names)]: mean over repetitions per plan window,
    columns mapped from the agent's schema by name (a metric the agent lacks is NaN)."""
    col = {n: i for i, n in enumerate(schema)}
    idx = np.array([col.get(n, -1) for n in metric_names])
    acc = np.zeros((T, len(metric_names)), np.float64)
    cnt = np.zeros((T, len(metric_names)), np.int64)
    for w in windows:
        if not 0 <= w.window < T:
            raise ValueError(f"executed window index {w.window} outside the {T}-window plan")
        v = np.asarray(w.values, np.float64)
        row = np.where(idx >= 0, v[np.maximum(idx, 0)], np.nan)
        ok = np.isfinite(row)
        acc[w.window, ok] += row[ok]
        cnt[w.window, ok] += 1
    with np.errstate(invalid="ignore"):
        return np.where(cnt > 0, acc / np.maximum(cnt, 1), np.nan).astype(np.float32)
