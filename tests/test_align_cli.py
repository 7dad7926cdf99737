"""`mimesys align` end to end on simulated agents: writes a model file the model room's
loader reads, resumes, and refuses bad input without leaving anything behind."""

import json

import numpy as np
import torch
from click.testing import CliRunner

from mimesys.catalog import load_catalog
from controller.cli import main
from controller.model.checkpoint import load_policy, read_checkpoint, save_checkpoint
from test_align_loop import target_trace, tiny_model
from test_exit_status import separate_streams


def _model_dir(tmp_path):
    model = tiny_model(load_catalog())
    weights = model.state_dict()
    save_checkpoint(tmp_path / "model" / "model.pt", {
        "spec": model.spec.to_dict(), "model_config": model.config.to_dict(),
        "normalizer": model.normalizer.to_dict(), "action_scale": model.action_scale.to_dict(),
        "weights": weights, "train_weights": weights})
    return tmp_path / "model"


def test_align_command_writes_a_loadable_aligned_model_and_resumes(tmp_path):
    model_dir = _model_dir(tmp_path)
    trace = target_trace(load_catalog(), tmp_path / "target.h5")
    out = tmp_path / "aligned"
    def args(epochs, *extra):
        return ["align", str(model_dir), "--traces", str(trace), "--sim", "--sim-agents", "2", "--out", str(out),
                "--epochs", str(epochs), "--set", "segments_per_epoch=2", "--set", "lr=1e-3", "--quiet", *extra]
    r = CliRunner().invoke(main, args(2))
    assert r.exit_code == 0, r.output
    assert "SIMULATED agents" in r.output and "reward: first epoch" in r.output

    aligned = read_checkpoint(out)
    rec = aligned["alignment"]
    assert rec["simulated"] is True and rec["epochs"] == 2 and rec["executor"] == "2 simulated agents"
    assert rec["base_model"]["sha256"] and rec["config"]["lr"] == 1e-3
    base, new = load_policy(model_dir), load_policy(out)
    assert new.spec == base.spec                             # same format, same model identity
    changed = [k for k, v in base.state_dict().items() if not torch.equal(v, new.state_dict()[k])]
    assert changed, "alignment did not change any weight"
    work = tmp_path / "aligned.align"
    assert (work / "reward_curve.png").stat().st_size > 10_000
    hist = json.loads((work / "history.json").read_text())
    assert hist["simulated"] is True and len(hist["history"]) == 2

    # the aligned model exports unchanged, and the export says it was aligned on simulated agents
    r = CliRunner().invoke(main, ["export", str(out), "--onnx", str(tmp_path / "onnx")])
    assert r.exit_code == 0, r.output
    manifest = json.loads((tmp_path / "onnx" / "manifest.json").read_text())
    assert manifest["model"]["alignment"]["simulated"] is True
    assert manifest["model"]["alignment"]["base_model"]["sha256"] == rec["base_model"]["sha256"]

    # same command with more epochs continues from the checkpoint (2 -> 3); --json: only the summary on stdout
    r = separate_streams().invoke(main, args(3, "--json"))
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["epochs"] == 3 and doc["simulated"] is True and doc["out"] == str(out / "model.pt")
    assert doc["work_dir"] == str(work) and "aligned model:" in r.stderr
    assert [h["epoch"] for h in json.loads((work / "history.json").read_text())["history"]] == [1, 2, 3]
    # a changed config does not silently continue the old run
    r = CliRunner().invoke(main, args(3, "--set", "kl_coef=0.5"))
    assert r.exit_code == 1 and "config differs" in r.output and "kl_coef" in r.output


def test_align_command_rejects_traces_without_the_models_metrics(tmp_path):
    from mimesys.metrics import MetricSpec
    from mimesys.trace import Trace
    model_dir = _model_dir(tmp_path)
    Trace(np.ones((5, 1), np.float32), [MetricSpec("gpu.util", "fraction")]).write(tmp_path / "gpu.h5")
    r = CliRunner().invoke(main, ["align", str(model_dir), "--traces", str(tmp_path / "gpu.h5"), "--sim",
                                  "--out", str(tmp_path / "out")])
    assert r.exit_code == 1 and "gpu.h5: none of the model's metrics" in r.output
    assert not (tmp_path / "out").exists()
    r = CliRunner().invoke(main, ["align", str(tmp_path), "--traces", str(tmp_path / "gpu.h5"), "--sim",
                                  "--out", str(tmp_path / "out")])
    assert r.exit_code == 1 and "no model file" in r.output
