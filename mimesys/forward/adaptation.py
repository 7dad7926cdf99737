"""The adaptation of a forward model to another host: a small linear map on top of the base
model's prediction, fitted on a few samples of the new host (controller/forward_fit/adapt.py).

For metric n, in scaled units (value / full scale), with b_n the base model's prediction
(first order + its correction) and φ(a) = [each stressor's total over threads (M), each
thread's busy share (K)] of the window's composition:

    adapted_n = min(b_n + θ_b[n]·b_n + θ_1[n] + θ_φ[n]·φ(a), cap[n])

θ = 0 and cap = ∞ is the base model unchanged; the fit shrinks θ toward 0 and chooses, per
metric, by k-fold on the new host's samples, between the base, an affine recalibration
(θ_b, θ_1), the affine map plus the composition terms, and a lower ceiling (a host whose
device is throttled does what the base host did, up to its own limit). NumPy only: agents apply it without PyTorch.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import ValidationError


def adaptation_features(a: np.ndarray) -> np.ndarray:
    """a [B, M, K] -> φ [B, M + K]."""
    return np.concatenate([a.sum(axis=2), a.sum(axis=1)], axis=1)


@dataclass
class Adaptation:
    theta_b: np.ndarray       # [N]
    theta_1: np.ndarray       # [N]
    theta_phi: np.ndarray     # [N, M + K]
    info: dict                # what was chosen per metric and on how many samples
    cap: np.ndarray | None = None   # [N] scaled ceiling (inf = none)

    def delta(self, base_scaled: np.ndarray, a: np.ndarray) -> np.ndarray:
        """base prediction [B, N] (scaled), a [B, M, K] -> the change [B, N] (scaled)."""
        lin = base_scaled * self.theta_b + self.theta_1 + adaptation_features(a) @ self.theta_phi.T
        if self.cap is None:
            return lin
        return np.minimum(base_scaled + lin, self.cap) - base_scaled

    def to_dict(self) -> dict:
        cap = None if self.cap is None else [None if not np.isfinite(c) else float(c) for c in self.cap]
        return {"theta_b": self.theta_b.tolist(), "theta_1": self.theta_1.tolist(),
                "theta_phi": self.theta_phi.tolist(), "cap": cap, "info": self.info}

    @classmethod
    def from_dict(cls, d: dict, N: int, P: int, where: str) -> "Adaptation":
        try:
            tb, t1, tp = (np.asarray(d[k], np.float64) for k in ("theta_b", "theta_1", "theta_phi"))
        except (KeyError, TypeError, ValueError) as e:
            raise ValidationError(f"{where}: adaptation is malformed ({e})") from None
        if tb.shape != (N,) or t1.shape != (N,) or tp.shape != (N, P):
            raise ValidationError(f"{where}: adaptation shapes {tb.shape}, {t1.shape}, {tp.shape}; expected ({N},), "
                                  f"({N},), ({N}, {P})")
        if not (np.isfinite(tb).all() and np.isfinite(t1).all() and np.isfinite(tp).all()):
            raise ValidationError(f"{where}: adaptation has non-finite coefficients")
        cap = None
        if d.get("cap") is not None:
            try:
                cap = np.array([np.inf if c is None else float(c) for c in d["cap"]], np.float64)
            except (TypeError, ValueError) as e:
                raise ValidationError(f"{where}: adaptation cap is malformed ({e})") from None
            if cap.shape != (N,) or np.isnan(cap).any():
                raise ValidationError(f"{where}: adaptation cap must be {N} numbers or nulls")
        return cls(tb, t1, tp, dict(d.get("info") or {}), cap)
