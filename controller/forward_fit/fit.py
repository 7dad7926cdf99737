"""Fit a forward model: first order from a solo profile, correction from a campaign dataset.

    model = fit(dataset, profile_trace, out_dir, FitOptions(...))

The dataset's samples are split (seeded) into fitting and held-out parts; the held-out
indices are recorded in the manifest, and `score` (score.py) reports on them when given the
same dataset file. Nothing is written unless the whole fit succeeds (temporary sibling
directory, then rename).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from mimesys.errors import ValidationError
from mimesys.forward.model import MANIFEST, ForwardModel, feature_dim, features, load_forward_model
from mimesys.fsutil import staged_dir
from mimesys.solo_profile import FORMAT as PROFILE_FORMAT
from mimesys.solo_profile import LAYOUTS as PROFILE_LAYOUTS
from mimesys.trace import Trace

from ..dataset import Dataset
from ..model.checkpoint import git_revision
from ..model.data import file_sha256
from .correction import CorrectionConfig, export_ensemble, fit_ensemble
from .profile import busy_host_warnings, fit_first_order, metric_scales

CORRECTION_FILE = "correction.onnx"
SCORE_FLOOR = 0.01   # as controller/forward_fit/score.py


@dataclass(frozen=True)
class FitOptions:
    holdout: float = 0.2               # share of the dataset's samples kept out of the fit
    seed: int = 0
    correction: CorrectionConfig = field(default_factory=CorrectionConfig)
    max_samples: int | None = None     # use only the first N samples (in collection order)
    calibration: str | None = None     # a calibration.json, for a profile recorded without one


def profile_meta(trace: Trace, where: str) -> dict:
    p = trace.provenance or {}
    if p.get("by") != PROFILE_FORMAT:
        raise ValidationError(f"{where}: not a solo profile (provenance.by = {p.get('by')!r}; make one with "
                              f"`mimesys forward profile`)")
    for key in ("catalog_names", "catalog_hash", "thread_cores"):
        if key not in p:
            raise ValidationError(f"{where}: profile provenance lacks {key!r}")
    if p.get("layout") not in PROFILE_LAYOUTS:
        raise ValidationError(f"{where}: a profile of layout {p.get('layout') or 'idle-first (before 0.2)'!r}; this "
                              f"build reads {' or '.join(map(repr, PROFILE_LAYOUTS))}: record a new one "
                              f"(`mimesys forward profile`)")
    return p


def campaign_profile(ds: Dataset | None, where) -> Path:
    """The solo profile recorded by the dataset's campaign (`mimesys collect` runs it first)."""
    camp = (ds.provenance or {}).get("campaign") if ds is not None else None
    if camp and (Path(camp) / "profile.h5").is_file():
        return Path(camp) / "profile.h5"
    raise ValidationError(f"{where}: no solo profile found (its campaign {camp or '(unknown)'} has no profile.h5); "
                          f"pass one with --profile (make it with `mimesys forward profile`)")


def calibration_peaks(path) -> dict:
    if not path:
        return {}
    from mimesys import calibration
    doc = calibration.read(path)
    return dict(doc.get("peaks") or {}) | dict(doc.get("host_peaks") or {})


def calibration_fractions(path) -> dict:
    """Per stressor, the runner-measured CPU share of one thread (`mimesys-agent calibrate`)."""
    if not path:
        return {}
    from mimesys import calibration
    doc = calibration.read(path)
    return {name: ((e or {}).get("one_thread") or {}).get("cpu_fraction")
            for name, e in doc["stressors"].items() if ((e or {}).get("one_thread") or {}).get("cpu_fraction")}


def calibration_dead_times(path) -> dict:
    """Per stressor, the seconds each of its segments moves nothing (`mimesys-agent calibrate`)."""
    if not path:
        return {}
    from mimesys import calibration
    return calibration.segment_dead_s(calibration.read(path))


def profile_footprint(meta: dict) -> list[float] | None:
    """Each stressor's buffers for a profile: this build's catalog's account where the
    profile was measured with this catalog (the account follows the runner; a profile keeps the
    one of the build that recorded it), else the profile's own, else this build's by name."""
    from mimesys.catalog import load_catalog
    try:
        cat = load_catalog()
    except ValidationError:
        return meta.get("catalog_footprint_B")
    mine = catalog_footprint(meta["catalog_names"], len(meta["thread_cores"]), cat)
    return mine if cat.hash == meta.get("catalog_hash") else meta.get("catalog_footprint_B") or mine


def catalog_footprint(names: list[str], threads: int, cat) -> list[float] | None:
    """Memory footprints from this build's catalog `cat` (None where it lacks one of `names`)."""
    from mimesys.solo_profile import memory_footprint
    by_name = {s.name: s.canonical() for s in cat.stressors}
    return memory_footprint([by_name[n] for n in names], threads) if all(n in by_name for n in names) else None


