"""What every planner shares: the `Generator` protocol and the target helpers.

A planner turns a target trace into a plan, window by window or all at once:
`generate(trace, *, seed, progress=None) -> Plan`, `progress(done, total)` called as windows
are planned (a callback that raises stops the planner). The registry (registry.py) builds
planners from specs and puts each behind the no-invented-activity guard (mimesys/activity.py).
"""

from __future__ import annotations

import math
from typing import Callable, Protocol, runtime_checkable

import numpy as np

from ..errors import TraceError, ValidationError
from ..plan import Plan
from ..trace import Trace


@runtime_checkable
class Generator(Protocol):
    """Anything that turns a target trace into a plan."""

    name: str

    def generate(self, trace: Trace, *, seed: int = 0,
                 progress: Callable[[int, int], None] | None = None) -> Plan: ...


def project_to_valid(a: np.ndarray) -> np.ndarray:
    """[..., M, K] -> float32, entries clipped to [0, 1], each thread's column scaled to sum ≤ 1."""
    a = np.clip(np.nan_to_num(np.asarray(a, np.float32), nan=0.0), 0.0, 1.0)
    s = a.sum(axis=-2, keepdims=True)
    return (a / np.maximum(s, 1.0)).astype(np.float32)


def target_matrix(trace: Trace, metric_names: list[str]) -> tuple[np.ndarray, dict]:
    """Trace values in the model's metric order [T, N] (NaN where missing), and a report:
    which model metrics the trace lacks or has NaN in (windows), which trace metrics are unused."""
    values = trace.select(metric_names)
    have = set(trace.names)
    nan_windows = {n: int(np.isnan(values[:, j]).sum()) for j, n in enumerate(metric_names)}
    return values, {
        "absent_in_trace": [n for n in metric_names if n not in have],
        "nan_windows": {n: c for n, c in nan_windows.items() if c and n in have},
        "ignored_trace_metrics": [n for n in trace.names if n not in set(metric_names)],
    }


def check_target(trace: Trace, window_s: float, whose: str = "the model's") -> None:
    """A target trace a planner can work from: some windows, of the planner's length."""
    if trace.T == 0:
        raise TraceError("trace has no windows")
    if not math.isclose(float(trace.window_s), float(window_s), rel_tol=1e-6):
        raise ValidationError(f"trace windows are {trace.window_s} s but {whose} are {window_s} s; "
                              f"resample the trace first")
