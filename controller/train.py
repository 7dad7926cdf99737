"""Training the diffusion policy: `mimesys train DATASET --out MODEL`.

Reads top to bottom as SETUP, TRAINING (with periodic VALIDATION on held-out samples and
CHECKPOINTS), FINISH. Runs on CPU or one GPU (bf16 autocast), or several processes under
torchrun (DistributedDataParallel; gloo on CPU, nccl on GPU): each rank draws its share of
every global batch, gradients are averaged, rank 0 validates and writes.

Every batch and noise draw is a pure function of (seed, rank, step), so a resumed run
continues with exactly the batches an uninterrupted one would have seen. The model file
(controller/model/checkpoint.py) is written atomically at each checkpoint; it holds the
resolved config, the git revision, the metric schema, the catalog hash and the dataset's
hash, and `--resume` refuses a different dataset or config.
"""

from __future__ import annotations

import copy
import json
import math
import os
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist

from mimesys.errors import ConfigError, ValidationError
from mimesys.exitstatus import Diverged

from .model.checkpoint import MODEL_FILE, git_revision, read_checkpoint, save_checkpoint
from .model.config import ModelConfig, _known
from .model.data import SampleArrays, TrainingData, load_training_data
from .model.layout import ActionScale, MetricLayout, Normalizer
from .model.policy import DiffusionPolicy, ModelSpec


@dataclass(frozen=True)
class TrainConfig:
    steps: int = 4000               # optimizer steps (global batches)
    batch_size: int = 256           # global batch, split over ranks
    lr: float = 1e-3
    weight_decay: float = 1e-4
    warmup_steps: int = 200         # linear warm-up, then cosine decay to lr/20
    ema_decay: float = 0.999        # with warm-up: min(decay, (1 + step) / (10 + step))
    val_fraction: float = 0.1       # held-out samples for validation
    eval_every: int = 250
    checkpoint_every: int = 500
    seed: int = 0
    device: str | None = None       # None: cuda if available, else cpu
    amp: bool | None = None         # bf16 autocast; None: on for cuda. True on cpu is an error
    cpu_threads: int | None = None  # torch intra-op threads on CPU; None: torch's default
    metrics: tuple[str, ...] | None = None  # condition on these dataset metrics only; None: all usable
    taught_share: float | None = None  # share of each batch from taught samples (controller/teach.py); None: as drawn

    def __post_init__(self):
        if self.metrics is not None:   # a list read back from a checkpoint compares equal as a tuple
            object.__setattr__(self, "metrics", tuple(self.metrics))
        for ok, what in [(self.steps >= 1, "steps >= 1"), (self.batch_size >= 1, "batch_size >= 1"),
                         (self.metrics is None or len(self.metrics) > 0, "metrics: None or at least one"),
                         (self.lr > 0, "lr > 0"), (0 <= self.ema_decay < 1, "0 <= ema_decay < 1"),
                         (self.taught_share is None or 0 <= self.taught_share <= 1, "0 <= taught_share <= 1"),
                         (0 <= self.val_fraction < 1, "0 <= val_fraction < 1"),
                         (self.eval_every >= 1 and self.checkpoint_every >= 1, "eval_every, checkpoint_every >= 1")]:
            if not ok:
                raise ConfigError(f"train config: need {what}")

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "TrainConfig":
        return cls(**_known(cls, d, "train config"))


@dataclass
class TrainResult:
    model_path: Path
    steps: int
    final_train_loss: float
    final_val_loss: float | None
    parameters: int
    seconds: float


@dataclass(frozen=True)
class _Dist:
    rank: int = 0
    world: int = 1
    local_rank: int = 0

    @property
    def main(self) -> bool:
        return self.rank == 0


def _init_distributed(device_hint: str | None) -> _Dist:
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return _Dist()
    use_cuda = torch.cuda.is_available() and device_hint != "cpu"
    if not dist.is_initialized():
        dist.init_process_group("nccl" if use_cuda else "gloo")
    local = int(os.environ.get("LOCAL_RANK", "0"))
    if use_cuda:
        torch.cuda.set_device(local)
    return _Dist(dist.get_rank(), dist.get_world_size(), local)


