"""What the agent measures about itself while it runs plans, for /metrics and textfiles.

- Histogram: counts per le-bucket and their sum, as Prometheus histograms are exposed (the
  event-loop lag, agentd/api/looplag.py, is one).
- SegmentErrors: how far the runner's executed time per (stressor, thread) and window is
  from what it set out to run (|ran_ns - planned_ns|: the plan's composition * W, a held compute
  tail as the runner sized it), as a cumulative histogram in seconds. Only backends that
  report ran_ns (the real runner) feed it; the simulated host does not.
- LatestSample: the newest measured window (from a run or the monitor loop) with its
  wall-clock time, so a scrape shows the host measurements without sampling itself.

Plain counters and arrays, no Prometheus types: families.py and textfile.py render them.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

# Upper bounds in seconds: 10 µs (a chunk's deadline check) to 1 s (a whole window missed).
SEGMENT_ERROR_BUCKETS_S = (1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2, 5e-2,
                           0.1, 0.25, 0.5, 1.0)


@dataclass
class Histogram:
    """A Prometheus-style histogram of seconds: counts per le-bucket (not cumulative) and sum."""

    bounds: tuple[float, ...]
    counts: np.ndarray = field(default=None)   # int64 [len(bounds) + 1], the last one +Inf
    sum_s: float = 0.0

    def __post_init__(self):
        if self.counts is None:
            self.counts = np.zeros(len(self.bounds) + 1, np.int64)

    def observe(self, values_s) -> None:
        v = np.asarray(values_s, np.float64).ravel()
        if v.size == 0:
            return
        idx = np.searchsorted(np.asarray(self.bounds), v, side="left")   # le-bucket, as Prometheus
        self.counts += np.bincount(idx, minlength=len(self.counts)).astype(np.int64)
        self.sum_s += float(v.sum())

    @property
    def count(self) -> int:
        return int(self.counts.sum())

    def cumulative(self) -> list[tuple[str, int]]:
        """[(le, cumulative count)] including +Inf, as Prometheus histograms expose them."""
        cum = np.cumsum(self.counts)
        les = [_le(b) for b in self.bounds] + ["+Inf"]
        return [(le, int(c)) for le, c in zip(les, cum)]


@dataclass
class SegmentErrors(Histogram):
    """Cumulative histogram of per-(stressor, thread, window) scheduling error, in seconds."""

    bounds: tuple[float, ...] = SEGMENT_ERROR_BUCKETS_S

    def observe_window(self, composition: np.ndarray, window_s: float, ran_ns: np.ndarray | None,
                       planned_ns: np.ndarray | None = None) -> None:
        """composition float32 [M, K]; ran_ns, planned_ns int64 [M, K] (planned_ns None: the
        composition's). Cells planned or run count once."""
        if ran_ns is None:
            return
        ran = np.asarray(ran_ns, np.float64)
        planned = (np.asarray(composition, np.float64) * window_s * 1e9 if planned_ns is None
                   else np.asarray(planned_ns, np.float64))
        if ran.shape != planned.shape:
            return
        active = (planned > 0) | (ran > 0)
        self.observe(np.abs(ran[active] - planned[active]) / 1e9)


def _le(b: float) -> str:
    return repr(float(b))


@dataclass
class LatestSample:
    """The newest measured values (schema order) and when they were measured (Unix seconds)."""

    values: np.ndarray | None = None
    measured_at: float = 0.0

    def update(self, values: np.ndarray, measured_at: float | None = None) -> None:
        self.values = np.asarray(values, np.float32)
        self.measured_at = time.time() if measured_at is None else measured_at
