"""Target traces for alignment and the segments rollouts are drawn from.

A target is a real trace mapped onto the model's metric order (a metric the trace lacks
is a NaN column and simply carries no reward). Rollouts run over consecutive windows of
a target — a segment — so each window is generated conditioned on the composition
generated for the window before it, as at deployment.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mimesys.errors import TraceError
from mimesys.trace import Trace


@dataclass(frozen=True)
class TargetTrace:
    name: str                 # file name or label, for messages and reports
    values: np.ndarray        # float32 [T, N] in the model's metric order, raw units, NaN = not in trace
    simulated: bool           # the trace itself came from the simulated host

    @property
    def T(self) -> int:
        return int(self.values.shape[0])


def load_targets(paths: list[Path | str], metric_names: list[str]) -> list[TargetTrace]:
    """Read traces and map them onto the model's metrics; a trace sharing no measured metric
    with the model is an error naming the file and both metric lists."""
    out = []
    for p in paths:
        tr = Trace.read(p)
        out.append(target_from_trace(tr, metric_names, name=Path(p).name))
    return out


def target_from_trace(trace: Trace, metric_names: list[str], *, name: str) -> TargetTrace:
    values = trace.select(list(metric_names))
    if trace.T == 0:
        raise TraceError(f"{name}: trace has no windows")
    if not np.isfinite(values).any():
        raise TraceError(f"{name}: none of the model's metrics is measured in this trace "
                         f"(trace has {', '.join(trace.names) or 'no metrics'}; model uses "
                         f"{', '.join(metric_names)}); import it onto this host's schema first")
    return TargetTrace(name, values.astype(np.float32), bool(trace.simulated))


@dataclass(frozen=True)
class Segment:
    """Windows [start, start + length) of target `trace` are scored; the `context` windows
    before them are generated and executed first (to set the state) but not scored."""

    trace: int
    start: int
    length: int
    context: int

    @property
    def first(self) -> int:
        return self.start - self.context

    @property
    def windows(self) -> range:
        """All generated windows, context included."""
        return range(self.first, self.start + self.length)


def draw_segments(targets: list[TargetTrace], count: int, length: int, context: int,
                  rng: np.random.Generator) -> list[Segment]:
    """`count` segments, traces chosen in proportion to their length, starts uniform. A trace
    shorter than `length` is used whole. Deterministic for a given rng state."""
    if not targets:
        raise ValueError("no target traces")
    lengths = np.array([t.T for t in targets], dtype=np.float64)
    picks = rng.choice(len(targets), size=count, p=lengths / lengths.sum())
    out = []
    for i in picks:
        T = targets[i].T
        n = min(length, T)
        start = int(rng.integers(0, T - n + 1))
        out.append(Segment(int(i), start, n, min(context, start)))
    return out
