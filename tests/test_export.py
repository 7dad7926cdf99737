"""`mimesys export`: ONNX graphs + manifest, numerical parity with PyTorch (< 1e-4), and a
directory that is complete or absent."""

import json

import numpy as np
import onnxruntime as ort
import pytest
import torch
from click.testing import CliRunner

from controller.commands.export import export as export_cmd
from controller.export import PARITY_TOL, example_inputs, export_onnx
from controller.model.checkpoint import load_policy
from controller.model.config import ModelConfig
from test_model_toydata import train_toy_model


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory, catalog):
    return train_toy_model(tmp_path_factory.mktemp("exp"), catalog, samples=200, steps=30)[1]


def test_export_writes_graphs_and_a_complete_manifest(model_dir, tmp_path, catalog):
    out = CliRunner().invoke(export_cmd, [str(model_dir), "--onnx", str(tmp_path / "onnx")])
    assert out.exit_code == 0, out.output
    m = json.loads((tmp_path / "onnx" / "manifest.json").read_text())
    assert m["catalog_names"] == catalog.names and m["catalog_hash"] == catalog.hash
    assert m["metric_names"] == ["cpu.util.core0", "cpu.util.core1", "mem.bw_Bps", "disk.write_Bps"]
    assert m["threads"] == 2 and m["stressors"] == len(catalog) and m["window_s"] == 1.0
    assert m["sampler"]["steps"] == ModelConfig().sample_steps and m["sampler"]["guidance"] == 2.0 and m["sampler"]["eta"] == 0.0
    assert len(m["sampler"]["alpha_bar"]) == 1000
    assert m["normalization"]["transform"] == ["identity", "identity", "log1p", "log1p"]
    assert m["training_host_fingerprint"] == {"toy": True, "cpus": 2} and m["simulated_training_data"] is True
    assert m["model"]["git_revision"] and m["model"]["sha256"].startswith("sha256:")
    assert m["graphs"]["onnxruntime_threads"] == 1
    for g in ("context_encoder", "denoiser", "sampler"):
        assert (tmp_path / "onnx" / m["graphs"][g]["file"]).is_file()
    assert max(m["parity"][k] for k in ("encoder_max_abs_diff", "denoiser_max_abs_diff", "sampler_max_abs_diff")) < PARITY_TOL


def test_denoiser_parity_with_pytorch_below_1e_4(model_dir, tmp_path):
    export_onnx(model_dir, tmp_path / "onnx")
    pol = load_policy(model_dir)
    sess = ort.InferenceSession(str(tmp_path / "onnx" / "denoiser.onnx"), providers=["CPUExecutionProvider"])
    worst = 0.0
    for seed in range(5):
        _, (x, t, h, g) = example_inputs(pol, B=4, seed=1000 + seed)
        x = x * 3   # also far from the training distribution
        with torch.no_grad():
            ref = pol.denoiser(x, t, h, g).numpy()
        out, = sess.run(None, {"x_t": x.numpy(), "t": t.numpy(), "thread_ctx": h.numpy(), "global_ctx": g.numpy()})
        worst = max(worst, float(np.abs(out - ref).max()))
    assert worst < 1e-4


def test_export_refuses_to_clobber_and_leaves_nothing_half_written(model_dir, tmp_path):
    (tmp_path / "onnx").mkdir()
    (tmp_path / "onnx" / "keep.txt").write_text("x")
    out = CliRunner().invoke(export_cmd, [str(model_dir), "--onnx", str(tmp_path / "onnx")])
    assert out.exit_code != 0 and "--overwrite" in out.output
    assert (tmp_path / "onnx" / "keep.txt").exists()
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"junk")
    out = CliRunner().invoke(export_cmd, [str(bad), "--onnx", str(tmp_path / "o2")])
    assert out.exit_code != 0 and "not a readable model file" in out.output and "Traceback" not in out.output
    assert not (tmp_path / "o2").exists() and not list(tmp_path.glob(".o2.*"))
