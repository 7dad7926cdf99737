"""`mimesys export MODEL -o DIR`: ONNX graphs + manifest for agents (ONNX Runtime, no PyTorch)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from mimesys.cliopts import output_option
from mimesys.errors import MimesysError
from mimesys.exitstatus import click_error


@click.command("export")
@click.argument("model", type=click.Path(exists=True, path_type=Path))
@output_option("onnx_dir", "--onnx", required=True, type=click.Path(path_type=Path), help="Output directory (ONNX graphs + manifest.json).")
@click.option("--threads", type=int, default=1, show_default=True,
              help="ONNX Runtime intra-op threads recorded for agents (1 is fastest for this small model).")
@click.option("--overwrite", is_flag=True, help="Replace a non-empty output directory.")
@click.option("--forward", "forward_dir", type=click.Path(exists=True, file_okay=False, path_type=Path), default=None,
              help="A forward model (`mimesys forward fit`) carried in the export: the plan is finished by it "
                   "(the model's stressors sized, CPU matched, byte rates capped).")
@click.option("--steer-weight", type=click.FloatRange(min=0.0), default=0.0, show_default=True,
              help="With --forward: also nudge each sampling step toward the target, by this share of a full "
                   "gradient step (0: finish only, and agents keep the fused one-call sampler).")
def export(model, onnx_dir, threads, overwrite, forward_dir, steer_weight):
    """Export MODEL (training output directory or model.pt) to ONNX."""
    from controller.export import export_onnx

    try:
        m = export_onnx(model, onnx_dir, threads=threads, overwrite=overwrite, forward=forward_dir,
                        steer_weight=steer_weight)
    except MimesysError as e:
        raise click_error(e) from e
    click.echo(json.dumps({"onnx_dir": str(onnx_dir), "metrics": len(m["metric_names"]), "threads": m["threads"],
                           "stressors": m["stressors"], "sampler": {k: m["sampler"][k] for k in ("steps", "guidance", "eta")},
                           "parity": m["parity"], "steer": m.get("steer", {}).get("settings")}))
