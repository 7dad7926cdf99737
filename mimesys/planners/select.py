"""The `select` planner: the diffusion model proposes, the forward model disposes.

Per window, N candidate compositions are sampled from the diffusion model (each conditioned
on the target window and on the composition chosen for the previous window); the forward
model predicts what each would measure after that previous composition, and the candidate
whose prediction is closest to the target (the inverse planner's weighted, scaled squared
error on the metrics the target has) is kept. Costs N model samples per window.

The chosen plan is then finished as the diffusion planner's own are: by the forward model the
export carries, where it carries one (planners/steer.py: the solve from the chosen plan, byte
rates capped), and with each core's busy fraction in the target named for the runner to hold.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import ValidationError
from ..forward.model import ForwardModel, load_forward_model
from ..plan import Plan
from ..trace import Trace
from .base import check_target, target_matrix
from .diffusion import OnnxGenerator
from .inverse.rules import fitted_metrics


class ForwardSelect:
    name = "select"

    def __init__(self, generator: OnnxGenerator, forward: ForwardModel | Path | str, *, candidates: int = 8):
        self.gen = generator
        self.forward = forward if isinstance(forward, ForwardModel) else load_forward_model(forward)
        self.forward_dir = None if isinstance(forward, ForwardModel) else str(forward)
        self.candidates = max(1, int(candidates))
        if list(self.forward.catalog_names) != list(generator.catalog_names):
            raise ValidationError("select: the model and the forward model were made for different catalogs")

    def generate(self, trace: Trace, *, seed: int = 0, progress=None) -> Plan:
        check_target(trace, self.gen.window_s)
        fm = self.forward
        values, _ = target_matrix(trace, self.gen.metric_names)
        target, _ = target_matrix(trace, fm.metric_names)
        w = fitted_metrics(fm.metric_names, fm.first.units)
        rng = np.random.default_rng(seed)
        M, K = self.gen.stressors, self.gen.threads
        comps = np.zeros((trace.T, M, K), np.float32)
        prev_a = np.zeros((M, K), np.float32)
        prev_o = np.full(len(self.gen.metric_names), np.nan, np.float32)
        for t in range(trace.T):
            cands = np.stack([self.gen.sample_window(values[t], prev_o, prev_a, rng) for _ in range(self.candidates)])
            pred = fm.predict(cands, np.repeat(prev_a[None], len(cands), axis=0))[0]
            m = np.isfinite(target[t]) & (w > 0)
            err = (((pred - target[t]) / fm.scales) ** 2 * m).sum(axis=1)
            comps[t] = prev_a = cands[int(np.argmin(err))]
            prev_o = values[t]
            if progress is not None:
                progress(t + 1, trace.T)
        comps, busy, finished = self.gen.finish_compositions(comps, trace, values)
        prov = {"generator": self.name, "candidates": self.candidates, "model_dir": str(self.gen.model_dir),
                "forward_model": self.forward_dir, "seed": int(seed), "trace_windows": trace.T,
                "trace_simulated": bool(trace.simulated), "model_simulated": bool(fm.simulated),
                "steer_finish": finished, "core_busy_held": self.gen.hold_core_busy}
        return Plan(comps, list(self.gen.catalog_names), self.gen.catalog_hash, window_s=self.gen.window_s,
                    seed=int(seed), provenance=prov,
                    host_fingerprint=dict(self.gen.manifest.get("training_host_fingerprint") or {}),
                    core_busy_target=busy).validate()
