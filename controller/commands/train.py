"""`mimesys train DATASET -o MODEL`: train the diffusion model on a collected dataset.

Multi-process (DistributedDataParallel): `torchrun --nproc_per_node=N -m controller.train DATASET -o MODEL`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import click

from mimesys.cliopts import output_option
from mimesys.cliopts import progress_option
from mimesys.errors import MimesysError
from mimesys.exitstatus import click_error


@click.command("train")
@click.argument("dataset", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@output_option("out", "--out", required=True, type=click.Path(path_type=Path),
              help="Model directory (model.pt, loss_curve.png, history.json are written there).")
@click.option("--steps", type=int, default=None, help="Optimizer steps [4000].")
@click.option("--batch-size", type=int, default=None, help="Global batch size [256].")
@click.option("--lr", type=float, default=None, help="Peak learning rate [1e-3].")
@click.option("--hidden", type=int, default=None, help="Token width [64].")
@click.option("--blocks", type=int, default=None, help="Equivariant denoiser blocks [2].")
@click.option("--no-prev-action", is_flag=True, help="Ablation: do not condition on a_{t-1} (no state).")
@click.option("--prev-obs/--no-prev-obs", default=None, help="Also condition on o_{t-1} [off].")
@click.option("--sample-steps", type=int, default=None, help="Default DDIM steps stored with the model [10].")
@click.option("--guidance", type=float, default=None, help="Default classifier-free guidance weight [1.5].")
@click.option("--seed", type=int, default=None, help="Seed for split, batches and noise [0].")
@click.option("--device", default=None, help="cpu, cuda or cuda:N [auto].")
@click.option("--amp/--no-amp", default=None, help="bf16 autocast (GPU only) [on with CUDA].")
@click.option("--threads", "cpu_threads", type=int, default=None, help="torch CPU threads [torch default].")
@click.option("--metrics", default=None,
              help="Comma-separated dataset metrics to condition on: the ones the target traces will carry "
                   "(e.g. an importer's) [every usable metric].")
@click.option("--taught-share", type=click.FloatRange(0.0, 1.0), default=None,
              help="Share of each batch drawn from the samples the forward model taught (`mimesys dataset teach`) "
                   "[as they come].")
@click.option("--resume", is_flag=True, help="Continue the run in --output (same dataset and config; --steps may grow).")
@click.option("--overwrite", is_flag=True, help="Start over even if --output holds a model.")
@progress_option
def train(dataset, out, steps, batch_size, lr, hidden, blocks, no_prev_action, prev_obs, sample_steps,
          guidance, seed, device, amp, cpu_threads, metrics, taught_share, resume, overwrite, progress):
    """Train p(a_t | o_t, a_{t-1}, o_{t-1}) on DATASET and write the model to --output."""
    from controller.model.config import ModelConfig
    from controller.train import TrainConfig, train as run_training

    tc = {k: v for k, v in dict(steps=steps, batch_size=batch_size, lr=lr, seed=seed, device=device,
                                amp=amp, cpu_threads=cpu_threads, taught_share=taught_share).items()
          if v is not None}
    if metrics:
        tc["metrics"] = tuple(m.strip() for m in metrics.split(",") if m.strip())
    mc = {k: v for k, v in dict(hidden=hidden, blocks=blocks, sample_steps=sample_steps,
                                guidance=guidance).items() if v is not None}
    if no_prev_action:
        mc["use_prev_action"] = False
    if prev_obs is not None:
        mc["use_prev_obs"] = prev_obs
    try:
        result = run_training(dataset, out, TrainConfig(**tc), ModelConfig(**mc), resume=resume,
                              overwrite=overwrite, progress=progress)
    except MimesysError as e:
        raise click_error(e) from e
    if int(os.environ.get("RANK", "0")) == 0:
        click.echo(json.dumps({"model": str(result.model_path), "steps": result.steps,
                               "train_loss": round(result.final_train_loss, 5),
                               "val_loss": None if result.final_val_loss is None else round(result.final_val_loss, 5),
                               "parameters": result.parameters, "seconds": round(result.seconds, 1)}))
