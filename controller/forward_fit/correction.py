"""The learned correction of the first-order forward model: an ensemble fitted to the residual
(measured − first order) / scale on campaign samples, exported to ONNX. Members are ridge
regressions on the features (the default: a few hundred samples from a host shared with other
work hold little more than biases and slopes, and a linear member cannot invent structure) or
small MLPs (`kind = "mlp"`, for large campaigns).

Inputs are mimesys.forward.model.features(a_t, a_{t−1}) — the same function agents use.
Each member sees a bootstrap resample of the training samples; the ensemble mean is the
correction and the members' spread its per-metric uncertainty (Lakshminarayanan et al.
2017, without the per-member variance head). A metric is corrected only when, on
held-out folds of the fitting samples, first order + correction has a lower median absolute error than
first order alone (k-fold over the fitting samples): with a hundred samples the correction
must earn its place metric by metric.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn

OPSET = 17
SD_FLOOR = 0.05
RESID_CLIP = 1.0    # residuals are in full-scale units
GATE_MARGIN = 0.95  # a metric is corrected when that cuts its cross-validated median error by ≥ 5 %


@dataclass(frozen=True)
class CorrectionConfig:
    kind: str = "ridge"        # ridge: linear in the features, closed form; mlp: two hidden layers
    ridge: float = 100.0       # ridge: L2 penalty (features are standardized)
    members: int = 5
    hidden: int = 64
    steps: int = 1500
    lr: float = 3e-3
    weight_decay: float = 1e-3
    val_fraction: float = 0.2   # below 10 samples no check is possible: every metric is corrected
    folds: int = 3
    seed: int = 0


class _Member(nn.Module):
    def __init__(self, F: int, N: int, hidden: int):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(F, hidden), nn.SiLU(), nn.Linear(hidden, hidden), nn.SiLU(),
                                 nn.Linear(hidden, N))

    def forward(self, x):
        return self.net(x)


class Ensemble(nn.Module):
    """features [B, F] -> (mean [B, N], std [B, N]) over the members."""

    def __init__(self, members: list[nn.Module], mu: torch.Tensor, sd: torch.Tensor):
        super().__init__()
        self.members = nn.ModuleList(members)
        self.register_buffer("mu", mu)
        self.register_buffer("sd", sd)

    def forward(self, features):
        x = (features - self.mu) / self.sd
        out = torch.stack([m(x) for m in self.members])               # [E, B, N]
        return out.mean(0), out.std(0, unbiased=False)


def _ridge_member(x, y, m, F, N, cfg: CorrectionConfig, seed: int) -> nn.Module:
    """Closed-form ridge regression per metric (samples a metric did not measure left out)."""
    X = torch.cat([x, torch.ones(len(x), 1)], 1).double()
    W = torch.zeros(F + 1, N, dtype=torch.float64)
    reg = cfg.ridge * torch.eye(F + 1, dtype=torch.float64)
    reg[-1, -1] = 0.0                                             # the intercept is not shrunk
    for j in range(N):
        keep = m[:, j] > 0
        if keep.sum() < 2:
            continue
        Xj = X[keep]
        W[:, j] = torch.linalg.solve(Xj.T @ Xj + reg, Xj.T @ y[keep, j].double())
    lin = nn.Linear(F, N)
    with torch.no_grad():
        lin.weight.copy_(W[:-1].T.float())
        lin.bias.copy_(W[-1].float())
    return lin.eval()


def _train_member(x, y, m, F, N, cfg: CorrectionConfig, seed: int) -> nn.Module:
    if cfg.kind == "ridge":
        return _ridge_member(x, y, m, F, N, cfg, seed)
    torch.manual_seed(seed)
    net = _Member(F, N, cfg.hidden)
    opt = torch.optim.AdamW(net.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, cfg.steps)
    for _ in range(cfg.steps):
        opt.zero_grad()
        err = (net(x) - y) * m
        loss = (err ** 2).sum() / m.sum().clamp_min(1.0)
        loss.backward()
        opt.step()
        sched.step()
    return net.eval()


def fit_ensemble(feats: np.ndarray, resid: np.ndarray, cfg: CorrectionConfig, progress=None,
                 denom: np.ndarray | None = None) -> tuple[Ensemble, np.ndarray]:
    """feats [S, F], resid [S, N] (NaN = not measured) -> (ensemble, corrected metric mask [N]).
    The mask comes from k-fold predictions, errors divided by `denom` [S, N] (the score's
    relative error when given); the returned ensemble is refitted on every sample."""
    S, F = feats.shape
    N = resid.shape[1]
    rng = np.random.default_rng(cfg.seed)
    torch.set_num_threads(1)
    perm = rng.permutation(S)
    n_val = max(int(round(S * cfg.val_fraction)), 1) if S >= 10 else 0

    def build(idx: np.ndarray, tag: int) -> Ensemble:
        x = torch.from_numpy(feats[idx].astype(np.float32))
        mu = x.mean(0)
        # Features are in scaled units (~[0, 1]); a floor keeps a feature that is nearly constant in
        # the fitting samples (a stressor rarely used) from being blown up where it is not.
        sd = x.std(0).clamp_min(SD_FLOOR)
        xn = (x - mu) / sd
        members = []
        for e in range(cfg.members):
            boot = rng.integers(0, len(idx), len(idx))
            r = np.clip(resid[idx][boot], -RESID_CLIP, RESID_CLIP)   # a glitch window does not steer the fit
            m = torch.from_numpy(np.isfinite(r).astype(np.float32))
            y = torch.from_numpy(np.nan_to_num(r, nan=0.0).astype(np.float32))
            members.append(_train_member(xn[boot], y, m, F, N, cfg, cfg.seed * 1000 + tag * 100 + e))
            if progress:
                progress()
        return Ensemble(members, mu, sd).eval()

    mask = np.ones(N, bool)
    if n_val:
        # k-fold: every fitting sample is predicted once by members that did not see it
        pred = np.zeros_like(resid, dtype=np.float64)
        folds = np.array_split(perm, cfg.folds)
        for i, val in enumerate(folds):
            ens = build(np.setdiff1d(perm, val), 10 + i)
            with torch.no_grad():
                pred[val] = ens(torch.from_numpy(feats[val].astype(np.float32)))[0].numpy()
        d = np.ones_like(resid) if denom is None else denom
        before = np.nanmedian(np.abs(resid) / d, axis=0)
        after = np.nanmedian(np.abs(resid - pred) / d, axis=0)
        with np.errstate(invalid="ignore"):
            mask = np.nan_to_num(after, nan=np.inf) < GATE_MARGIN * np.nan_to_num(before, nan=-np.inf)
    return build(np.arange(S), 1), mask


def export_ensemble(ens: Ensemble, F: int, path: Path) -> None:
    x = torch.zeros(2, F)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(ens, (x,), str(path), dynamo=False, opset_version=OPSET, input_names=["features"],
                          output_names=["mean", "std"],
                          dynamic_axes={"features": {0: "B"}, "mean": {0: "B"}, "std": {0: "B"}})
