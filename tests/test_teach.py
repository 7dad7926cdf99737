"""The generator taught and steered by the forward model: taught samples (controller/teach.py),
their place in training, and the steered sampler (mimesys/planners/steer.py) on a real export.

The host here is the toy mapping of test_model_toydata (NOT a host, NOT the simulated host),
and the forward model is that mapping's exact first order: what is checked is the machinery —
that the teacher's plans reach their targets, that taught samples are counted and kept apart,
and that steering moves a trained model's plan toward its target — not fidelity on a host."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from mimesys.forward.firstorder import FirstOrder
from mimesys.forward.model import ForwardModel

sys.path.insert(0, str(Path(__file__).parent))
from test_model_toydata import TOY_METRICS, write_toy_dataset  # noqa: E402


def toy_forward(catalog) -> ForwardModel:
    """The toy mapping's first order for the real catalog: each stressor keeps its core busy,
    memory-class stressors move mem.bw_Bps, disk-class ones disk.write_Bps."""
    names = [m.name for m in TOY_METRICS if m.available]
    units = [m.unit for m in TOY_METRICS if m.available]
    M = len(catalog)
    R = np.zeros((M, len(names)))
    R[catalog.by_class("memory"), 2] = 1e9
    R[catalog.by_class("disk"), 3] = 2e8
    idle = np.array([0.0, 0.0, 1e6, 1e4])
    cap = np.array([1.0, 1.0, 4e9, 1e9])
    first = FirstOrder(names, units, list(catalog.names), [0, 1], idle, R, own=np.ones(M), other=np.zeros(M),
                       capacity=cap)
    return ForwardModel(first, np.where(first.fraction, 1.0, cap), catalog.hash, simulated=True)


def toy_dataset(path: Path, catalog, S: int):
    """The toy dataset as a Dataset (the dataset file's own format attributes added)."""
    import h5py

    from controller.dataset import Dataset
    from controller.dataset_h5 import FORMAT, SCHEMA_VERSION
    write_toy_dataset(path, catalog, S=S)
    with h5py.File(path, "a") as f:
        f.attrs["format"], f.attrs["schema_version"] = FORMAT, SCHEMA_VERSION
    return Dataset.read(path)


def write_forward(fm: ForwardModel, d: Path) -> Path:
    import json
    d.mkdir(parents=True, exist_ok=True)
    (d / "manifest.json").write_text(json.dumps(fm.manifest()))
    return d


def test_teach_appends_counted_samples_whose_plans_reach_their_targets(tmp_path, catalog):
    from controller.dataset import Dataset
    from controller.teach import TeachSettings, dataset_chains, teach

    ds = toy_dataset(tmp_path / "toy.h5", catalog, 120)
    fm = toy_forward(catalog)
    fdir = write_forward(fm, tmp_path / "fm")
    # the toy dataset is one chained plan: its samples join back into one chain
    chains = dataset_chains(ds, 4)
    assert len(chains) == 1 and chains[0][0].shape[0] == ds.S + 1
    out = teach(ds, fdir, settings=TeachSettings(synthetic=6, windows=30, seed=1), synthetic_out=tmp_path / "syn")
    taught = out.provenance["taught"]
    assert taught["measured_samples"] == ds.S and taught["teacher"] == "inverse"
    assert len(list((tmp_path / "syn").glob("synthetic-*.h5"))) == 6
    assert taught["by_target_kind"] == {"chain": ds.S, "trace": 0, "synthetic": 6 * 29}
    assert out.S == ds.S + taught["taught_samples"] and (out.source[:ds.S] == 0).all() and (out.source[ds.S:] == 1).all()
    assert np.array_equal(out.action[:ds.S], ds.action)                 # the measured samples as they were
    assert (out.action >= 0).all() and (out.action.sum(axis=1) <= 1 + 1e-5).all()
    # the teacher's plans reach what they were asked for (the toy model is linear: within a few %)
    t = out.source == 1
    pred = fm.predict(out.action[t].astype(np.float64))[0]
    cores = out.obs[t][:, :2]
    assert np.abs(pred[:, :2] - cores).mean() < 0.03
    # written and read back with its sources; teaching a taught dataset again is refused
    out.write(tmp_path / "taught.h5")
    back = Dataset.read(tmp_path / "taught.h5")
    assert np.array_equal(back.source, out.source) and back.summary()["taught_samples"] == taught["taught_samples"]
    with pytest.raises(Exception, match="already holds taught"):
        teach(back, fdir, settings=TeachSettings(synthetic=1, windows=5))


def test_held_out_split_keeps_measured_and_taught_apart_and_batches_take_the_asked_share(tmp_path, catalog):
    from controller.dataset import Dataset
    from controller.model.data import load_training_data
    from controller.teach import TeachSettings, teach
    from controller.train import _batch_indices

    ds = toy_dataset(tmp_path / "toy.h5", catalog, 100)
    teach(ds, write_forward(toy_forward(catalog), tmp_path / "fm"),
          settings=TeachSettings(synthetic=10, windows=21, chains=False)).write(
        tmp_path / "t.h5")
    data = load_training_data(tmp_path / "t.h5")
    train, val = data.split(0.1, seed=0)
    assert int((~val.taught()).sum()) == 10 and int(val.taught().sum()) == 20   # 10 % of each
    idx = _batch_indices(len(train), 64, 0, 0, 3, train.taught(), 0.25)
    assert int(train.taught()[idx].sum()) == 16
    assert np.array_equal(idx, _batch_indices(len(train), 64, 0, 0, 3, train.taught(), 0.25))   # resumable


@pytest.fixture(scope="module")
def taught_export(tmp_path_factory, catalog):
    """A small model trained on the toy dataset with taught samples, exported twice: plain and
    carrying the forward model."""
    from controller.dataset import Dataset
    from controller.export import export_onnx
    from controller.model.config import ModelConfig
    from controller.teach import TeachSettings, teach
    from controller.train import TrainConfig, train

    d = tmp_path_factory.mktemp("taught")
    fm = toy_forward(catalog)
    ds = toy_dataset(d / "toy.h5", catalog, 200)
    fdir = write_forward(fm, d / "fm")
    teach(ds, fdir, settings=TeachSettings(synthetic=8, windows=30)).write(d / "taught.h5")
    train(d / "taught.h5", d / "model", TrainConfig(steps=60, batch_size=64, warmup_steps=5, cpu_threads=1,
                                                    taught_share=0.5), ModelConfig(), progress=False)
    export_onnx(d / "model", d / "plain")
    export_onnx(d / "model", d / "steered", forward=fdir, steer_weight=1.0)
    return d, fm


def test_a_steered_export_lands_nearer_its_target_than_the_same_model_unsteered(taught_export, catalog):
    from mimesys.planners.registry import load_planner
    from mimesys.trace import Trace
    from controller.teach import synthetic_targets

    d, fm = taught_export
    values = synthetic_targets(fm, 1, 40, np.random.default_rng(7))[0]
    specs = [m for m in TOY_METRICS if m.name in fm.metric_names]
    trace = Trace(values.astype(np.float32), specs, simulated=True)

    def error(plan):
        pred = fm.predict_plan(plan.compositions)[0]
        return float(np.mean(np.abs(pred - values) / fm.scales))

    plain = load_planner(str(d / "plain")).generate(trace, seed=0)
    steered = load_planner(str(d / "steered")).generate(trace, seed=0)
    assert steered.provenance["steer"] == {"weight": 1.0, "inner_steps": 2, "finish": True, "support_share": 0.005,
                                           "warm_start": True, "iterations": 60, "refine_iterations": 30,
                                           "restrict": False}
    chosen = steered.provenance["steer_finish"]
    assert 0 < chosen["stressors_chosen_per_window"] <= chosen["stressors_allowed_per_window"]
    assert not steered.provenance["fused_graph"] and plain.provenance["steer"] is None
    # both name each core's busy fraction in the target for the runner to hold
    cores = trace.select([f"cpu.util.core{k}" for k in range(plain.K)])
    assert np.allclose(plain.core_busy_target, np.clip(cores, 0, 1)) and plain.provenance["core_busy_held"]
    assert steered.core_busy_target is not None
    assert error(steered) < 0.5 * error(plain), (error(steered), error(plain))
    # weight 0: the model's own sample, finished (CPU matched, byte rates capped): still nearer than plain
    from mimesys.planners.diffusion import load_generator
    finished = load_generator(d / "steered", steer_weight=0.0).generate(trace, seed=0)
    assert error(finished) <= error(plain) + 1e-6
    # select's pick among the model's candidates is finished by the same forward model
    from mimesys.planners.select import ForwardSelect
    picked = ForwardSelect(load_generator(d / "steered", steer_weight=0.0), fm, candidates=4).generate(trace, seed=0)
    assert picked.provenance["steer_finish"]["stressors_allowed_per_window"] > 0
    assert picked.core_busy_target is not None
    assert error(picked) < 0.5 * error(plain), (error(picked), error(plain))


def test_an_export_refuses_a_forward_model_of_another_catalog(taught_export, tmp_path):
    from mimesys.errors import ValidationError
    from controller.export import export_onnx
    from test_forward import toy_model

    d, _ = taught_export
    with pytest.raises(ValidationError, match="another catalog"):
        export_onnx(d / "model", tmp_path / "x", forward=write_forward(toy_model(), tmp_path / "fm"))


def test_ddpo_against_the_forward_model_aligns_and_says_its_rewards_were_predicted(taught_export, tmp_path):
    from click.testing import CliRunner

    from mimesys.trace import Trace
    from controller.cli import main
    from controller.model.checkpoint import read_checkpoint
    from controller.teach import synthetic_targets

    d, fm = taught_export
    values = synthetic_targets(fm, 1, 24, np.random.default_rng(3))[0]
    Trace(values.astype(np.float32), [m for m in TOY_METRICS if m.name in fm.metric_names],
          simulated=True).write(tmp_path / "target.h5")
    out = tmp_path / "aligned"
    r = CliRunner().invoke(main, ["align", str(d / "model"), "--traces", str(tmp_path / "target.h5"), "--forward",
                                  str(d / "fm"), "--out", str(out), "--epochs", "2", "--set", "segments_per_epoch=2",
                                  "--quiet"])
    assert r.exit_code == 0, r.output
    assert "PREDICTED by the forward model" in r.output
    rec = read_checkpoint(out)["alignment"]
    assert rec["simulated"] is False and "predicted, not executed" in rec["executor"] and rec["epochs"] == 2
    r = CliRunner().invoke(main, ["align", str(d / "model"), "--traces", str(tmp_path / "target.h5"), "--forward",
                                  str(d / "fm"), "--sim", "--out", str(tmp_path / "x")])
    assert r.exit_code == 2 and "exactly one executor" in r.output


def test_cap_to_target_holds_a_byte_rate_to_the_targets_level_in_busy_windows_too():
    from mimesys.activity import cap_quiet_metrics, cap_to_target

    names, units = ["disk.write_Bps", "cpu.util.core0"], ["B/s", "fraction"]
    response = np.array([[2e8, 0.2], [0.0, 1.0]])           # a writer (200 MB/s alone), a compute kernel
    idle, margins = np.array([1e4, 0.0]), np.array([1e6, np.nan])
    a = np.zeros((3, 2, 1))
    a[:, 0, 0] = [1.0, 0.5, 0.05]                            # would write 200, 100, 10 MB/s
    a[:, 1, 0] = 0.3
    target = np.array([[20e6, 0.5], [150e6, 0.5], [1e4, 0.5]])   # busy, busier than planned, idle
    capped, changed = cap_to_target(a, target, names, units, idle, margins, response)
    added = capped[:, 0, 0] * 2e8
    assert added[0] == pytest.approx(20e6 - 1e4 + 1e6) and added[1] == pytest.approx(100e6)   # under: untouched
    assert added[2] == pytest.approx(1e6)                  # idle: within the margin, as the quiet cap does
    assert (capped[:, 1, 0] == 0.3).all() and changed == 2
    quiet, _ = cap_quiet_metrics(a, target, names, units, idle, margins, response)
    assert quiet[0, 0, 0] == 1.0 and quiet[2, 0, 0] * 2e8 == pytest.approx(1e6)   # the quiet cap leaves busy ones
