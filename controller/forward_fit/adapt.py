"""Carry a forward model to another host with a few of its samples (`mimesys forward adapt`).

    fm_b, report = adapt(base_dir, dataset_b, out_dir, AdaptOptions(samples=50))

The base model (fitted on host A) is kept whole — first order, correction — and a linear map
on its prediction is fitted on host B's samples (mimesys/forward/adaptation.py). Per metric,
k-fold cross-validation over B's fitting samples chooses among:

- "base": θ = 0, the base model unchanged;
- "affine": b + θ_b·b + θ_1 (a recalibration: B does less or more of what A did);
- "affine+mix": the affine map plus a term per stressor total and thread busy share;
- "cap": min(b, c), c the 100th / 95th / 90th percentile of what B measured (a throttled
  device: B does what A did up to its own, lower, ceiling; no affine map reproduces that);

each a ridge regression of B's residual against the base, shrunk toward θ = 0 with a penalty
from `LAMBDAS`, least squares plain or relative (residuals divided by the measured value);
"affine+mix" only with at least four times as many samples as it has terms. The chosen
candidate has the lowest cross-validated median relative error (the measure of
controller/forward_fit/score.py, so the choice optimizes what the score reports), pooled over
k-fold repeated with 3 permutations (one split of a dozen samples is a coin toss). Anything
but the base must beat the base's own cross-validated error by 5 % plus 1/√n (the best of 20
candidates on n samples looks better than it is; the extra margin pays for that), so with
too few samples to tell, the base is kept.

`fit_scratch` is the comparison the transfer bench needs: the same ridge selection, from the
same samples, with no base model (per metric, an intercept and the composition's terms).

With B's calibration (`calibration=`, `--calibration`), the base's first order is first carried
to B by the ratio of B's calibrated figures to A's (rehost.py: B's rates, CPU shares and
ceilings, which every host measures before its first plan and which no sample of B pays for);
A's correction and the map above then work on top of it.

A dataset stays bound to its host: B's samples are read from B's dataset, and the adapted
model records both the base model's provenance and B's fingerprint.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from mimesys.errors import ValidationError
from mimesys.forward.adaptation import Adaptation, adaptation_features
from mimesys.forward.model import MANIFEST, ForwardModel, load_forward_model, read_manifest
from mimesys.fsutil import staged_dir

from ..dataset import Dataset
from ..model.checkpoint import git_revision
from ..model.data import file_sha256
from .fit import _select, holdout_split
from .rehost import rehost
from .score import FLOOR, relative_error

LAMBDAS = (0.01, 0.1, 1.0, 10.0, 100.0)   # ridge penalty per sample (standardized terms)
REPEATS = 3                                # k-fold repeated over this many permutations
CAP_QUANTILES = (100.0, 95.0, 90.0)         # candidate ceilings: percentiles of B's measured values
MARGIN = 0.95                              # a non-base candidate must cut the CV error by ≥ 5 % + 1/√n


@dataclass(frozen=True)
class AdaptOptions:
    samples: int | None = None   # use this many of B's fitting samples (seeded random subset); None = all
    holdout: float = 0.2         # share of B's dataset kept out (scored by `forward score`)
    folds: int = 5
    seed: int = 0
    calibration: str | None = None       # B's calibration.json: the base's first order rehosted first (rehost.py)
    base_calibration: str | None = None  # A's; default: the one the base model was fitted with


def _ridge(Z: np.ndarray, r: np.ndarray, w: np.ndarray, lam: float, free: np.ndarray) -> np.ndarray:
    """argmin Σ w (r − Zθ)² + lam·n·Σ_{not free} θ²  (Z's columns standardized by the caller)."""
    n = len(r)
    reg = lam * n * np.diag((~free).astype(np.float64))
    A = Z.T @ (Z * w[:, None]) + reg + 1e-9 * np.eye(Z.shape[1])
    return np.linalg.solve(A, Z.T @ (w * r))


def _standardize(Z: np.ndarray, intercept: int) -> tuple[np.ndarray, np.ndarray]:
    """(mu, sd) per column: every column but the intercept and constant ones is centered and scaled."""
    sd = Z.std(axis=0)
    keep = (sd > 1e-9) & (np.arange(Z.shape[1]) != intercept)
    return np.where(keep, Z.mean(axis=0), 0.0), np.where(keep, sd, 1.0)


def _fit(Z, r, w, lam, free, intercept):
    """Ridge in standardized columns, returned as coefficients of the raw columns."""
    mu, sd = _standardize(Z, intercept)
    th_s = _ridge((Z - mu) / sd, r, w, lam, free)
    th = th_s / sd
    th[intercept] -= float(np.sum(mu * th))   # the centering moves into the intercept (a column of ones)
    return th


def select(blocks: dict[str, np.ndarray], r: np.ndarray, d: np.ndarray, *, has_base: bool, free: dict[str, np.ndarray],
           intercept: int, folds: int, rng: np.random.Generator) -> tuple[str, float, str, np.ndarray, dict]:
    """One metric. blocks: family -> design Z [n, P] with a column of ones at `intercept`; r [n]
    the regression's target (residual vs the base, or the value itself); d [n] the relative
    error's denominator; has_base: θ = 0 (predict r = 0) is a candidate, and the others must
    beat it by MARGIN. -> (family, lambda, weighting, θ [P] of the raw columns, cv errors)."""
    n = len(r)
    k = max(2, min(folds, n))
    # repeated k-fold (REPEATS permutations): one split of a dozen samples is a coin toss
    splits = [np.array_split(rng.permutation(n), k) for _ in range(REPEATS)]
    cv: dict = {}
    base_key = ("base", 0.0, "-")
    if has_base:
        cv[base_key] = float(np.median(np.abs(r) / d))
    for family, Z in blocks.items():
        for lam in LAMBDAS:
            for weight in ("plain", "relative"):
                w = np.ones(n) if weight == "plain" else 1.0 / d ** 2
                errs = []
                for parts in splits:
                    pred = np.zeros(n)
                    for val in parts:
                        tr = np.setdiff1d(np.arange(n), val)
                        pred[val] = Z[val] @ _fit(Z[tr], r[tr], w[tr], lam, free[family], intercept)
                    errs.append(np.abs(r - pred) / d)
                cv[(family, lam, weight)] = float(np.median(np.concatenate(errs)))
    best = min(cv, key=cv.get)
    if has_base and best != base_key and not cv[best] < (MARGIN - 1.0 / np.sqrt(n)) * cv[base_key]:
        best = base_key
    family, lam, weight = best
    table = {f"{key[0]}/{key[1]}/{key[2]}": v for key, v in cv.items()}
    if family == "base":
        return family, lam, weight, np.zeros(0), table
    w = np.ones(n) if weight == "plain" else 1.0 / d ** 2
    return family, lam, weight, _fit(blocks[family], r, w, lam, free[family], intercept), table


def _base_scaled(fm: ForwardModel, a: np.ndarray, prev: np.ndarray) -> np.ndarray:
    """The base model's prediction before clipping, in scaled units (what Adaptation.delta sees)."""
    saved, fm.adaptation = fm.adaptation, None
    try:
        mean = fm.correction(a, prev)[0] if fm.has_correction else 0.0
        return (fm.first.predict(a) + mean) / fm.scales
    finally:
        fm.adaptation = saved


def fit_adaptation(fm: ForwardModel, a: np.ndarray, prev: np.ndarray, obs: np.ndarray, *, folds: int = 5,
                   seed: int = 0) -> Adaptation:
    """B's samples (a, prev [n, M, K], obs [n, N] in metric units, NaN = not measured) -> the
    adaptation of `fm` (see the module docstring)."""
    if fm.adaptation is not None:
        raise ValidationError("the base model is itself adapted; adapt the model it was adapted from")
    N = fm.first.N
    P = fm.first.M + fm.first.K
    b = _base_scaled(fm, a, prev)
    y = obs / fm.scales
    phi = adaptation_features(a)
    tb, t1, tp, cap = np.zeros(N), np.zeros(N), np.zeros((N, P)), np.full(N, np.inf)
    rng = np.random.default_rng(seed)
    chosen = {}
    for j, name in enumerate(fm.metric_names):
        ok = np.isfinite(y[:, j])
        if ok.sum() < 4:
            chosen[name] = {"family": "base", "reason": f"{int(ok.sum())} measured samples"}
            continue
        r = (y[ok, j] - b[ok, j])
        d = np.maximum(np.abs(y[ok, j]), FLOOR)
        one = np.ones((ok.sum(), 1))
        blocks = {"affine": np.hstack([b[ok, j:j + 1], one])}
        if ok.sum() >= 4 * (2 + P):
            blocks["affine+mix"] = np.hstack([b[ok, j:j + 1], one, phi[ok]])
        # every term is shrunk, the offset too: toward θ = 0, the base model
        free = {"affine": np.zeros(2, bool), "affine+mix": np.zeros(2 + P, bool)}
        family, lam, weight, theta, cv = select(blocks, r, d, has_base=True, free=free, intercept=1, folds=folds,
                                                rng=rng)
        cap_q, cap_err = _cap_cv(b[ok, j], y[ok, j], d, folds, rng)
        base_err = cv["base/0.0/-"]
        best_err = cv.get(f"{family}/{lam}/{weight}", base_err)
        if cap_err < min(best_err, (MARGIN - 1.0 / np.sqrt(len(r))) * base_err):
            family = "cap"
            cap[j] = float(np.percentile(y[ok, j], cap_q))
        elif family != "base":
            tb[j], t1[j] = theta[0], theta[1]
            if family == "affine+mix":
                tp[j] = theta[2:]
        chosen[name] = {"family": family, "lambda": lam if family not in ("base", "cap") else None,
                        "weighting": weight if family not in ("base", "cap") else None,
                        "cap_percentile": cap_q if family == "cap" else None,
                        "cv_error": min(min(cv.values()), cap_err), "cv_error_base": base_err, "cv_error_cap": cap_err}
    return Adaptation(tb, t1, tp, {"samples": int(len(a)), "folds": folds, "seed": seed, "chosen": chosen},
                      cap if np.isfinite(cap).any() else None)


def _cap_cv(b: np.ndarray, y: np.ndarray, d: np.ndarray, folds: int, rng: np.random.Generator) -> tuple[float, float]:
    """The best ceiling candidate by the same repeated k-fold: (percentile, cv median relative error)."""
    n = len(y)
    k = max(2, min(folds, n))
    splits = [np.array_split(rng.permutation(n), k) for _ in range(REPEATS)]
    best = (CAP_QUANTILES[0], np.inf)
    for q in CAP_QUANTILES:
        errs = []
        for parts in splits:
            pred = np.zeros(n)
            for val in parts:
                tr = np.setdiff1d(np.arange(n), val)
                pred[val] = np.minimum(b[val], np.percentile(y[tr], q))
            errs.append(np.abs(y - pred) / d)
        e = float(np.median(np.concatenate(errs)))
        if e < best[1]:
            best = (q, e)
    return best


class ScratchModel:
    """From scratch on B's samples alone (no base): per metric a ridge regression of the value on
    an intercept, every (stressor, thread) share, stressor totals, thread busy shares and the
    previous window's stressor totals, chosen by the same k-fold selection."""

    def __init__(self, names, units, scales, coef, info):
        self.metric_names, self.units, self.scales, self.coef, self.info = names, units, scales, coef, info

    @staticmethod
    def design(a: np.ndarray, prev: np.ndarray) -> np.ndarray:
        B = a.shape[0]
        return np.concatenate([np.ones((B, 1)), a.reshape(B, -1), a.sum(axis=2), a.sum(axis=1), prev.sum(axis=2)], axis=1)

    def predict(self, a, prev=None):
        a = np.asarray(a, np.float64)
        prev = np.zeros_like(a) if prev is None else np.asarray(prev, np.float64)
        x = (self.design(a, prev) @ self.coef.T) * self.scales
        hi = np.where(np.array(self.units) == "fraction", 1.0, np.inf)
        return np.clip(x, 0.0, hi), np.zeros_like(x)

    def predict_plan(self, compositions, *, first_order_only: bool = False):
        a = np.asarray(compositions, np.float64)
        prev = np.concatenate([np.zeros_like(a[:1]), a[:-1]])
        return self.predict(a, prev)


def fit_scratch(names, units, scales, a, prev, obs, *, folds: int = 5, seed: int = 0) -> ScratchModel:
    Z = ScratchModel.design(a, prev)
    y = obs / scales
    coef = np.zeros((len(names), Z.shape[1]))
    rng = np.random.default_rng(seed)
    free = {"mix": np.array([True] + [False] * (Z.shape[1] - 1))}
    info = {}
    for j, name in enumerate(names):
        ok = np.isfinite(y[:, j])
        if ok.sum() < 4:
            coef[j, 0] = float(np.nanmean(y[:, j])) if ok.any() else 0.0
            continue
        d = np.maximum(np.abs(y[ok, j]), FLOOR)
        family, lam, weight, theta, cv = select({"mix": Z[ok]}, y[ok, j], d, has_base=False, free=free, intercept=0,
                                                folds=folds, rng=rng)
        coef[j] = theta
        info[name] = {"lambda": lam, "weighting": weight, "cv_error": min(cv.values())}
    return ScratchModel(list(names), list(units), np.asarray(scales, np.float64), coef, info)


def adapt(base_dir: Path | str, dataset_path: Path | str, out_dir: Path | str, options: AdaptOptions = AdaptOptions(),
          *, overwrite: bool = False) -> ForwardModel:
    """Write base_dir's model adapted to dataset_path's host into out_dir (atomically)."""
    base_dir, out_dir = Path(base_dir), Path(out_dir)
    if out_dir.exists() and any(out_dir.iterdir()) and not overwrite:
        raise ValidationError(f"{out_dir} exists and is not empty; pass --overwrite to replace it")
    fm = load_forward_model(base_dir)
    base_manifest = read_manifest(base_dir)
    ds = Dataset.read(dataset_path)
    if ds.catalog_hash != fm.catalog_hash:
        raise ValidationError(f"{dataset_path}: catalog {ds.catalog_hash} differs from the base model's {fm.catalog_hash}")
    if ds.action.shape[2] != fm.threads:
        raise ValidationError(f"{dataset_path}: {ds.action.shape[2]} threads, the base model has {fm.threads}")
    if abs(float(ds.window_s) - fm.window_s) > 1e-9:
        raise ValidationError(f"{dataset_path}: windows of {ds.window_s} s, the base model's are {fm.window_s} s")
    rehosted = None
    if options.calibration is not None:
        cal_a = options.base_calibration or \
            ((base_manifest.get("provenance") or {}).get("fit_options") or {}).get("calibration")
        if not cal_a or not Path(cal_a).is_file():
            raise ValidationError(f"{base_dir}: the calibration the base model was fitted with "
                                  f"({cal_a or 'none recorded'}) is not here; pass host A's with --base-calibration")
        rehosted = rehost_base(fm, cal_a, options.calibration)
    fit_idx, held = holdout_split(ds.S, options.holdout, options.seed)
    if options.samples is not None:
        if options.samples > len(fit_idx):
            raise ValidationError(f"{dataset_path}: {options.samples} samples asked for, {len(fit_idx)} outside the "
                                  f"held-out share")
        fit_idx = np.sort(np.random.default_rng(options.seed + 1).choice(fit_idx, options.samples, replace=False))
    if len(fit_idx) < 4:
        raise ValidationError(f"{dataset_path}: {len(fit_idx)} fitting samples; adapting needs at least 4")
    obs = _select(ds, fm.metric_names)[fit_idx]
    a, prev = ds.action[fit_idx].astype(np.float64), ds.prev_action[fit_idx].astype(np.float64)
    fm.adaptation = fit_adaptation(fm, a, prev, obs, folds=options.folds, seed=options.seed)
    fm.host_fingerprint = dict(ds.host_fingerprint)
    fm.simulated = bool(fm.simulated or ds.simulated)
    fm.provenance = {"adapted_from": {"dir": str(base_dir), "provenance": fm.provenance,
                                      "host_fingerprint": base_manifest.get("host_fingerprint")},
                     "dataset": str(dataset_path), "dataset_sha256": file_sha256(dataset_path),
                     "fit_samples": int(len(fit_idx)), "fit_sample_indices": fit_idx.tolist(),
                     "heldout_samples": held.tolist(), "adapt_options": asdict(options), "git_revision": git_revision(),
                     **({"rehosted": rehosted} if rehosted is not None else {})}
    with staged_dir(out_dir) as tmp:
        corr = base_manifest.get("correction")
        if corr:
            shutil.copy(base_dir / corr["file"], tmp / corr["file"])
        (tmp / MANIFEST).write_text(json.dumps(fm.manifest(corr), indent=1) + "\n")
    return load_forward_model(out_dir)


def rehost_base(fm: ForwardModel, base_calibration: Path | str, calibration: Path | str) -> dict:
    """fm's first order carried to B by A's and B's calibrations (rehost.py), in place -> report."""
    from mimesys import calibration as cal
    doc_a, doc_b = cal.read(base_calibration), cal.read(calibration)
    for doc, path in ((doc_a, base_calibration), (doc_b, calibration)):
        if doc.get("catalog_hash") and doc["catalog_hash"] != fm.catalog_hash:
            raise ValidationError(f"{path}: calibration of catalog {doc['catalog_hash']}, the base model's is "
                                  f"{fm.catalog_hash}")
    fm.first, report = rehost(fm.first, doc_a, doc_b, fm.window_s)
    return {"base_calibration": str(base_calibration), "calibration": str(calibration), **report}


def heldout_error(model, a, prev, obs, scales) -> dict:
    """score.py's measure for any model with predict(a, prev): per metric the median relative
    error over the samples, and their median over metrics."""
    pred = model.predict(a, prev)[0]
    e = relative_error(pred, obs, scales)
    per = {}
    for j in range(obs.shape[1]):
        ok = np.isfinite(obs[:, j])
        if ok.any():
            per[j] = float(np.median(e[ok, j]))
    return {"per_metric": per, "median": float(np.median(list(per.values()))) if per else float("nan")}
