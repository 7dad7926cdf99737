"""The model file: everything needed to generate (no dataset at serving time) and to
resume training, written atomically.

    format="mimesys.model", version, spec (metric schema, catalog names + hash, threads,
    window, training host fingerprint), model_config, train_config (resolved), normalizer,
    action_scale,
    weights (EMA: what generation uses), train_weights, optimizer, step, history,
    rng states, git_revision, dataset {path, sha256, samples, simulated}, created_at
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import subprocess
import tempfile
from pathlib import Path

import torch

from mimesys.errors import ValidationError

from .config import ModelConfig
from .layout import ActionScale, Normalizer
from .policy import DiffusionPolicy, ModelSpec

FORMAT = "mimesys.model"
VERSION = 1
MODEL_FILE = "model.pt"


def model_file(path: Path | str) -> Path:
    """MODEL may be the training output directory or the .pt file itself."""
    path = Path(path)
    return path / MODEL_FILE if path.is_dir() else path


def git_revision() -> str:
    here = Path(__file__).resolve().parent
    try:
        rev = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, timeout=5)
        dirty = subprocess.run(["git", "status", "--porcelain", "--", str(here.parent)], cwd=here,
                               capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    if rev.returncode != 0:
        return "unknown"
    return rev.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def save_torch_atomic(path: Path | str, obj: dict) -> None:
    """torch.save to a temporary name beside `path`, renamed into place: a crash never
    leaves a half-written model or checkpoint under the real name."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        torch.save(obj, tmp)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def load_torch_file(path: Path | str, what: str, error=ValidationError) -> dict:
    """torch.load with weights_only=True: a model file is data (tensors, dicts, numbers,
    strings), and loading one must never run code from it, whoever wrote it."""
    try:
        d = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # torch raises zip/pickle/unpickling errors of several types
        raise error(f"{path}: not a readable {what}: {e}") from e
    if not isinstance(d, dict):
        raise error(f"{path}: not a {what}")
    return d


def save_checkpoint(path: Path | str, payload: dict) -> None:
    save_torch_atomic(path, {"format": FORMAT, "version": VERSION,
                             "created_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                             **payload})


def read_checkpoint(path: Path | str) -> dict:
    path = model_file(path)
    if not path.is_file():
        raise ValidationError(f"{path}: no model file (train one with `mimesys train DATASET --out DIR`)")
    d = load_torch_file(path, "model file")
    if d.get("format") != FORMAT:
        raise ValidationError(f"{path}: not a mimesys model file")
    if d.get("version") != VERSION:
        raise ValidationError(f"{path}: model file version {d.get('version')} not supported (this build: {VERSION})")
    return d


def policy_from_checkpoint(ckpt: dict, *, weights: str = "ema") -> DiffusionPolicy:
    policy = DiffusionPolicy(ModelSpec.from_dict(ckpt["spec"]), ModelConfig.from_dict(ckpt["model_config"]),
                             Normalizer.from_dict(ckpt["normalizer"]), ActionScale.from_dict(ckpt["action_scale"]))
    try:
        policy.load_state_dict(ckpt["weights"] if weights == "ema" else ckpt["train_weights"])
    except RuntimeError as e:
        raise ValidationError(f"model weights do not fit this build's network (git revision of the model: "
                              f"{ckpt.get('git_revision')}): {str(e).splitlines()[-1].strip()}") from e
    return policy.eval()


def load_policy(path: Path | str, *, weights: str = "ema") -> DiffusionPolicy:
    """The trained policy (EMA weights by default; weights="train" for the raw ones)."""
    if weights not in ("ema", "train"):
        raise ValueError(f"weights must be 'ema' or 'train', got {weights!r}")
    return policy_from_checkpoint(read_checkpoint(path), weights=weights)
