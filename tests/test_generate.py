"""Local generation with ONNX Runtime (mimesys/planners/diffusion/, `mimesys-agent generate`):
valid plans, sequential state-aware conditioning, NaN handling stated in provenance, the
NumPy sampler equal to PyTorch's and to the fused graph, and no torch in the process."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from agentd.commands.generate import generate as generate_cmd
from mimesys.planners.base import Generator, project_to_valid
from mimesys.planners.diffusion import load_generator
from mimesys.planners.diffusion.chain import STRETCH_WINDOWS, WARMUP_WINDOWS
from mimesys.planners.diffusion.ddim import ddim_schedule
from mimesys.plan import Plan
from mimesys.trace import Trace
from controller.export import export_onnx
from controller.model.checkpoint import load_policy
from controller.model.noise_schedule import DDIMSchedule
from test_model_toydata import TOY_METRICS, train_toy_model

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def exported(tmp_path_factory, catalog):
    d = tmp_path_factory.mktemp("gen")
    data, _ = train_toy_model(d, catalog, samples=300, steps=60)
    export_onnx(d / "model", d / "onnx")
    import h5py
    with h5py.File(data) as f:
        obs = f["obs"][:40]
    Trace(obs, TOY_METRICS, simulated=True).write(d / "trace.h5")
    return d


def test_generate_makes_a_valid_plan_for_the_catalog(exported, catalog):
    gen = load_generator(exported / "onnx")
    assert isinstance(gen, Generator) and gen.fused
    plan = gen.generate(Trace.read(exported / "trace.h5"), seed=3)
    plan.validate(catalog)
    assert plan.compositions.shape == (40, len(catalog), 2)
    assert plan.provenance["generator"] == "diffusion" and plan.provenance["trace_simulated"] is True
    again = gen.generate(Trace.read(exported / "trace.h5"), seed=3)
    assert np.array_equal(plan.compositions, again.compositions)


def test_each_window_is_conditioned_on_the_previous_generated_composition(exported):
    gen = load_generator(exported / "onnx")
    trace = Trace.read(exported / "trace.h5")
    plan = gen.generate(trace, seed=0)
    values = trace.select(gen.metric_names)
    # replay window 5 by hand with the composition generated for window 4 as state
    rng = np.random.default_rng(0)
    prev_a, prev_o = np.zeros((gen.stressors, gen.threads), np.float32), np.full(len(gen.metric_names), np.nan, np.float32)
    for t in range(6):
        a = gen.sample_window(values[t], prev_o, prev_a, rng)
        assert np.allclose(a, plan.compositions[t], atol=1e-6)
        prev_a, prev_o = a, values[t]


def test_a_long_trace_is_generated_by_stretches_side_by_side_each_after_its_warm_up(exported):
    gen = load_generator(exported / "onnx")
    in_order = load_generator(exported / "onnx", stretches=False)
    assert gen.stretched and in_order.fused and not in_order.stretched
    short = Trace.read(exported / "trace.h5")
    trace = Trace(np.tile(short.values, (4, 1)), short.metrics, simulated=True)     # 160 windows: 3 stretches
    plan = gen.generate(trace, seed=2)
    assert plan.provenance["stretches"] == {"windows": STRETCH_WINDOWS, "warmup": WARMUP_WINDOWS}
    # the first stretch is the chain in order (one batched call of 3 rows vs 3 calls of one: float rounding)
    n = STRETCH_WINDOWS
    assert np.abs(plan.compositions[:n] - in_order.generate(trace, seed=2).compositions[:n]).max() < 1e-5
    # the second: the chain started from idle WARMUP_WINDOWS before its first window, on the same draws
    values = trace.select(gen.metric_names)
    x_T = np.random.default_rng(2).standard_normal((trace.T, gen.stressors, gen.threads), dtype=np.float32)
    prev_a = np.zeros((gen.stressors, gen.threads), np.float32)
    for t in range(n - WARMUP_WINDOWS, n + 6):
        feed = {"target_obs": values[t:t + 1], "prev_obs": values[t - 1:t], "prev_action": prev_a[None],
                "x_T": x_T[t:t + 1]}
        feed = {k: v for k, v in feed.items() if k in gen.graphs.fused_inputs}
        prev_a = project_to_valid(gen.graphs.fused.run(None, feed)[0][0])
        if t >= n:
            assert np.abs(prev_a - plan.compositions[t]).max() < 1e-5, t


def test_missing_metrics_are_filled_with_training_mean_and_reported(exported):
    full = Trace.read(exported / "trace.h5")
    v = full.values.copy()
    v[3:7, 2] = np.nan
    keep = [0, 1, 2, 4]                                      # drop disk.write_Bps entirely
    trace = Trace(v[:, keep], [full.metrics[i] for i in keep])
    plan = load_generator(exported / "onnx").generate(trace, seed=0)
    filled = plan.provenance["missing_metrics_filled_with_training_mean"]
    assert filled == {"disk.write_Bps": 40, "mem.bw_Bps": 4}
    assert plan.provenance["ignored_trace_metrics"] == ["llc.miss_per_s"]
    assert np.isfinite(plan.compositions).all()


def test_numpy_sampler_matches_pytorch_and_the_fused_graph(exported):
    pol = load_policy(exported / "model")
    fused = load_generator(exported / "onnx")
    stepwise = load_generator(exported / "onnx", force_stepwise=True)
    assert not stepwise.fused
    trace = Trace.read(exported / "trace.h5")
    vals = trace.select(fused.metric_names)
    rng = np.random.default_rng(7)
    prev_a = np.zeros((fused.stressors, 2), np.float32)
    for t in range(5):
        x_T, _ = fused.ddim.draw_noise(rng)
        prev_o = vals[t - 1] if t else np.full(vals.shape[1], np.nan, np.float32)
        a_np = stepwise.ddim.sample(vals[t], prev_o, prev_a, x_T)
        with torch.no_grad():
            ctx = pol.context_from_numpy(vals[t:t + 1], prev_o[None], prev_a[None])
            a_pt = pol.sample(ctx, x_T=torch.from_numpy(x_T)).actions[0].numpy()
        feed = {"target_obs": vals[t:t + 1], "prev_obs": prev_o[None].astype(np.float32),
                "prev_action": prev_a[None], "x_T": x_T}
        feed = {k: v for k, v in feed.items() if k in fused.graphs.fused_inputs}   # o_{t-1} is unused by default
        a_fused = project_to_valid(fused.graphs.fused.run(None, feed)[0][0])
        assert np.abs(a_np - a_pt).max() < 1e-4 and np.abs(a_fused - a_pt).max() < 1e-4
        prev_a = a_np


def test_numpy_schedule_equals_the_training_side_schedule():
    from controller.model.noise_schedule import cosine_alpha_bar
    ab = cosine_alpha_bar(1000)
    for steps in (1, 4, 10, 25, 1000):
        ts, a_t, a_p = ddim_schedule(ab, steps)
        ref = DDIMSchedule.make(ab, steps)
        assert np.array_equal(ts, ref.timesteps) and np.allclose(a_t, ref.alpha_bar_t) and np.allclose(a_p, ref.alpha_bar_prev)


def test_other_sampler_settings_run_the_numpy_loop(exported):
    gen = load_generator(exported / "onnx", steps=4, guidance=1.0, eta=1.0)
    assert not gen.fused
    plan = gen.generate(Trace.read(exported / "trace.h5"), seed=1)
    assert plan.provenance["sampler"] == {"steps": 4, "guidance": 1.0, "eta": 1.0}
    plan.validate()


def test_project_to_valid():
    a = np.array([[0.9, -1.0, np.nan], [0.6, 0.2, 0.5]], np.float32)
    p = project_to_valid(a)
    assert np.allclose(p.sum(axis=0), [1.0, 0.2, 0.5]) and (p >= 0).all()


def test_cli_writes_a_plan_and_bad_input_is_one_line(exported, tmp_path):
    out = CliRunner().invoke(generate_cmd, ["--model", str(exported / "onnx"), "--trace", str(exported / "trace.h5"),
                                            "-o", str(tmp_path / "plan.h5"), "--no-progress"])
    assert out.exit_code == 0, out.output
    assert Plan.read(tmp_path / "plan.h5").T == 40
    bad = tmp_path / "bad.h5"
    bad.write_bytes(b"nope")
    out = CliRunner().invoke(generate_cmd, ["--model", str(exported / "onnx"), "--trace", str(bad), "-o",
                                            str(tmp_path / "p2.h5"), "--no-progress"])
    assert out.exit_code != 0 and "not a readable mimesys trace" in out.output and not (tmp_path / "p2.h5").exists()
    out = CliRunner().invoke(generate_cmd, ["--model", str(tmp_path), "--trace", str(exported / "trace.h5"), "-o",
                                            str(tmp_path / "p3.h5"), "--no-progress"])
    assert out.exit_code != 0 and "no manifest.json" in out.output


def test_generation_runs_without_torch(exported, tmp_path):
    code = f"""
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in ('torch', 'controller'):
            raise ImportError('blocked ' + name)