def _device(cfg: TrainConfig, d: _Dist) -> torch.device:
    if cfg.device:
        if cfg.device.startswith("cuda") and not torch.cuda.is_available():
            raise ConfigError(f"device {cfg.device!r} requested but CUDA is not available")
        return torch.device(cfg.device if d.world == 1 or not cfg.device.startswith("cuda") else f"cuda:{d.local_rank}")
    return torch.device(f"cuda:{d.local_rank}" if torch.cuda.is_available() else "cpu")


def _lr_factor(cfg: TrainConfig):
    def f(step: int) -> float:
        if step < cfg.warmup_steps:
            return (step + 1) / cfg.warmup_steps
        p = (step - cfg.warmup_steps) / max(cfg.steps - cfg.warmup_steps, 1)
        return 0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * min(p, 1.0)))
    return f


def _batch_indices(n: int, per_rank: int, seed: int, rank: int, step: int,
                   taught: np.ndarray | None = None, taught_share: float | None = None) -> np.ndarray:
    """A batch's sample indices, a pure function of (seed, rank, step); with `taught_share`, that
    share of the batch is drawn from the taught samples (`taught` [n] bool) and the rest from
    the measured ones."""
    rng = np.random.default_rng([seed, rank, step])
    if taught_share is None or taught is None or taught.all() or not taught.any():
        return rng.integers(0, n, per_rank)
    n_t = int(round(per_rank * taught_share))
    t_idx, m_idx = np.flatnonzero(taught), np.flatnonzero(~taught)
    return np.concatenate([t_idx[rng.integers(0, len(t_idx), n_t)], m_idx[rng.integers(0, len(m_idx), per_rank - n_t)]])


@torch.no_grad()
def _ema_update(ema: DiffusionPolicy, model: DiffusionPolicy, step: int, decay: float) -> None:
    d = min(decay, (1 + step) / (10 + step))
    for pe, pm in zip(ema.parameters(), model.parameters()):
        pe.lerp_(pm.detach(), 1 - d)


@torch.no_grad()
def validation_loss(policy: DiffusionPolicy, val: SampleArrays, device, seed: int, chunk: int = 1024) -> float:
    """Mean ε-loss over the held-out samples with fixed noise/timesteps (comparable across evaluations)."""
    g = torch.Generator(device=device).manual_seed(seed + 7919)
    total, n = 0.0, 0
    for start in range(0, len(val), chunk):
        idx = np.arange(start, min(start + chunk, len(val)))
        total += float(policy.compute_loss(val.batch(idx, device), generator=g)) * len(idx)
        n += len(idx)
    return total / max(n, 1)


def build_policy(data: TrainingData, model_cfg: ModelConfig, train_part: SampleArrays) -> DiffusionPolicy:
    spec = ModelSpec(tuple(data.metrics), tuple(data.catalog_names), data.catalog_hash, data.threads,
                     data.window_s, data.host_fingerprint)
    layout = MetricLayout.build(spec.metric_names, spec.threads)
    normalizer = Normalizer.fit(np.concatenate([train_part.obs, train_part.prev_obs]), list(data.metrics), layout)
    return DiffusionPolicy(spec, model_cfg, normalizer, ActionScale.fit(train_part.action, model_cfg.action_log_floor))


@dataclass
class _Run:
    """One training run, as its phases share it: the data and its parts, the model, its EMA and
    optimizer, the history so far and what every checkpoint records."""
    cfg: TrainConfig
    dctx: _Dist
    device: torch.device
    amp: bool
    path: Path                      # out_dir/model.pt
    data: TrainingData
    train_part: SampleArrays
    val_part: SampleArrays          # the held-out measured samples ("val")
    val_taught: SampleArrays        # the held-out taught ones, scored apart
    taught_train: np.ndarray        # [S] bool over train_part
    policy: DiffusionPolicy
    ema: DiffusionPolicy
    model: torch.nn.Module          # the policy, or its DistributedDataParallel wrapper
    opt: torch.optim.Optimizer
    sched: torch.optim.lr_scheduler.LambdaLR
    start: int
    history: dict
    base: dict = field(default_factory=dict)    # what every checkpoint records besides the weights

    def checkpoint(self, step: int) -> None:
        if self.dctx.main:
            save_checkpoint(self.path, {**self.base, "weights": self.ema.state_dict(),
                                        "train_weights": self.policy.state_dict(),
                                        "optimizer": self.opt.state_dict(), "lr_schedule": self.sched.state_dict(),
                                        "step": step, "history": self.history,
                                        "parameters": self.policy.parameter_count()})


