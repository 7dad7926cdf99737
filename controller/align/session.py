"""One alignment run from files: model + traces + executor in, aligned model file out.

The aligned model is written in the model room's format (controller/model/checkpoint.py)
with its weights — both the generation ("weights") and the raw ("train_weights") copy —
replaced by the aligned ones and an `alignment` record added, so `mimesys export`,
`mimesys-agent generate` and everything that loads a model work on it unchanged.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from mimesys.catalog import load_catalog
from mimesys.errors import ConfigError
from controller.model.checkpoint import (MODEL_FILE, git_revision, model_file, policy_from_checkpoint,
                                         read_checkpoint, save_checkpoint)

from .config import AlignConfig
from .curves import EpochRecord
from .executors import FleetExecutor, ForwardExecutor, SimExecutor
from .loop import CURVE_NAME, AlignRun, align
from .policy import AlignPolicy
from .reward import RewardFunction
from .targets import load_targets


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def output_model_file(out: Path) -> Path:
    """OUT.pt is the file itself; anything else is a model directory holding model.pt (as train writes)."""
    return out if out.suffix == ".pt" else out / MODEL_FILE


def sim_cpus(fingerprint: dict, threads: int) -> int:
    cpus = fingerprint.get("threads") or fingerprint.get("cores")
    return max(int(cpus), threads) if isinstance(cpus, int) else threads


def build_executor(*, fleet_file: Path | None, sim_agents: int | None, model, cfg: AlignConfig,
                   forward_dir: Path | None = None, allow_plain_http: bool = False):
    if forward_dir is not None:
        ex = ForwardExecutor(forward_dir)
        ex.check_model(model.spec.catalog_hash, model.K)
        return ex
    if fleet_file is not None:
        from controller.fleet import Fleet
        ex = FleetExecutor(Fleet.from_file(fleet_file, allow_plain_http=allow_plain_http), source=Path(fleet_file).name,
                           repetitions=cfg.run_repetitions)
        ex.check_model(model.spec.catalog_hash, model.K)
        return ex
    catalog = load_catalog()
    if catalog.hash != model.spec.catalog_hash:
        raise ConfigError(f"the model was trained for stressor catalog {model.spec.catalog_hash}; this "
                          f"installation's catalog is {catalog.hash}")
    return SimExecutor(sim_agents, catalog, n_cpus=sim_cpus(model.spec.host_fingerprint, model.K),
                       seed=cfg.seed, repetitions=cfg.run_repetitions)


def save_aligned_model(ckpt: dict, policy: AlignPolicy, history: list[EpochRecord], out_file: Path, *,
                       cfg: AlignConfig, base: dict, executor_label: str, simulated: bool,
                       targets: list[str]) -> None:
    payload = {k: v for k, v in ckpt.items() if k not in ("format", "version", "created_at")}
    weights = {k: v.detach().clone() for k, v in policy.model.state_dict().items()}
    payload["weights"] = weights
    payload["train_weights"] = {k: v.clone() for k, v in weights.items()}
    payload["git_revision"] = git_revision()
    payload["alignment"] = {
        "method": "DDPO (execution-driven alignment, MIMESYS §4.3)",
        "base_model": base, "config": cfg.to_dict(), "targets": targets,
        "executor": executor_label, "simulated": simulated,
        "epochs": len(history), "history": [h.to_dict() for h in history],
        "previous": ckpt.get("alignment"),        # a model aligned twice keeps both records
    }
    save_checkpoint(out_file, payload)


def run_alignment(*, model_path: Path, trace_paths: list[Path], out_path: Path, config: AlignConfig,
                  fleet_file: Path | None, sim_agents: int | None, work_dir: Path, restart: bool = False,
                  progress: bool = True, forward_dir: Path | None = None, allow_plain_http: bool = False) -> dict:
    src = model_file(model_path)
    ckpt = read_checkpoint(src)
    model = policy_from_checkpoint(ckpt)          # the EMA weights: what generation uses
    base = {"path": str(src), "sha256": file_sha256(src)}
    targets = load_targets(trace_paths, model.spec.metric_names)
    policy = AlignPolicy.from_config(model, config)
    reference = policy.frozen_copy()
    executor = build_executor(fleet_file=fleet_file, sim_agents=sim_agents, model=model, cfg=config,
                              forward_dir=forward_dir, allow_plain_http=allow_plain_http)
    reward = RewardFunction.build(policy.metric_names, policy.normalize_obs, config.reward_weights)
    out_file = output_model_file(out_path)
    run = AlignRun(policy, reference, targets, executor, reward, config, work_dir, base,
                   title=f"align {src.parent.name if src.name == MODEL_FILE else src.name}")

    def save(pol, history):
        save_aligned_model(ckpt, pol, history, out_file, cfg=config, base=base, executor_label=executor.label,
                           simulated=executor.simulated, targets=[t.name for t in targets])
    try:
        history = align(run, restart=restart, progress=progress, save_model=save)
    finally:
        close = getattr(executor, "close", None)
        if close:
            close()
    (work_dir / "history.json").write_text(json.dumps(
        {"simulated": executor.simulated, "predicted": getattr(executor, "predicted", False),
         "executor": executor.label, "base_model": base,
         "history": [h.to_dict() for h in history]}, indent=1))
    return {"out": str(out_file), "epochs": len(history), "simulated": executor.simulated,
            "predicted": getattr(executor, "predicted", False), "executor": executor.label,
            "reward_first": history[0].reward_mean, "reward_last": history[-1].reward_mean,
            "curve": str(work_dir / CURVE_NAME)}