sys.meta_path.insert(0, Block())
from agentd.cli import main
sys.argv = ['mimesys-agent', 'generate', '--model', {str(exported / 'onnx')!r}, '--trace',
            {str(exported / 'trace.h5')!r}, '-o', {str(tmp_path / 'p.h5')!r}, '--no-progress']
main()
"""
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1])["windows"] == 40


def test_select_planner_keeps_the_candidate_the_forward_model_prefers(exported, catalog):
    """select: the diffusion model's candidates, ranked by a forward model (here a first-order
    model on the toy metrics: stressor m adds (m+1)/M of a core and 10 MB/s of writes × m)."""
    from mimesys.forward.firstorder import FirstOrder
    from mimesys.forward.model import ForwardModel
    from mimesys.planners import load_planner
    from mimesys.planners.select import ForwardSelect

    names = [m.name for m in TOY_METRICS if m.available]
    units = [m.unit for m in TOY_METRICS if m.available]
    M = len(catalog)
    R = np.zeros((M, len(names)))
    R[:, names.index("disk.write_Bps")] = np.arange(M) * 1e7
    own = (np.arange(M) + 1) / M
    fo = FirstOrder(names, units, list(catalog.names), [0, 1], np.zeros(len(names)), R, own, np.zeros(M),
                    np.array([1, 1, 1e10, 1e9]))
    fm = ForwardModel(fo, np.array([1, 1, 1e10, 1e9]), catalog.hash, simulated=True)
    gen = load_planner(exported / "onnx")
    trace = Trace.read(exported / "trace.h5")
    sel = ForwardSelect(gen, fm, candidates=8).generate(trace, seed=1)
    plain = gen.generate(trace, seed=1)
    target = trace.select(names)
    w = np.isfinite(target)

    def err(plan):
        pred = fm.predict_plan(plan.compositions)[0]
        return float(np.nanmean(((pred - target) / fm.scales)[w] ** 2))

    assert sel.provenance["generator"] == "select" and sel.provenance["candidates"] == 8
    assert err(sel) < err(plain)
    # like every learned plan, it names each core's busy fraction in the target for the runner to hold
    assert np.array_equal(sel.core_busy_target, plain.core_busy_target, equal_nan=True)
