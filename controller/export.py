"""Export a trained model for agents: ONNX graphs + manifest.json (`mimesys export MODEL --onnx DIR`).

Three graphs. The first two are the model; the NumPy sampler in mimesys/planners/diffusion/ddim.py runs
the encoder once per window and the denoiser at each DDIM step, for any sampler settings:

    context_encoder.onnx  target_obs [B, N], prev_obs [B, N] (raw units, NaN = missing),
                          prev_action [B, M, K], keep [B] (1 = conditional, 0 = null context)
                          -> thread_ctx [B, K, D], global_ctx [B, D]
    denoiser.onnx         x_t [B, M, K], t [B] int64, thread_ctx, global_ctx -> eps [B, M, K]

The third is the whole default sampler fused into one graph (encoder, the S guided DDIM
steps unrolled, projection), so generating windows at the default settings is one ONNX
Runtime call with no per-step Python, for one window or a batch of independent ones (the
diffusion planner advances several stretches of a trace at once):

    sampler.onnx          target_obs [B, N], prev_obs [B, N], prev_action [B, M, K],
                          x_T [B, M, K] (+ step_noise [S, B, M, K] when η > 0) -> action [B, M, K]

Normalization (log1p, mean/std, NaN -> training mean) is inside the encoder graph; the
manifest records it anyway, with the metric schema, the catalog names and hash, the
latent scaling, the sampler (steps, guidance weight, η, the ᾱ table and the default
DDIM schedule), the training host's fingerprint and thread count, and the provenance of
the weights. mimesys/planners/diffusion/exported.py reads it. The export refuses to finish unless ONNX
Runtime reproduces PyTorch's denoiser output within PARITY_TOL.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import shutil
import tempfile
import warnings
from pathlib import Path

import numpy as np
import torch

from mimesys.errors import ValidationError

from .model.checkpoint import model_file, policy_from_checkpoint, read_checkpoint
from .model.policy import Context, DiffusionPolicy

MANIFEST_FORMAT = "mimesys.model-export"
MANIFEST_VERSION = 1
OPSET = 17
PARITY_TOL = 1e-4
ENCODER_FILE, DENOISER_FILE, SAMPLER_FILE = "context_encoder.onnx", "denoiser.onnx", "sampler.onnx"
STEER_DIR = "forward"    # the forward model that steers the sampler, when the export carries one


class _Encoder(torch.nn.Module):
    def __init__(self, policy: DiffusionPolicy):
        super().__init__()
        self.encoder = policy.encoder

    def forward(self, target_obs, prev_obs, prev_action, keep):
        return self.encoder(target_obs, prev_obs, prev_action, keep)


class _FusedSampler(torch.nn.Module):
    """policy.sample at the default settings, with its random draws as inputs."""

    def __init__(self, policy: DiffusionPolicy):
        super().__init__()
        self.policy = policy

    def forward(self, target_obs, prev_obs, prev_action, x_T, step_noise=None):
        ctx = Context(target_obs, prev_obs, prev_action)
        return self.policy.sample(ctx, x_T=x_T, noise=step_noise).actions


def _sampler_inputs(policy: DiffusionPolicy, seed: int, B: int = 1):
    g = torch.Generator().manual_seed(seed)
    (obs, prev, a, _), _ = example_inputs(policy, B, seed)
    x_T = torch.randn((B, policy.M, policy.K), generator=g)
    noise = torch.randn((policy.config.sample_steps, B, policy.M, policy.K), generator=g)
    return (obs, prev, a, x_T) + ((noise,) if policy.config.eta > 0 else ())


def example_inputs(policy: DiffusionPolicy, B: int = 2, seed: int = 0):
    """Random encoder and denoiser inputs in the ranges the model sees (some metrics NaN)."""
    g = torch.Generator().manual_seed(seed)
    N, M, K = len(policy.spec.metrics), policy.M, policy.K
    lo = torch.tensor(policy.normalizer.raw_min, dtype=torch.float32)
    hi = torch.tensor(policy.normalizer.raw_max, dtype=torch.float32)
    obs = lo + (hi - lo) * torch.rand((B, N), generator=g)
    prev = lo + (hi - lo) * torch.rand((B, N), generator=g)
    prev[0, 0] = float("nan")
    a = torch.rand((B, M, K), generator=g)
    a = a / a.sum(dim=1, keepdim=True).clamp(min=1)
    keep = torch.tensor([1.0, 0.0] * (B // 2) + [1.0] * (B % 2))
    with torch.no_grad():
        h, gl = policy.encoder(obs, prev, a, keep)
    x = torch.randn((B, M, K), generator=g)
    t = torch.randint(0, policy.config.train_timesteps, (B,), generator=g)
    return (obs, prev, a, keep), (x, t, h, gl)


def _graph_inputs(path: Path) -> list[str]:
    """Input names as exported (an input the model ignores, e.g. prev_action in the no-state
    ablation, is dropped by the exporter)."""
    import onnx
    g = onnx.load(str(path)).graph
    init = {i.name for i in g.initializer}
    return [i.name for i in g.input if i.name not in init]


def _sha256(path: Path) -> str:
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


def export_onnx(model: Path | str, out_dir: Path | str, *, threads: int = 1, overwrite: bool = False,
                forward: Path | str | None = None, steer_weight: float = 0.0) -> dict:
    """Write out_dir/{manifest.json, context_encoder.onnx, denoiser.onnx}; returns the manifest.
    The directory appears complete or not at all (built in a temporary sibling, then renamed)."""
    import onnxruntime as ort

    src = model_file(model)
    ck = read_checkpoint(src)
    policy = policy_from_checkpoint(ck).float().eval()
    out_dir = Path(out_dir)
    if out_dir.exists() and any(out_dir.iterdir()) and not overwrite:
        raise ValidationError(f"{out_dir} exists and is not empty; pass --overwrite to replace it")
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    try:
        enc_in, den_in = example_inputs(policy)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")   # the TorchScript exporter's deprecation notice
            torch.onnx.export(_Encoder(policy), enc_in, str(tmp / ENCODER_FILE), dynamo=False, opset_version=OPSET,
                              input_names=["target_obs", "prev_obs", "prev_action", "keep"],
                              output_names=["thread_ctx", "global_ctx"],
                              dynamic_axes={n: {0: "B"} for n in ["target_obs", "prev_obs", "prev_action", "keep",
                                                                  "thread_ctx", "global_ctx"]})
            torch.onnx.export(policy.denoiser, den_in, str(tmp / DENOISER_FILE), dynamo=False, opset_version=OPSET,
                              input_names=["x_t", "t", "thread_ctx", "global_ctx"], output_names=["eps"],
                              dynamic_axes={n: {0: "B"} for n in ["x_t", "t", "thread_ctx", "global_ctx", "eps"]})
            s_in = _sampler_inputs(policy, 0)
            names = ["target_obs", "prev_obs", "prev_action", "x_T"] + (["step_noise"] if len(s_in) == 5 else [])
            batch_axes = {n: {0: "B"} for n in ["target_obs", "prev_obs", "prev_action", "x_T", "action"]}
            torch.onnx.export(_FusedSampler(policy), s_in, str(tmp / SAMPLER_FILE), dynamo=False,
                              opset_version=OPSET, input_names=names, output_names=["action"],
                              dynamic_axes={**batch_axes, **({"step_noise": {1: "B"}} if len(s_in) == 5 else {})})
        parity = check_parity(policy, tmp)
        if max(parity["denoiser_max_abs_diff"], parity["encoder_max_abs_diff"],
               parity["sampler_max_abs_diff"]) >= PARITY_TOL:
            raise ValidationError(f"ONNX Runtime disagrees with PyTorch beyond {PARITY_TOL}: {parity}")
        sched = policy.schedule()
        manifest = {
            "format": MANIFEST_FORMAT, "version": MANIFEST_VERSION,
            "exported_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "graphs": {
                "context_encoder": {"file": ENCODER_FILE, "sha256": _sha256(tmp / ENCODER_FILE),
                                    "inputs": _graph_inputs(tmp / ENCODER_FILE),
                                    "outputs": ["thread_ctx", "global_ctx"]},
                "denoiser": {"file": DENOISER_FILE, "sha256": _sha256(tmp / DENOISER_FILE),
                             "inputs": ["x_t", "t", "thread_ctx", "global_ctx"], "outputs": ["eps"]},
                "sampler": {"file": SAMPLER_FILE, "sha256": _sha256(tmp / SAMPLER_FILE), "batch": "B",
                            "inputs": [n for n in names if n in _graph_inputs(tmp / SAMPLER_FILE)], "outputs": ["action"],
                            "settings": {"steps": policy.config.sample_steps, "guidance": policy.config.guidance,
                                         "eta": policy.config.eta}},
                "opset": OPSET, "onnxruntime_threads": threads},
            "metrics": [m.to_dict() for m in policy.spec.metrics],
            "metric_names": policy.spec.metric_names,
            "catalog_names": list(policy.spec.catalog_names), "catalog_hash": policy.spec.catalog_hash,
            "threads": policy.K, "stressors": policy.M, "window_s": policy.spec.window_s,
            "hidden": policy.config.hidden,
            "normalization": {**policy.normalizer.to_dict(), "layout": policy.layout.to_dict()},
            "action_scale": policy.action_scale.to_dict(),
            "sampler": {"steps": policy.config.sample_steps, "guidance": policy.config.guidance,
                        "eta": policy.config.eta, "train_timesteps": policy.config.train_timesteps,
                        "spacing": "leading+1", "latent_box": list(policy.latent_box),
                        "alpha_bar": policy.alpha_bar_np.tolist(), "default_schedule": sched.to_dict(),
                        "guidance_formula": "eps = eps_uncond + guidance * (eps_cond - eps_uncond)"},
            "training_host_fingerprint": policy.spec.host_fingerprint,
            "model": {"source": str(src), "sha256": _sha256(src), "git_revision": ck.get("git_revision"),
                      "step": ck.get("step"), "parameters": policy.parameter_count(),
                      "model_config": ck["model_config"], "train_config": ck.get("train_config"),
                      "dataset": ck.get("dataset"), "created_at": ck.get("created_at"),
                      # set by `mimesys align` (controller/align/session.py): base model, executor, simulated
                      "alignment": {k: v for k, v in ck["alignment"].items() if k != "history"}
                      if ck.get("alignment") else None},
            "simulated_training_data": bool(ck.get("dataset", {}).get("simulated", False)),
            "parity": parity,
        }
        if forward is not None:
            manifest["steer"] = _carry_forward(forward, tmp, policy, steer_weight)
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=1))
        if out_dir.exists():
            shutil.rmtree(out_dir)
        tmp.chmod(0o755)
        tmp.rename(out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return manifest


def _carry_forward(forward: Path | str, out: Path, policy: DiffusionPolicy, weight: float) -> dict:
    """Copy the forward model that steers the sampler into the export (agents get one directory)
    -> the manifest's `steer` entry (mimesys/planners/steer.py)."""
    from mimesys.forward.model import load_forward_model
    from mimesys.planners.steer import SteerSettings
    fm = load_forward_model(forward)
    if list(fm.catalog_names) != list(policy.spec.catalog_names) or fm.threads != policy.K:
        raise ValidationError(f"{forward}: the forward model was made for another catalog or thread count "
                              f"({len(fm.catalog_names)} stressors × {fm.threads}) than the model "
                              f"({policy.M} × {policy.K})")
    if weight < 0:
        raise ValidationError(f"steer weight must be ≥ 0, got {weight}")
    shutil.copytree(forward, out / STEER_DIR, ignore=shutil.ignore_patterns("*.png", "*.json.tmp*"))
    return {"forward": STEER_DIR, "settings": SteerSettings(weight=float(weight)).to_dict(),
            "forward_provenance": fm.provenance, "forward_sha256": _sha256(out / STEER_DIR / "manifest.json")}


