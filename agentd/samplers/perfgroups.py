"""Shared machinery of the perf_event samplers (not a sampler itself): counter groups on a set
of CPUs, their raw readings, and the pure derivation of per-second rates from them.

Raw layout (plain data, so recordings replay through the same derive):
    "groups":        ((metric, ...), ...)   metric names of group j's events, in order
    "scale":         ((factor, ...), ...)   per event: count × factor = the metric's unit
    "cpu<c>.g<j>":   (time_enabled, time_running, value, ...)   one group read on CPU c
"""

from __future__ import annotations

import math
from typing import Sequence

from ..perf.events import CounterGroup, EventSpec
from ..perf.readformat import scaled_delta
from .base import Raw, Sampler


class GroupSet:
    """Counter groups opened on CPUs; read() gives the raw mapping above."""

    def __init__(self):
        self.groups: list[tuple[str, ...]] = []
        self.scales: list[tuple[float, ...]] = []
        self.open_groups: list[tuple[str, CounterGroup]] = []

    def add(self, cpus: Sequence[int], events: Sequence[EventSpec], metrics: Sequence[str],
            scales: Sequence[float] | None = None) -> None:
        """Open one group of `events` on each CPU; raises PerfEventError (all opened so far
        stay open until close())."""
        j = len(self.groups)
        self.groups.append(tuple(metrics))
        self.scales.append(tuple(scales) if scales is not None else (1.0,) * len(events))
        for c in cpus:
            self.open_groups.append((f"cpu{c}.g{j}", CounterGroup(events, cpu=c).open()))

    def read(self) -> Raw:
        raw: dict = {"groups": tuple(self.groups), "scale": tuple(self.scales)}
        for key, g in self.open_groups:
            r = g.read()
            raw[key] = (r.time_enabled, r.time_running, *r.values)
        return raw

    def close(self) -> None:
        for _, g in self.open_groups:
            g.close()
        self.open_groups.clear()


def derive_rates(prev: Raw, cur: Raw, elapsed_s: float) -> dict[str, float]:
    """metric -> (Σ over CPUs of the multiplexing-scaled count delta) × scale / elapsed.

    A metric whose group did not run on some CPU this window (time_running did not advance)
    is left out (NaN): a partial sum would be a silent undercount.
    """
    groups, scales = cur.get("groups", ()), cur.get("scale", ())
    sums: dict[str, float] = {}
    seen: set[str] = set()
    for key, c in cur.items():
        if not key.startswith("cpu"):
            continue
        p = prev.get(key)
        if p is None:
            continue
        j = int(key.rsplit(".g", 1)[1])
        metrics, factors = groups[j], scales[j]
        for i, (metric, factor) in enumerate(zip(metrics, factors)):
            d = scaled_delta(p[2 + i], c[2 + i], p[0], c[0], p[1], c[1])
            seen.add(metric)
            sums[metric] = sums.get(metric, 0.0) + d * factor
    return {m: v / elapsed_s for m, v in sums.items() if m in seen and not math.isnan(v)}


class PerfGroupSampler(Sampler):
    """What the perf samplers share once probe() has filled `self._groups` (a GroupSet):
    reading the groups, deriving rates, closing the file descriptors."""

    _groups: GroupSet | None = None

    def read(self) -> Raw:
        return self._groups.read()

    @staticmethod
    def derive(prev: Raw, cur: Raw, elapsed_s: float) -> dict[str, float]:
        return derive_rates(prev, cur, elapsed_s)

    def close(self):
        if self._groups:
            self._groups.close()
