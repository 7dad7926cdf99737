"""What a model export holds, read back (controller/export.py writes it): the manifest, the
ONNX Runtime sessions of its graphs, and the forward model it may carry to steer by."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ... import manifest
from ...errors import ValidationError
from .ddim import SamplerSettings

MANIFEST = "manifest.json"
MANIFEST_FORMAT = "mimesys.model-export"
MANIFEST_VERSION = 1


def read_manifest(model_dir: Path | str) -> dict:
    return manifest.read_manifest(model_dir, fmt=MANIFEST_FORMAT, version=MANIFEST_VERSION, what="model export",
                                  hint="export a model with `mimesys export MODEL --onnx DIR`",
                                  required=("metric_names", "catalog_names", "catalog_hash", "threads", "stressors",
                                            "sampler", "graphs", "action_scale", "window_s"))


class Graphs:
    """The context encoder and denoiser sessions, and the fused one-window sampler graph when
    asked for exactly the settings it was built with (`fused`, else None)."""

    def __init__(self, model_dir: Path, graphs: dict, settings: SamplerSettings, *, threads: int | None,
                 force_stepwise: bool, stretches: bool):
        import onnxruntime as ort

        opts = ort.SessionOptions()
        # One intra-op thread: the graphs are tiny, so thread hand-offs cost more than they save.
        opts.intra_op_num_threads = int(threads or graphs.get("onnxruntime_threads", 1) or 1)
        opts.inter_op_num_threads = 1
        opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL

        def session(file):
            return ort.InferenceSession(str(model_dir / file), opts, providers=["CPUExecutionProvider"])

        try:
            self.encoder = session(graphs["context_encoder"]["file"])
            self.denoiser = session(graphs["denoiser"]["file"])
            fused = graphs.get("sampler")
            self.fused = None
            self.fused_batched = False
            if fused and SamplerSettings(**fused["settings"]) == settings and not force_stepwise:
                self.fused = session(fused["file"])
                self.fused_inputs = {i.name for i in self.fused.get_inputs()}
                # exports before the batched graph fixed its batch at 1: one window a call; with
                # η > 0 each window's step noise is drawn beside its x_T, in order
                self.fused_batched = fused.get("batch") == "B" and stretches and settings.eta == 0
        except Exception as e:  # onnxruntime raises its own exception types (Fail, InvalidGraph, NoSuchFile, ...)
            raise ValidationError(f"{model_dir}: cannot load ONNX graphs: {e}") from e

    def run_fused(self, feed: dict[str, np.ndarray | None]) -> np.ndarray:
        """The fused graph's compositions [B, M, K] (raw) for a feed; inputs it lacks are left out."""
        return self.fused.run(None, {k: v for k, v in feed.items() if k in self.fused_inputs})[0]


def load_steer(model_dir: Path, spec: dict | None, weight: float | None, catalog_names: list[str], threads: int):
    """The forward model the export carries (manifest `steer`) as a ForwardSteer, or None;
    `weight` overrides the manifest's steer weight."""
    if not spec:
        return None
    from dataclasses import replace

    from ...forward.model import load_forward_model
    from ..steer import ForwardSteer, SteerSettings
    where = model_dir / str(spec.get("forward", ""))
    if not where.resolve().is_relative_to(model_dir.resolve()) or where.resolve() == model_dir.resolve():
        raise ValidationError(f"{model_dir}: manifest steer.forward must name a subdirectory of the export")
    fm = load_forward_model(where)
    if list(fm.catalog_names) != catalog_names or int(fm.threads) != threads:
        raise ValidationError(f"{where}: the forward model was made for another catalog or thread count "
                              f"than the diffusion model")
    settings = SteerSettings.from_dict(spec.get("settings") or {})
    if weight is not None:
        if weight < 0:
            raise ValidationError(f"steer weight must be ≥ 0, got {weight}")
        settings = replace(settings, weight=float(weight))
    return ForwardSteer(fm, settings)
