"""Baselines behind the Generator interface: nearest neighbour, k-NN interpolation (k=100),
single stressor with duty cycle = per-core utilization."""

from pathlib import Path

import numpy as np
import pytest

from mimesys.planners.base import Generator
from mimesys.trace import Trace
from controller.baselines.from_dataset import KnnInterpolation, from_dataset
from controller.model.data import load_training_data
from test_model_toydata import TOY_METRICS, write_toy_dataset


@pytest.fixture(scope="module")
def toy(tmp_path_factory, catalog):
    return write_toy_dataset(tmp_path_factory.mktemp("bl") / "toy.h5", catalog, S=400)


def test_nearest_returns_the_composition_of_the_matching_sample(toy, catalog):
    data = load_training_data(toy)
    gen = from_dataset("nearest", toy)
    assert isinstance(gen, Generator)
    idx = [5, 17, 200]
    trace = Trace(np.concatenate([data.samples.obs[idx], np.full((3, 1), np.nan, np.float32)], axis=1), TOY_METRICS)
    plan = gen.generate(trace, seed=0)
    plan.validate(catalog)
    assert np.allclose(plan.compositions, data.samples.action[idx], atol=1e-6)
    assert plan.provenance["generator"] == "nearest"


def test_nearest_searches_only_the_metrics_the_trace_has(toy, catalog):
    """A trace with two of the dataset's metrics (as an imported trace might be) still finds
    the samples that match on those two; the rest are not filled in with the dataset mean."""
    data = load_training_data(toy)
    cols = [0, 2]                                   # cpu.util.core0 and mem.bw_Bps
    obs = data.samples.obs
    idx = np.flatnonzero((obs[:, 0] > 0.05) & (obs[:, 2] > 2e6))[:3]   # continuous in both: unique
    trace = Trace(data.samples.obs[idx][:, cols], [TOY_METRICS[c] for c in cols])
    plan = from_dataset("nearest", toy).generate(trace, seed=0)
    assert np.allclose(plan.compositions, data.samples.action[idx], atol=1e-6)
    missing = plan.provenance["missing_metrics_filled_with_training_mean"]
    assert "disk.write_Bps" in missing and "cpu.util.core1" in missing


def test_knn_uses_100_neighbours_and_interpolates(toy, catalog):
    gen = from_dataset("knn", toy)
    assert isinstance(gen.inner, KnnInterpolation) and gen.k == 100
    data = load_training_data(toy)
    trace = Trace(data.samples.obs[:20, :4] * 1.07, TOY_METRICS[:4])   # between samples, not on one
    plan = gen.generate(trace)
    plan.validate(catalog)
    # an average of 100 sparse compositions is denser than any one of them
    assert (plan.compositions > 1e-4).sum() > (data.samples.action[:20] > 1e-4).sum()


def test_single_stressor_duty_cycle_matches_per_core_cpu(toy, catalog):
    gen = from_dataset("single", toy)
    util = np.array([[0.2, 0.9], [0.0, 1.3], [np.nan, 0.5]], np.float32)
    trace = Trace(np.concatenate([util, np.ones((3, 2), np.float32)], axis=1), TOY_METRICS[:4])
    plan = gen.generate(trace)
    plan.validate(catalog)
    m = catalog.names.index(plan.provenance["stressor"])
    assert catalog.stressors[m].resource_class == "memory"
    assert np.allclose(plan.compositions[:, m, :], [[0.2, 0.9], [0.0, 1.0], [0.0, 0.5]])
    assert plan.compositions.sum() == pytest.approx(np.nansum(np.clip(util, 0, 1)))
    assert plan.provenance["nan_windows_set_idle"] == 1


def test_unknown_kind_and_foreign_trace_are_clear_errors(toy):
    with pytest.raises(Exception, match="unknown baseline 'best'"):
        from_dataset("best", toy)
    gen = from_dataset("nearest", toy)
    from mimesys.metrics import MetricSpec
    with pytest.raises(Exception, match="none of the dataset's metrics"):
        gen.generate(Trace(np.ones((3, 1), np.float32), [MetricSpec("gpu.util", "fraction")]))


def test_single_plans_without_loading_pytorch_or_sklearn(toy, catalog, tmp_path):
    """`mimesys evaluate` may run on the test host beside the replays it measures: resolving and
    running the `single` baseline there must not load PyTorch (some 300 MB of memory every replay
    would show) or scikit-learn. A fresh interpreter: this one may have loaded both already."""
    import subprocess
    import sys
    code = (
        "import sys, numpy as np\n"
        "from controller.commands.evaluate import resolve_method\n"
        "from controller.model.data import load_training_data\n"
        "from mimesys.trace import Trace\n"
        "from test_model_toydata import TOY_METRICS\n"
        f"ds = {str(toy)!r}\n"
        "name, gen = resolve_method('single', ds)\n"
        "obs = load_training_data(ds).samples.obs[:4]\n"
        "gen.generate(Trace(np.concatenate([obs, np.full((4, 1), np.nan, np.float32)], axis=1), TOY_METRICS), seed=0)\n"
        "print(sorted(m for m in ('torch', 'sklearn') if m in sys.modules))\n")
    env = {**__import__("os").environ, "PYTHONPATH": str(Path(__file__).parent)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120,
                         cwd=Path(__file__).parent.parent)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "[]"