def train(dataset: Path | str, out_dir: Path | str, train_cfg: TrainConfig = TrainConfig(),
          model_cfg: ModelConfig = ModelConfig(), *, resume: bool = False, overwrite: bool = False,
          progress: bool = True, stop_at: int | None = None) -> TrainResult:
    """Train and write out_dir/model.pt. stop_at: end this run after that many steps (a
    checkpoint `--resume` continues from, e.g. for a time-boxed job)."""
    t_start = time.monotonic()
    # ---- SETUP ------------------------------------------------------------------
    dctx = _init_distributed(train_cfg.device)
    device = _device(train_cfg, dctx)
    if train_cfg.amp and device.type != "cuda":
        raise ConfigError("amp=True needs a CUDA device (mixed precision is bf16 autocast on GPU)")
    amp = device.type == "cuda" if train_cfg.amp is None else train_cfg.amp
    if train_cfg.cpu_threads:
        torch.set_num_threads(train_cfg.cpu_threads)
    path = _model_path(out_dir, resume, overwrite)
    run = _set_up(dataset, path, train_cfg, model_cfg, dctx, device, amp, resume)
    # ---- TRAINING ---------------------------------------------------------------
    bar, live = _open_progress(run, progress)
    end = train_cfg.steps if stop_at is None else min(stop_at, train_cfg.steps)
    loss_val = _training_loop(run, end, bar, live)
    # ---- FINISH -----------------------------------------------------------------
    _close_progress(bar, live)
    run.checkpoint(end)
    if dctx.main:
        _refresh_curve(run.history, path.parent, run.data)
    if dctx.world > 1:
        dist.barrier()
    val = run.history["val"][-1][1] if run.history["val"] else None
    return TrainResult(path, end, loss_val, val, run.policy.parameter_count(), time.monotonic() - t_start)


def _model_path(out_dir: Path | str, resume: bool, overwrite: bool) -> Path:
    """out_dir/model.pt, refused where out_dir is a file or the model exists and neither
    resume nor overwrite says what to do with it."""
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise ConfigError(f"--out {out_dir} is a file; it must be a directory (model.pt is written inside)")
    path = out_dir / MODEL_FILE
    if path.exists() and not (resume or overwrite):
        raise ConfigError(f"{path} exists; pass --resume to continue it or --overwrite to start over")
    return path


def _set_up(dataset: Path | str, path: Path, train_cfg: TrainConfig, model_cfg: ModelConfig, dctx: _Dist,
            device: torch.device, amp: bool, resume: bool) -> _Run:
    """The data split, the policy and its EMA, the optimizer and schedule: new, or where the
    checkpoint at path left them (resume)."""
    data = load_training_data(dataset, train_cfg.metrics)
    train_part, val_part = data.split(train_cfg.val_fraction, train_cfg.seed)
    state = read_checkpoint(path) if resume and path.exists() else None
    if state is not None:
        _check_resumable(state, data, train_cfg, model_cfg, path)
    torch.manual_seed(train_cfg.seed)
    policy = build_policy(data, model_cfg, train_part).to(device)
    if state is not None:
        policy.load_state_dict(state["train_weights"])
    ema = copy.deepcopy(policy).requires_grad_(False)
    if state is not None:
        ema.load_state_dict(state["weights"])
    assert len(train_part) >= 1 and policy.M == data.samples.action.shape[1] and policy.K == data.threads
    model = torch.nn.parallel.DistributedDataParallel(policy) if dctx.world > 1 else policy
    opt = torch.optim.AdamW(policy.parameters(), lr=train_cfg.lr, weight_decay=train_cfg.weight_decay)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, _lr_factor(train_cfg))
    start, history = 0, {"train": [], "val": [], "val_taught": []}
    taught_train = train_part.taught()
    # the held-out loss of the measured samples is "val" (what a model is judged by); the taught
    # samples' apart, so a teacher the model imitates well cannot hide how it does on measurements
    val_taught = val_part.subset(np.flatnonzero(val_part.taught()))
    val_part = val_part.subset(np.flatnonzero(~val_part.taught())) if val_part.taught().any() else val_part
    if state is not None:
        opt.load_state_dict(state["optimizer"])
        sched.load_state_dict(state["lr_schedule"])
        start, history = int(state["step"]), {"val_taught": [], **state["history"]}
    run = _Run(train_cfg, dctx, device, amp, path, data, train_part, val_part, val_taught, taught_train,
               policy, ema, model, opt, sched, start, history)
    run.base = {"spec": policy.spec.to_dict(), "model_config": model_cfg.to_dict(), "train_config": train_cfg.to_dict(),
                "normalizer": policy.normalizer.to_dict(), "action_scale": policy.action_scale.to_dict(),
                "layout": policy.layout.to_dict(), "git_revision": git_revision(),
                "dataset": {"path": data.path, "sha256": data.sha256, "samples": len(data.samples),
                            "train_samples": len(train_part), "val_samples": len(val_part),
                            "taught_train_samples": int(taught_train.sum()), "taught_val_samples": len(val_taught),
                            "simulated": data.simulated, "dropped_metrics": data.dropped_metrics},
                "world_size": dctx.world, "device": str(device), "amp": bool(amp)}
    return run