def catalog_classes(names: list[str]) -> list[str] | None:
    """Resource classes from this build's catalog, for a profile that did not record them."""
    from mimesys.catalog import load_catalog
    try:
        cat = load_catalog()
    except ValidationError:
        return None
    by_name = {s.name: s.resource_class for s in cat.stressors}
    return [by_name[n] for n in names] if all(n in by_name for n in names) else None


def holdout_split(S: int, fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    perm = np.random.default_rng(seed).permutation(S)
    n = int(round(S * fraction)) if S >= 10 else 0
    return np.sort(perm[n:]), np.sort(perm[:n])


def fit(dataset_path: Path | str, profile_path: Path | str | None, out_dir: Path | str, options: FitOptions = FitOptions(),
        *, overwrite: bool = False, progress=None) -> ForwardModel:
    out_dir = Path(out_dir)
    if out_dir.exists() and any(out_dir.iterdir()) and not overwrite:
        raise ValidationError(f"{out_dir} exists and is not empty; pass --overwrite to replace it")
    ds = Dataset.read(dataset_path) if dataset_path else None
    if profile_path is None:
        profile_path = campaign_profile(ds, dataset_path)
    profile = Trace.read(profile_path)
    meta = profile_meta(profile, str(profile_path))
    peaks = meta.get("host_peaks") or calibration_peaks(options.calibration)
    first = fit_first_order(profile, meta["catalog_names"], meta["thread_cores"], host_peaks=peaks,
                            classes=meta.get("catalog_classes") or catalog_classes(meta["catalog_names"]),
                            cpu_fraction={**(meta.get("cpu_fraction") or {}), **calibration_fractions(options.calibration)},
                            segment_dead_s={**(meta.get("segment_dead_s") or {}),
                                            **calibration_dead_times(options.calibration)},
                            footprint=profile_footprint(meta))
    scales = metric_scales(first)
    if ds is not None:
        if ds.catalog_hash != meta["catalog_hash"]:
            raise ValidationError(f"{dataset_path}: catalog {ds.catalog_hash} differs from the profile's "
                                  f"{meta['catalog_hash']} ({profile_path}); profile the host with this catalog")
        if ds.action.shape[2] != first.K:
            raise ValidationError(f"{dataset_path}: {ds.action.shape[2]} threads, the profile has {first.K}")
    provenance = {"profile": str(profile_path), "profile_sha256": file_sha256(profile_path),
                  "git_revision": git_revision(), "fit_options": asdict(options),
                  "warnings": busy_host_warnings(first)}
    fm = ForwardModel(first, scales, meta["catalog_hash"], float(profile.window_s), dict(profile.host_fingerprint),
                      provenance, bool(profile.simulated or (ds is not None and ds.simulated)))
    correction = None
    with staged_dir(out_dir) as tmp:
        if ds is not None:
            S = ds.S if options.max_samples is None else min(ds.S, options.max_samples)
            fit_idx, held = holdout_split(S, options.holdout, options.seed)
            obs = _select(ds, first.metric_names)[:S]
            # A metric no stressor drives (a NIC on a loopback-only catalog) has a capacity of
            # noise in the profile; its full scale is at least what the host showed in the campaign.
            seen = np.where(np.isfinite(obs), obs, 0.0).max(axis=0, initial=0.0)
            fm.scales = scales = np.where(first.fraction, 1.0, np.maximum(scales, seen))
            a, a_prev = ds.action[:S].astype(np.float64), ds.prev_action[:S].astype(np.float64)
            feats = features(first, scales, a, a_prev)
            resid = (obs - first.predict(a)) / scales
            # the gate judges by the score's measure (score.py): error relative to the measured value
            denom = np.maximum(np.abs(obs) / scales, SCORE_FLOOR)
            ens, mask = fit_ensemble(feats[fit_idx], resid[fit_idx], options.correction, progress=progress,
                                     denom=denom[fit_idx])
            if first.host_cpu is not None:
                mask[first.host_cpu[0]] = False    # derived from the cores: FirstOrder.derive
            export_ensemble(ens, feature_dim(first.M, first.K, first.N), tmp / CORRECTION_FILE)
            correction = {"file": CORRECTION_FILE, "members": options.correction.members,
                          "metrics": [n for n, k in zip(first.metric_names, mask) if k],
                          "config": asdict(options.correction)}
            provenance.update({"dataset": str(dataset_path), "dataset_sha256": file_sha256(dataset_path),
                               "samples_used": int(S), "fit_samples": int(len(fit_idx)),
                               "heldout_samples": held.tolist()})
            fm.host_fingerprint = fm.host_fingerprint or dict(ds.host_fingerprint)
        (tmp / MANIFEST).write_text(json.dumps(fm.manifest(correction), indent=1) + "\n")
    return load_forward_model(out_dir)


def _select(ds: Dataset, names: list[str]) -> np.ndarray:
    """Dataset observations in the model's metric order [S, N] (NaN where the dataset lacks one)."""
    pos = {n: i for i, n in enumerate(ds.names)}
    out = np.full((ds.S, len(names)), np.nan)
    for j, n in enumerate(names):
        if n in pos:
            out[:, j] = ds.obs[:, pos[n]]
    return out