def check_parity(policy: DiffusionPolicy, onnx_dir: Path, batches=(1, 2, 7)) -> dict:
    """Max |PyTorch − ONNX Runtime| over random inputs, for both graphs."""
    import onnxruntime as ort

    enc = ort.InferenceSession(str(onnx_dir / ENCODER_FILE), providers=["CPUExecutionProvider"])
    den = ort.InferenceSession(str(onnx_dir / DENOISER_FILE), providers=["CPUExecutionProvider"])
    d_enc = d_den = 0.0
    for i, B in enumerate(batches):
        (obs, prev, a, keep), (x, t, h, g) = example_inputs(policy, B, seed=100 + i)
        with torch.no_grad():
            h_t, g_t = policy.encoder(obs, prev, a, keep)
            eps_t = policy.denoiser(x, t, h, g)
        feed = {"target_obs": obs.numpy(), "prev_obs": prev.numpy(), "prev_action": a.numpy(), "keep": keep.numpy()}
        # an input the model does not use (the no-state ablation's prev_action) is not in the graph
        used = {i.name for i in enc.get_inputs()}
        h_o, g_o = enc.run(None, {k: v for k, v in feed.items() if k in used})
        eps_o, = den.run(None, {"x_t": x.numpy(), "t": t.numpy(), "thread_ctx": h.numpy(), "global_ctx": g.numpy()})
        d_enc = max(d_enc, float(np.abs(h_o - h_t.numpy()).max()), float(np.abs(g_o - g_t.numpy()).max()))
        d_den = max(d_den, float(np.abs(eps_o - eps_t.numpy()).max()))
    smp = ort.InferenceSession(str(onnx_dir / SAMPLER_FILE), providers=["CPUExecutionProvider"])
    d_smp = 0.0
    for seed, B in enumerate(batches):
        s_in = _sampler_inputs(policy, 200 + seed, B)
        with torch.no_grad():
            ref = _FusedSampler(policy)(*s_in)
        all_names = ["target_obs", "prev_obs", "prev_action", "x_T", "step_noise"]
        used = {i.name for i in smp.get_inputs()}
        out, = smp.run(None, {n: x.numpy() for n, x in zip(all_names, s_in) if n in used})
        d_smp = max(d_smp, float(np.abs(out - ref.numpy()).max()))
    return {"encoder_max_abs_diff": d_enc, "denoiser_max_abs_diff": d_den, "sampler_max_abs_diff": d_smp,
            "batches": list(batches)}
