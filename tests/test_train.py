"""`mimesys train`: the model file, loss-curve PNG, held-out validation, exact resume,
refusal to resume a different dataset, and DistributedDataParallel with gloo on CPU."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from controller.commands.train import train as train_cmd
from controller.model.checkpoint import load_policy, read_checkpoint
from controller.model.config import ModelConfig
from controller.train import TrainConfig, train
from test_model_toydata import write_toy_dataset

ROOT = Path(__file__).resolve().parent.parent
SMALL = ModelConfig(hidden=32, blocks=1)


def cfg(**kw):
    return TrainConfig(**{"steps": 40, "batch_size": 64, "eval_every": 20, "checkpoint_every": 20,
                          "warmup_steps": 5, "cpu_threads": 1, **kw})


@pytest.fixture(scope="module")
def toy_path(tmp_path_factory, catalog):
    return write_toy_dataset(tmp_path_factory.mktemp("toy") / "toy.h5", catalog, S=300)


def test_train_on_chosen_metrics_only(toy_path, tmp_path):
    """--metrics: the model conditions on the named metrics alone (the ones target traces will
    carry); the others are recorded as dropped, and an unknown name is a clear error."""
    r = CliRunner().invoke(train_cmd, [str(toy_path), "--out", str(tmp_path / "m"), "--steps", "20", "--hidden", "16",
                                       "--blocks", "1", "--threads", "1", "--quiet",
                                       "--metrics", "mem.bw_Bps, cpu.util.core0"])
    assert r.exit_code == 0, r.output
    ck = read_checkpoint(tmp_path / "m")
    assert [m["name"] for m in ck["spec"]["metrics"]] == ["cpu.util.core0", "mem.bw_Bps"]
    assert ck["dataset"]["dropped_metrics"]["disk.write_Bps"] == "not among the metrics asked for"
    assert ck["train_config"]["metrics"] == ("mem.bw_Bps", "cpu.util.core0")
    r = CliRunner().invoke(train_cmd, [str(toy_path), "--out", str(tmp_path / "n"), "--steps", "2", "--quiet",
                                       "--metrics", "mem.bw_Bps,net.nope"])
    assert r.exit_code != 0 and "net.nope" in r.output and "mem.bw_Bps" in r.output


def test_train_writes_a_self_contained_model(toy_path, tmp_path, catalog):
    res = train(toy_path, tmp_path / "m", cfg(), SMALL, progress=False)
    ck = read_checkpoint(tmp_path / "m")
    assert ck["step"] == 40 and ck["dataset"]["sha256"].startswith("sha256:")
    assert ck["spec"]["catalog_hash"] == catalog.hash and ck["spec"]["threads"] == 2
    assert [m["name"] for m in ck["spec"]["metrics"]][:2] == ["cpu.util.core0", "cpu.util.core1"]
    assert ck["git_revision"] != "" and ck["train_config"]["steps"] == 40 and ck["model_config"]["hidden"] == 32
    assert ck["dataset"]["val_samples"] == 30 and len(ck["history"]["val"]) == 2
    assert res.final_val_loss is not None and res.final_val_loss < 1.5
    assert (tmp_path / "m" / "loss_curve.png").read_bytes()[:4] == b"\x89PNG"
    pol = load_policy(tmp_path / "m")
    ctx = pol.context_from_numpy([[0.5, 0.5, 1e8, 1e5]], [[0.5, 0.5, 1e8, 1e5]], torch.zeros(1, pol.M, 2))
    with torch.no_grad():
        assert pol.sample(ctx).actions.shape == (1, pol.M, 2)


def test_resume_continues_exactly(toy_path, tmp_path):
    train(toy_path, tmp_path / "full", cfg(), SMALL, progress=False)
    train(toy_path, tmp_path / "part", cfg(), SMALL, progress=False, stop_at=20)
    with pytest.raises(Exception, match="--resume"):
        train(toy_path, tmp_path / "part", cfg(), SMALL, progress=False)
    train(toy_path, tmp_path / "part", cfg(), SMALL, resume=True, progress=False)
    a, b = read_checkpoint(tmp_path / "full"), read_checkpoint(tmp_path / "part")
    assert b["step"] == 40
    assert a["history"]["train"] == b["history"]["train"]      # the same batches, noise and lr
    for k in a["weights"]:
        assert torch.equal(a["weights"][k], b["weights"][k]), k


def test_resume_refuses_another_dataset(toy_path, tmp_path, catalog):
    train(toy_path, tmp_path / "m", cfg(steps=10), SMALL, progress=False)
    other = write_toy_dataset(tmp_path / "other.h5", catalog, S=100, seed=5)
    with pytest.raises(Exception, match="different dataset"):
        train(other, tmp_path / "m", cfg(), SMALL, resume=True, progress=False)


def test_cli_reports_bad_dataset_without_traceback(tmp_path):
    bad = tmp_path / "bad.h5"
    bad.write_bytes(b"not hdf5")
    out = CliRunner().invoke(train_cmd, [str(bad), "--out", str(tmp_path / "m"), "--quiet"])
    assert out.exit_code != 0 and f"{bad}: not a readable mimesys dataset" in out.output and "Traceback" not in out.output


@pytest.mark.slow
def test_ddp_two_processes_gloo_on_cpu(toy_path, tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
           "-m", "controller.train", str(toy_path), "--out", str(tmp_path / "ddp"), "--steps", "20",
           "--batch-size", "64", "--hidden", "32", "--blocks", "1", "--threads", "1", "--quiet"]
    out = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = [json.loads(x) for x in out.stdout.splitlines() if x.startswith("{")]
    assert len(lines) == 1 and lines[0]["steps"] == 20          # rank 0 reports, once
    ck = read_checkpoint(tmp_path / "ddp")
    assert ck["world_size"] == 2 and ck["step"] == 20


def test_training_metrics_go_to_tensorboard_when_it_is_installed(toy_path, tmp_path, monkeypatch):
    """With the optional tensorboard package, every metrics.jsonl scalar also goes to a
    SummaryWriter under <model dir>/tensorboard at its step (a stand-in writer records the
    calls: CI does not install tensorboard); without it, training needs nothing more."""
    import controller.train as train_mod
    calls, opened = [], []

    class Writer:
        def __init__(self, logdir):
            opened.append(logdir)

        def add_scalar(self, tag, value, step, walltime=None):
            calls.append((tag, step, value))

        def flush(self):
            pass

        def close(self):
            calls.append(("closed",))

    monkeypatch.setattr(train_mod, "tensorboard_writer", lambda logdir: Writer(logdir))
    train(toy_path, tmp_path / "m", cfg(steps=20, eval_every=10), SMALL, progress=False)
    assert opened == [tmp_path / "m" / "tensorboard"]
    lines = [json.loads(x) for x in (tmp_path / "m" / "metrics.jsonl").read_text().splitlines()]
    expected = [(k, r["step"], v) for r in lines for k, v in r.items() if k not in ("step", "time")]
    assert calls[:-1] == expected and calls[-1] == ("closed",)
    assert {t for t, *_ in expected} == {"train_loss", "lr", "val_loss"}
    monkeypatch.undo()
    if train_mod.tensorboard_writer(tmp_path / "tb") is None:          # the package is absent here
        train(toy_path, tmp_path / "n", cfg(steps=5, eval_every=5), SMALL, progress=False)
        assert (tmp_path / "n" / "metrics.jsonl").exists() and not (tmp_path / "n" / "tensorboard").exists()