def _open_progress(run: _Run, progress: bool):
    """(the progress bar or None, the live metrics or None): rank 0 only. Metrics as training
    goes (one JSON line per step, the PNG refreshed at each validation), so a long run can be
    watched and a killed one still shows its curve."""
    bar = live = None
    if progress and run.dctx.main:
        from tqdm import tqdm
        bar = tqdm(total=run.cfg.steps, initial=run.start, desc="train", unit="step", dynamic_ncols=True)
    if run.dctx.main:
        run.path.parent.mkdir(parents=True, exist_ok=True)
        live = LiveMetrics(run.path.parent, append=bool(run.start))
    return bar, live


def _close_progress(bar, live) -> None:
    if bar is not None:
        bar.close()
    if live is not None:
        live.close()


def _training_loop(run: _Run, end: int, bar, live) -> float:
    """Steps run.start..end (a checkpoint every checkpoint_every, validation every eval_every on
    rank 0) -> the last step's loss; Diverged where the loss is not finite."""
    cfg, dctx, device = run.cfg, run.dctx, run.device
    per_rank = max(cfg.batch_size // dctx.world, 1)
    gen = torch.Generator(device=device)
    run.policy.train()
    loss_val = float("nan")
    for step in range(run.start, end):
        idx = _batch_indices(len(run.train_part), per_rank, cfg.seed, dctx.rank, step, run.taught_train,
                             cfg.taught_share)
        gen.manual_seed(cfg.seed * 1_000_003 + dctx.rank * 10_007 + step)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=run.amp):
            loss = run.model(run.train_part.batch(idx, device), gen)
        run.opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(run.policy.parameters(), 1.0)
        run.opt.step()
        run.sched.step()
        _ema_update(run.ema, run.policy, step, cfg.ema_decay)
        loss_val = float(loss.detach())
        if not math.isfinite(loss_val):
            _close_progress(bar, live)
            raise Diverged(f"training diverged at step {step}: loss {loss_val}; try a lower --lr or a larger "
                           f"--batch-size (the last checkpoint in {run.path.parent} is kept, history in "
                           f"{run.path.parent / 'metrics.jsonl'})")
        done = step + 1
        if dctx.main:
            run.history["train"].append([done, loss_val])
            live.write({"step": done, "train_loss": loss_val, "lr": run.sched.get_last_lr()[0],
                        "time": round(time.time(), 3)})
            if bar is not None:
                bar.update(1)
                bar.set_postfix(loss=f"{loss_val:.4f}")
            if len(run.val_part) and (done % cfg.eval_every == 0 or done == cfg.steps):
                _validate(run, done, live, bar, loss_val)
        if done % cfg.checkpoint_every == 0 and done < cfg.steps:
            run.checkpoint(done)
    return loss_val


def _validate(run: _Run, done: int, live: LiveMetrics, bar, loss_val: float) -> None:
    """VALIDATION (rank 0, EMA weights, held-out samples): the losses into the history and the
    live metrics, the curve redrawn."""
    history, ema = run.history, run.ema
    ema.eval()
    history["val"].append([done, validation_loss(ema, run.val_part, run.device, run.cfg.seed)])
    live.write({"step": done, "val_loss": history["val"][-1][1], "time": round(time.time(), 3)})
    if len(run.val_taught):
        history["val_taught"].append([done, validation_loss(ema, run.val_taught, run.device, run.cfg.seed)])
        live.write({"step": done, "val_loss_taught": history["val_taught"][-1][1],
                    "time": round(time.time(), 3)})
    live.flush()
    _refresh_curve(history, run.path.parent, run.data)
    if bar is not None:
        bar.set_postfix(loss=f"{loss_val:.4f}", val=f"{history['val'][-1][1]:.4f}")


