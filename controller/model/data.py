"""Training samples from a dataset file (layout: docs/design.md "Formats", written by
controller/dataset.py) as tensors, with the metric selection and a seeded held-out split.

A metric enters the model only if the dataset host measured it (available, and finite in
at least MIN_FINITE_FRACTION of the samples); the others are dropped and listed, so the
model never learns from a column of NaN.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from controller.dataset_h5 import open_dataset, read_checked
from mimesys.errors import ValidationError
from mimesys.h5io import get_json, get_str
from mimesys.metrics import MetricSpec

if TYPE_CHECKING:
    from .policy import TrainBatch

MIN_FINITE_FRACTION = 0.5
REQUIRED = ("prev_action", "action", "prev_obs", "obs")


@dataclass
class SampleArrays:
    """S samples in model metric order: prev_action/action [S, M, K], prev_obs/obs [S, N]."""

    prev_action: np.ndarray
    action: np.ndarray
    prev_obs: np.ndarray
    obs: np.ndarray
    source: np.ndarray | None = None   # uint8 [S]: 0 measured, 1 taught (controller/teach.py); None: all measured

    def __len__(self) -> int:
        return int(self.action.shape[0])

    def subset(self, idx: np.ndarray) -> "SampleArrays":
        return SampleArrays(self.prev_action[idx], self.action[idx], self.prev_obs[idx], self.obs[idx],
                            None if self.source is None else self.source[idx])

    def taught(self) -> np.ndarray:
        """[S] bool: the samples taught by the forward model."""
        return np.zeros(len(self), bool) if self.source is None else self.source == 1

    def batch(self, idx, device="cpu") -> TrainBatch:
        import torch   # here, not at import: the dataset baselines read samples without PyTorch

        from .policy import Context, TrainBatch  # noqa: F811

        f = lambda x: torch.from_numpy(np.ascontiguousarray(x[idx])).to(device)  # noqa: E731
        return TrainBatch(Context(f(self.obs), f(self.prev_obs), f(self.prev_action)), f(self.action))


@dataclass
class TrainingData:
    samples: SampleArrays
    metrics: list[MetricSpec]          # the model's metrics (kept)
    dropped_metrics: dict[str, str]    # name -> why it was left out
    catalog_names: list[str]
    catalog_hash: str
    host_fingerprint: dict
    window_s: float
    simulated: bool
    sha256: str                        # of the dataset file, recorded in checkpoints
    path: str

    @property
    def threads(self) -> int:
        return int(self.samples.action.shape[2])

    def split(self, val_fraction: float, seed: int) -> tuple[SampleArrays, SampleArrays]:
        """Seeded random held-out split (at least one validation sample when S ≥ 2), measured and
        taught samples split apart (each keeps its share in both parts, so the measured held-out
        loss is always there to read)."""
        taught = self.samples.taught()
        train, val = [], []
        for group in (np.flatnonzero(~taught), np.flatnonzero(taught)):
            S = len(group)
            if not S:
                continue
            perm = group[np.random.default_rng(seed).permutation(S)]
            n_val = min(max(int(round(S * val_fraction)), 1 if S >= 2 and val_fraction > 0 else 0), S - 1)
            train.append(perm[n_val:])
            val.append(perm[:n_val])
        return (self.samples.subset(np.sort(np.concatenate(train))),
                self.samples.subset(np.sort(np.concatenate(val))))


def file_sha256(path: Path | str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return "sha256:" + h.hexdigest()


def load_training_data(path: Path | str, metrics: Sequence[str] | None = None) -> TrainingData:
    """The dataset's samples over the metrics a model can learn from. metrics: condition on
    these only (e.g. the metrics the target traces will carry); the others are dropped, and
    say why."""
    path = Path(path)
    where = str(path)
    # Opened through the gate plans and traces use (controller.dataset_h5.open_dataset): a dataset
    # handed over may not read local files through external storage, nor declare what it never wrote.
    with open_dataset(path) as f:
        missing = [k for k in REQUIRED if k not in f]
        if missing:
            raise ValidationError(f"{path}: dataset lacks {missing} (need /{', /'.join(REQUIRED)})")
        arr = {k: read_checked(f, k, where) for k in REQUIRED}
        source = read_checked(f, "source", where) if "source" in f else None
        try:
            specs = [MetricSpec.from_dict(d) for d in get_json(f.attrs, "metrics", [], where=where)]
            catalog_names = get_json(f.attrs, "catalog_names", [], where=where)
            fingerprint = get_json(f.attrs, "host_fingerprint", {}, where=where) or {}
        except (ValueError, KeyError) as e:
            raise ValidationError(f"{path}: malformed JSON attribute: {e}") from e
        catalog_hash = get_str(f.attrs, "catalog_hash", "")
        window_s = float(f.attrs.get("window_s", 1.0))
        simulated = bool(f.attrs.get("simulated", False))
    S = arr["action"].shape[0]
    if S < 2:
        raise ValidationError(f"{path}: {S} samples; training needs at least 2")
    if arr["action"].ndim != 3 or arr["prev_action"].shape != arr["action"].shape:
        raise ValidationError(f"{path}: /action {arr['action'].shape} and /prev_action "
                              f"{arr['prev_action'].shape} must both be [S, M, K]")
    if source is not None and source.shape != (S,):
        raise ValidationError(f"{path}: /source has shape {source.shape}, expected [{S}]")
    N = len(specs)
    for k in ("obs", "prev_obs"):
        if arr[k].shape != (S, N):
            raise ValidationError(f"{path}: /{k} has shape {arr[k].shape}, expected [{S}, {N}] "
                                  f"(S samples × the {N} metrics in attribute 'metrics')")
    if arr["action"].shape[1] != len(catalog_names):
        raise ValidationError(f"{path}: /action has M={arr['action'].shape[1]} stressors but attribute "
                              f"catalog_names lists {len(catalog_names)}")
    for k in ("action", "prev_action"):
        bad = ~np.isfinite(arr[k]) | (arr[k] < -1e-6) | (arr[k] > 1 + 1e-5)
        if bad.any():
            s, m, kk = map(int, np.argwhere(bad)[0])
            raise ValidationError(f"{path}: /{k}[{s}, {m}, {kk}] = {arr[k][s, m, kk]} is not a fraction in [0, 1]")
    wanted = None if metrics is None else list(metrics)
    if wanted is not None:
        unknown = sorted(set(wanted) - {m.name for m in specs})
        if unknown:
            raise ValidationError(f"{path}: no metric {unknown} in the dataset; it has {[m.name for m in specs]}")
    keep, dropped = [], {}
    for i, spec in enumerate(specs):
        finite = float(np.isfinite(arr["obs"][:, i]).mean())
        if wanted is not None and spec.name not in wanted:
            dropped[spec.name] = "not among the metrics asked for"
        elif not spec.available:
            dropped[spec.name] = f"{spec.availability.value}: {spec.reason}".rstrip(": ")
        elif finite < MIN_FINITE_FRACTION:
            dropped[spec.name] = f"measured in only {finite:.0%} of samples"
        else:
            keep.append(i)
    if not keep:
        raise ValidationError(f"{path}: no metric is measured in the dataset; dropped: {dropped}")
    samples = SampleArrays(np.clip(arr["prev_action"], 0, 1), np.clip(arr["action"], 0, 1),
                           arr["prev_obs"][:, keep], arr["obs"][:, keep],
                           source)
    return TrainingData(samples, [specs[i] for i in keep], dropped, list(catalog_names), catalog_hash,
                        fingerprint, window_s, simulated, file_sha256(path), str(path))
