"""What the simulated host's samplers report of a window's true values.

Apart from the model (model.py), which computes what the host does; this is how it is seen:
multiplicative log-normal noise per metric, a small additive floor on fractions (which stay
in [0, 1], the rest >= 0), and NaN where a host without a PMU has no counter.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..metrics import MetricSpec


@dataclass(frozen=True)
class Sensors:
    fraction: np.ndarray      # bool [N]: the metric is a fraction of the window
    available: np.ndarray     # bool [N]: the host measures it
    noise: float              # sigma of the multiplicative log-normal noise
    pmu: bool

    @classmethod
    def for_schema(cls, schema: list[MetricSpec], noise: float, pmu: bool) -> "Sensors":
        return cls(np.array([m.unit == "fraction" for m in schema]), np.array([m.available for m in schema]),
                   noise, pmu)

    @property
    def N(self) -> int:
        return len(self.fraction)

    def read(self, v: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """The window's true values [N] as a host's samplers would report them."""
        if self.noise > 0:
            v = v * np.exp(rng.normal(0.0, self.noise, v.shape))
            frac = self.fraction
            v = v + frac * rng.normal(0.0, 0.1 * self.noise, v.shape)
            v = np.where(frac, np.clip(v, 0.0, 1.0), np.maximum(v, 0.0))
        if not self.pmu:
            v[~self.available] = np.nan
        return v