class LiveMetrics:
    """The training metrics as they come: one JSON line per record in metrics.jsonl, and the
    same scalars for TensorBoard (outdir/tensorboard/) when torch.utils.tensorboard imports
    (the optional `tensorboard` package; without it the JSON lines are the record)."""

    def __init__(self, outdir: Path, append: bool):
        self.file = (outdir / "metrics.jsonl").open("a" if append else "w")
        self.board = tensorboard_writer(outdir / "tensorboard")

    def write(self, record: dict) -> None:
        self.file.write(json.dumps(record) + "\n")
        if self.board is not None:
            for key, value in record.items():
                if key not in ("step", "time"):
                    self.board.add_scalar(key, value, record["step"], walltime=record.get("time"))

    def flush(self) -> None:
        self.file.flush()
        if self.board is not None:
            self.board.flush()

    def close(self) -> None:
        self.file.close()
        if self.board is not None:
            self.board.close()


def tensorboard_writer(logdir: Path):
    """A TensorBoard SummaryWriter on logdir, or None where the tensorboard package is absent."""
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        return None
    return SummaryWriter(log_dir=str(logdir))


def _refresh_curve(history: dict, outdir: Path, data) -> None:
    """loss_curve.png and history.json as of now (written whole then renamed: a reader never
    sees half a file)."""
    from mimesys.fsutil import atomic_write_text, atomic_write_with
    atomic_write_text(outdir / "history.json", json.dumps(history))
    title = f"{Path(data.path).name}{' (simulated host)' if data.simulated else ''}"
    atomic_write_with(outdir / "loss_curve.png", lambda tmp: plot_loss_curve(history, tmp, title=title))


def _check_resumable(state: dict, data: TrainingData, train_cfg: TrainConfig, model_cfg: ModelConfig, path) -> None:
    if state["dataset"]["sha256"] != data.sha256:
        raise ConfigError(f"{path} was trained on a different dataset ({state['dataset']['path']}, "
                          f"{state['dataset']['sha256'][:19]}); use --overwrite to start over")
    if state["model_config"] != model_cfg.to_dict():
        diff = sorted(k for k in model_cfg.to_dict() if state["model_config"].get(k) != model_cfg.to_dict()[k])
        raise ConfigError(f"{path}: model config differs from the checkpoint's in {diff}")
    free = ("steps", "device", "amp", "cpu_threads")
    old = {k: v for k, v in state["train_config"].items() if k not in free}
    new = {k: v for k, v in train_cfg.to_dict().items() if k not in free}
    if old != new:
        diff = sorted(k for k in new if old.get(k) != new[k])
        raise ConfigError(f"{path}: train config differs from the checkpoint's in {diff} (only steps may change)")
    if int(state["step"]) > train_cfg.steps:
        raise ConfigError(f"{path} is already at step {state['step']} > steps={train_cfg.steps}")


def plot_loss_curve(history: dict, png: Path, title: str = "") -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    if history["train"]:
        s, l = np.asarray(history["train"]).T
        ax.plot(s, l, color="0.75", lw=0.6, label="train (per step)")
        w = max(len(l) // 50, 1)
        if len(l) >= w:
            ax.plot(s[w - 1:], np.convolve(l, np.ones(w) / w, mode="valid"), color="C0", label=f"train (mean of {w})")
    if history["val"]:
        s, l = np.asarray(history["val"]).T
        ax.plot(s, l, "o-", color="C3", label="validation (EMA, held-out measured samples)")
    if history.get("val_taught"):
        s, l = np.asarray(history["val_taught"]).T
        ax.plot(s, l, "s--", color="C2", label="validation (EMA, held-out taught samples)")
    ax.set_yscale("log")
    ax.set_xlabel("step")
    ax.set_ylabel("ε-prediction MSE")
    ax.set_title(f"training loss {title}".strip())
    ax.legend()
    fig.tight_layout()
    fig.savefig(png, dpi=110, format="png")
    plt.close(fig)


if __name__ == "__main__":   # torchrun --nproc_per_node=2 -m controller.train DATASET -o MODEL
    import sys

    from controller.cli import main   # `mimesys train`, reached by name (no import of the command module: no circle)
    main(["train", *sys.argv[1:]], prog_name="mimesys")
