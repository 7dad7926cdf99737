"""The `diffusion` planner: trace -> plan with the exported diffusion model, ONNX Runtime and a
NumPy DDIM sampler (no PyTorch).

`load_generator(model_dir)` reads an export (controller/export.py: manifest.json + two ONNX
graphs) and returns an `OnnxGenerator`. Its `generate(trace, seed=...)` walks the trace
window by window: window t's composition is sampled conditioned on the target metrics
o_t, the previous target window o_{t−1} and the composition it generated for window
t − 1 (idle before the first), then projected onto the valid set (entries clipped to
[0, 1], each thread's column scaled to sum ≤ 1).

The DDIM update is the one in controller/model/noise_schedule.py (Song et al. 2021 eq. 12,
predicted x0 clipped to the valid latent box), computed from the ᾱ table in the
manifest; classifier-free guidance runs the conditional and the null context as one
batch of 2 per step. At the export's default settings the fused sampler graph does the
same in one ONNX Runtime call per window (no per-step Python); both paths draw x_T and
the step noise the same way from the seed, so they produce the same plan.

An export may carry the forward model it was taught with (`steer` in the manifest, the model
in a subdirectory; `mimesys export --forward`): the plan is then finished by it (the model's
stressors sized, byte rates capped; planners/steer.py), and with a steer weight above 0 each
DDIM step's predicted composition is also nudged toward the target by the forward model's
gradient, on the stepwise path; `steer_weight` overrides the manifest's weight (0: the model's
own sample, finished, by the fused graph).

Every plan names each core's busy fraction in the target for the runner to hold
(`core_busy_target`, as the inverse planner's do; `hold_core_busy=False` leaves it out).

Input metrics are matched by name. A model metric the trace lacks, or a NaN in a window,
is filled with the training mean inside the encoder graph (with its "missing" mask bit),
and the plan's provenance says which metrics and how many windows (and `fused_graph`,
whether the fused graph made it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from .. import manifest
from ..errors import ValidationError
from ..plan import Plan
from ..trace import Trace
from .base import check_target, project_to_valid, target_matrix

MANIFEST = "manifest.json"
MANIFEST_FORMAT = "mimesys.model-export"
MANIFEST_VERSION = 1


# generate_stretches: a stretch's own windows, and the windows it replays first (a taught model's
# state carries a change 15-20 windows on)
STRETCH_WINDOWS = 64
WARMUP_WINDOWS = 24


def ddim_schedule(alpha_bar: np.ndarray, steps: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(timesteps [S] descending, ᾱ_t [S], ᾱ_prev [S]) with "leading+1" spacing, as
    controller/model/noise_schedule.DDIMSchedule.make (a test checks they agree)."""
    T = len(alpha_bar)
    if not 1 <= steps <= T:
        raise ValidationError(f"sampling steps must be in 1..{T}, got {steps}")
    ts = np.minimum((np.arange(steps, dtype=np.int64) * (T // steps) + 1)[::-1], T - 1)
    prev = np.concatenate([alpha_bar[ts[1:]], [alpha_bar[0]]])
    return ts.copy(), alpha_bar[ts].astype(np.float64), prev.astype(np.float64)


@dataclass(frozen=True)
class SamplerSettings:
    steps: int
    guidance: float
    eta: float


class OnnxGenerator:
    """The exported diffusion model behind the Generator protocol."""

    name = "diffusion"

    def __init__(self, model_dir: Path | str, *, threads: int | None = None, steps: int | None = None,
                 guidance: float | None = None, eta: float | None = None, force_stepwise: bool = False,
                 steer_weight: float | None = None, hold_core_busy: bool = True, stretches: bool = True):
        import onnxruntime as ort

        self.model_dir = Path(model_dir)
        self.manifest = read_manifest(self.model_dir)
        m = self.manifest
        s = m["sampler"]
        self.settings = SamplerSettings(int(steps if steps is not None else s["steps"]),
                                        float(guidance if guidance is not None else s["guidance"]),
                                        float(eta if eta is not None else s["eta"]))
        if self.settings.guidance < 0 or self.settings.eta < 0:
            raise ValidationError(f"guidance and eta must be ≥ 0, got {self.settings}")
        self.metric_names: list[str] = list(m["metric_names"])
        self.catalog_names: list[str] = list(m["catalog_names"])
        self.catalog_hash: str = m["catalog_hash"]
        self.threads, self.stressors = int(m["threads"]), int(m["stressors"])
        self.window_s = float(m["window_s"])
        self.hold_core_busy = bool(hold_core_busy)
        a = m["action_scale"]
        self.offset, self.scale = float(a["offset"]), float(a["scale"])
        self.log_floor = float(a.get("log_floor", 0.0))      # 0: a linear latent (exports before it existed)
        self.box = tuple(float(x) for x in s["latent_box"])
        self.alpha_bar = np.asarray(s["alpha_bar"], np.float64)
        self.timesteps, ab_t, ab_p = ddim_schedule(self.alpha_bar, self.settings.steps)
        self._coef = self._step_coefficients(ab_t, ab_p, self.settings.eta)

        opts = ort.SessionOptions()
        # One intra-op thread: the graphs are tiny, so thread hand-offs cost more than they save.
        opts.intra_op_num_threads = int(threads or m["graphs"].get("onnxruntime_threads", 1) or 1)
        opts.inter_op_num_threads = 1
        opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        g = m["graphs"]
        try:
            self._enc = ort.InferenceSession(str(self.model_dir / g["context_encoder"]["file"]), opts,
                                             providers=["CPUExecutionProvider"])
            self._den = ort.InferenceSession(str(self.model_dir / g["denoiser"]["file"]), opts,
                                             providers=["CPUExecutionProvider"])
            # The fused one-window sampler graph, when asked for exactly the settings it was built with.
            fused = g.get("sampler")
            self._fused = None
            if fused and SamplerSettings(**fused["settings"]) == self.settings and not force_stepwise:
                self._fused = ort.InferenceSession(str(self.model_dir / fused["file"]), opts,
                                                   providers=["CPUExecutionProvider"])
                self._fused_inputs = {i.name for i in self._fused.get_inputs()}
                # exports before the batched graph fixed its batch at 1: one window a call; with
                # η > 0 each window's step noise is drawn beside its x_T, in order
                self._fused_batched = fused.get("batch") == "B" and stretches and self.settings.eta == 0
            # A model that ignores an input (e.g. the no-state ablation, prev_action) has no such graph input.
            self._enc_inputs = {i.name for i in self._enc.get_inputs()}
        except Exception as e:  # onnxruntime raises its own exception types (Fail, InvalidGraph, NoSuchFile, ...)
            raise ValidationError(f"{self.model_dir}: cannot load ONNX graphs: {e}") from e
        self.steer = self._load_steer(m.get("steer"), steer_weight)
        if self.steer is not None and self.steer.settings.weight > 0:
            self._fused = None      # the nudge runs between the denoiser's steps

    def _load_steer(self, spec: dict | None, weight: float | None):
        """The forward model the export carries (manifest `steer`), or None."""
        if not spec:
            return None
        from dataclasses import replace

        from ..forward.model import load_forward_model
        from .steer import ForwardSteer, SteerSettings
        where = self.model_dir / str(spec.get("forward", ""))
        if not where.resolve().is_relative_to(self.model_dir.resolve()) or where.resolve() == self.model_dir.resolve():
            raise ValidationError(f"{self.model_dir}: manifest steer.forward must name a subdirectory of the export")
        fm = load_forward_model(where)
        if list(fm.catalog_names) != self.catalog_names or int(fm.threads) != self.threads:
            raise ValidationError(f"{where}: the forward model was made for another catalog or thread count "
                                  f"than the diffusion model")
        settings = SteerSettings.from_dict(spec.get("settings") or {})
        if weight is not None:
            if weight < 0:
                raise ValidationError(f"steer weight must be ≥ 0, got {weight}")
            settings = replace(settings, weight=float(weight))
        return ForwardSteer(fm, settings)

    @staticmethod
    def _step_coefficients(ab_t, ab_p, eta):
        """Per step: (√ᾱ_t, √(1−ᾱ_t), √ᾱ_prev, √(1−ᾱ_prev−σ²), σ)."""
        out = []
        for a_t, a_p in zip(ab_t, ab_p):
            sigma = eta * math.sqrt(max((1 - a_p) / (1 - a_t) * (1 - a_t / a_p), 0.0))
            out.append((math.sqrt(a_t), math.sqrt(1 - a_t), math.sqrt(a_p),
                        math.sqrt(max(1 - a_p - sigma ** 2, 0.0)), sigma))
        return out

    @property
    def forward(self):
        """The forward model the export carries (its idle profile serves the activity guard), or None."""
        return None if self.steer is None else self.steer.forward

    # -- one window -------------------------------------------------------------
    @property
    def fused(self) -> bool:
        """True when windows are generated by the fused sampler graph (one call per window)."""
        return self._fused is not None

    @property
    def stretched(self) -> bool:
        """True when a trace's stretches are generated side by side (`generate_stretches`)."""
        return self._fused is not None and self._fused_batched

    def draw_noise(self, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray | None]:
        """x_T [1, M, K] and, when η > 0, the per-step noise [S, 1, M, K] (float32)."""
        shape = (1, self.stressors, self.threads)
        x_T = rng.standard_normal(shape, dtype=np.float32)
        noise = rng.standard_normal((self.settings.steps, *shape), dtype=np.float32) if self.settings.eta > 0 else None
        return x_T, noise

    def sample_window(self, target: np.ndarray, prev_obs: np.ndarray, prev_action: np.ndarray,
                      rng: np.random.Generator, nudge: Callable[[np.ndarray], np.ndarray] | None = None) -> np.ndarray:
        """target, prev_obs [N] raw (NaN allowed); prev_action [M, K] -> composition [M, K] (valid).
        nudge: moves a predicted composition [M, K] at each step (the steer), on the stepwise path."""
        x_T, noise = self.draw_noise(rng)
        f32 = np.float32
        if nudge is not None:
            return self.sample_window_stepwise(target, prev_obs, prev_action, x_T, noise, nudge=nudge)
        if self._fused is not None:
            feed = {"target_obs": target[None].astype(f32), "prev_obs": prev_obs[None].astype(f32),
                    "prev_action": prev_action[None].astype(f32), "x_T": x_T, "step_noise": noise}
            feed = {k: v for k, v in feed.items() if k in self._fused_inputs}
            return project_to_valid(self._fused.run(None, feed)[0][0])
        return self.sample_window_stepwise(target, prev_obs, prev_action, x_T, noise)

    def sample_window_stepwise(self, target, prev_obs, prev_action, x_T, noise=None, nudge=None) -> np.ndarray:
        """The NumPy DDIM loop over the encoder and denoiser graphs (any steps/guidance/η), the
        predicted composition moved by `nudge` at each step when given."""
        w = self.settings.guidance
        guided = w != 1.0
        f32 = np.float32
        if guided:
            enc_in = {"target_obs": np.stack([target, target]).astype(f32),
                      "prev_obs": np.stack([prev_obs, prev_obs]).astype(f32),
                      "prev_action": np.stack([prev_action, prev_action]).astype(f32),
                      "keep": np.array([1.0, 0.0], f32)}
        else:
            enc_in = {"target_obs": target[None].astype(f32), "prev_obs": prev_obs[None].astype(f32),
                      "prev_action": prev_action[None].astype(f32), "keep": np.ones(1, f32)}
        h, g = self._enc.run(None, {k: v for k, v in enc_in.items() if k in self._enc_inputs})
        x = np.asarray(x_T, np.float64)
        lo, hi = self.box
        feed = {"thread_ctx": h, "global_ctx": g}
        rows = 2 if guided else 1
        for i, t in enumerate(self.timesteps):
            feed["x_t"] = np.repeat(x, rows, axis=0).astype(f32)
            feed["t"] = np.full(rows, t, np.int64)
            eps = self._den.run(None, feed)[0].astype(np.float64)
            e = eps[1:2] + w * (eps[0:1] - eps[1:2]) if guided else eps
            sa, s1a, sp, dir_c, sigma = self._coef[i]
            x0 = np.clip((x - s1a * e) / sa, lo, hi)
            if nudge is not None:
                a0 = nudge(project_to_valid(self.from_latent(x0[0])))
                x0 = np.clip(self.to_latent(np.asarray(a0, np.float64))[None], lo, hi)
            e = (x - sa * x0) / s1a
            x = sp * x0 + dir_c * e
            if sigma > 0:
                x = x + sigma * noise[i]
        return project_to_valid(self.from_latent(x[0]))

    def to_latent(self, a: np.ndarray) -> np.ndarray:
        """The manifest's action_scale (controller/model/layout.py ActionScale), in NumPy."""
        u = np.log(np.maximum(a, 0.0) + self.log_floor) if self.log_floor > 0 else a
        return (u - self.offset) / self.scale

    def from_latent(self, x: np.ndarray) -> np.ndarray:
        u = self.offset + self.scale * x
        return np.exp(u) - self.log_floor if self.log_floor > 0 else u

    # -- a whole trace ----------------------------------------------------------
    def generate(self, trace: Trace, *, seed: int = 0,
                 progress: Callable[[int, int], None] | None = None) -> Plan:
        """One composition per trace window, each conditioned on the previous one: in order,
        or by stretches side by side where the export's fused graph takes a batch
        (`generate_stretches`)."""
        check_target(trace, self.window_s, "the model's training windows")
        values, report = target_matrix(trace, self.metric_names)
        if not np.isfinite(values).any():
            raise ValidationError(f"the trace has none of the model's metrics ({', '.join(self.metric_names)})")
        rng = np.random.default_rng(seed)
        steer = self.steer
        goal = steer.prepare(trace.select(steer.forward.metric_names)) if steer is not None else None
        if self.stretched:
            comps = self.generate_stretches(values, rng, progress)
        else:
            comps = self.generate_in_order(values, rng, progress,
                                           None if steer is None or steer.settings.weight <= 0 else
                                           lambda a, t: steer.nudge(a, t, goal))
        busy, finished = self.core_busy_target(values), None
        if steer is not None:
            comps, busy, finished = steer.finish(comps, goal)
        return Plan(comps, list(self.catalog_names), self.catalog_hash, window_s=self.window_s, seed=int(seed),
                    provenance={**self._provenance(trace, report, seed), "steer_finish": finished},
                    host_fingerprint=dict(self.manifest.get("training_host_fingerprint") or {}),
                    core_busy_target=busy).validate()

    def generate_in_order(self, values: np.ndarray, rng: np.random.Generator, progress=None,
                          nudge: Callable[[np.ndarray, int], np.ndarray] | None = None) -> np.ndarray:
        """values [T, N] -> compositions [T, M, K], one window after the other.

        (Solving the chain for all windows at once, as a fixed point over time, was tried: a
        taught model's state carries a change 15-20 windows on, so the sweeps cost more than
        the batching saves: 400 windows/s against 1,430 one window at a time.)"""
        T = values.shape[0]
        comps = np.zeros((T, self.stressors, self.threads), np.float32)
        prev_a = np.zeros((self.stressors, self.threads), np.float32)
        prev_o = np.full(len(self.metric_names), np.nan, np.float32)
        for t in range(T):
            step = None if nudge is None else (lambda a, t=t: nudge(a, t))
            comps[t] = prev_a = self.sample_window(values[t], prev_o, prev_a, rng, nudge=step)
            prev_o = values[t]
            if progress is not None:
                progress(t + 1, T)
        return comps

    def generate_stretches(self, values: np.ndarray, rng: np.random.Generator, progress=None) -> np.ndarray:
        """values [T, N] -> compositions [T, M, K], the trace cut into stretches of
        STRETCH_WINDOWS advanced side by side, one batched call of the fused graph per window.

        A window's composition depends on the one generated before it, so each stretch first
        replays the WARMUP_WINDOWS before its own from idle (their outputs discarded): the
        chain forgets where it started within them, and each stretch then runs on the state
        the chain in order would have. Window t draws the same x_T whichever stretch generates
        it (η = 0: nothing else is drawn), and a trace of one stretch is generated exactly as in
        order."""
        T, M, K, N = values.shape[0], self.stressors, self.threads, values.shape[1]
        x_T = rng.standard_normal((T, M, K), dtype=np.float32)
        firsts = np.arange(0, T, STRETCH_WINDOWS)                      # each stretch's first own window
        begins = np.maximum(firsts - WARMUP_WINDOWS, 0)                # where it starts (warm-up included)
        ends = np.minimum(firsts + STRETCH_WINDOWS, T)
        comps = np.zeros((T, M, K), np.float32)
        state = np.zeros((len(firsts), M, K), np.float32)              # each stretch's previous composition
        obs = np.vstack([np.full((1, N), np.nan, np.float32), values.astype(np.float32)])   # obs[t] = window t − 1
        done = 0
        for j in range(int((ends - begins).max())):
            rows = np.flatnonzero(begins + j < ends)
            t = begins[rows] + j
            feed = {"target_obs": values[t].astype(np.float32), "prev_obs": obs[t], "prev_action": state[rows],
                    "x_T": x_T[t]}
            a = project_to_valid(self._fused.run(None, {k: v for k, v in feed.items() if k in self._fused_inputs})[0])
            state[rows] = a
            own = t >= firsts[rows]
            comps[t[own]] = a[own]
            done += int(own.sum())
            if progress is not None:
                progress(done, T)
        return comps

    def core_busy_target(self, values: np.ndarray) -> np.ndarray | None:
        """float32 [T, K]: the target's busy fraction of each thread's core (thread k runs on CPU
        k, the model's layout), for the runner to hold (agentd/schedule.py, "The hold"): the CPU a
        composition's IO costs depends on how fast the device answers that second, which the
        model cannot know; the runner sizes the compute so each core matches the target. None
        when the target has no per-core CPU (or `hold_core_busy` is off)."""
        if not self.hold_core_busy:
            return None
        out = np.full((values.shape[0], self.threads), np.nan, np.float32)
        for k in range(self.threads):
            name = f"cpu.util.core{k}"
            if name in self.metric_names:
                out[:, k] = np.clip(values[:, self.metric_names.index(name)], 0.0, 1.0)
        return out if np.isfinite(out).any() else None

    def _provenance(self, trace: Trace, report: dict, seed: int) -> dict:
        mm = self.manifest.get("model", {})
        missing = {n: trace.T for n in report["absent_in_trace"]} | report["nan_windows"]
        return {
            "generator": self.name, "model_dir": str(self.model_dir),
            "model_sha256": mm.get("sha256"), "model_git_revision": mm.get("git_revision"),
            "sampler": {"steps": self.settings.steps, "guidance": self.settings.guidance, "eta": self.settings.eta},
            "fused_graph": self.fused, "stretches": self.stretched and {"windows": STRETCH_WINDOWS,
                                                                          "warmup": WARMUP_WINDOWS},
            "steer": None if self.steer is None else self.steer.settings.to_dict(),
            "core_busy_held": self.hold_core_busy,
            "seed": int(seed), "trace_windows": trace.T, "trace_provenance": trace.provenance,
            "trace_simulated": bool(trace.simulated),
            "simulated_training_data": bool(self.manifest.get("simulated_training_data", False)),
            "missing_metrics_filled_with_training_mean": missing,
            "ignored_trace_metrics": report["ignored_trace_metrics"],
        }


def read_manifest(model_dir: Path | str) -> dict:
    return manifest.read_manifest(model_dir, fmt=MANIFEST_FORMAT, version=MANIFEST_VERSION, what="model export",
                                  hint="export a model with `mimesys export MODEL --onnx DIR`",
                                  required=("metric_names", "catalog_names", "catalog_hash", "threads", "stressors",
                                            "sampler", "graphs", "action_scale", "window_s"))


def load_generator(model_dir: Path | str, **overrides) -> OnnxGenerator:
    """overrides: threads, steps, guidance, eta (None = the manifest's)."""
    return OnnxGenerator(model_dir, **overrides)

