"""Alignment plumbing that does not need a model: targets, segments, executed windows,
checkpoints and the command line's argument checks."""

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from mimesys.backend import ExecutedWindow
from mimesys.errors import ConfigError, TraceError
from mimesys.metrics import MetricSpec
from mimesys.trace import Trace
from controller.align.checkpoint import AlignState
from controller.align.executors import windows_to_values
from controller.align.targets import draw_segments, load_targets

MODEL_METRICS = ["cpu.util.core0", "cpu.util.core1", "mem.bw_Bps"]


def _trace(path, names, T=20, simulated=False):
    v = np.arange(T * len(names), dtype=np.float32).reshape(T, len(names))
    Trace(v, [MetricSpec(n, "x") for n in names], simulated=simulated).write(path)
    return path


def test_targets_map_onto_the_model_metrics(tmp_path):
    p = _trace(tmp_path / "a.h5", ["mem.bw_Bps", "cpu.util.core0", "disk.read_Bps"])
    (t,) = load_targets([p], MODEL_METRICS)
    assert t.values.shape == (20, 3) and t.name == "a.h5" and not t.simulated
    assert np.isnan(t.values[:, 1]).all()                 # the trace has no core1
    np.testing.assert_array_equal(t.values[:, 0], np.arange(20) * 3 + 1)
    q = _trace(tmp_path / "b.h5", ["net.tx_Bps"])
    with pytest.raises(TraceError, match="b.h5: none of the model's metrics.*net.tx_Bps"):
        load_targets([q], MODEL_METRICS)


def test_segments_stay_inside_their_trace_and_carry_context(tmp_path):
    targets = load_targets([_trace(tmp_path / "a.h5", MODEL_METRICS, T=20),
                            _trace(tmp_path / "b.h5", MODEL_METRICS, T=5)], MODEL_METRICS)
    segs = draw_segments(targets, 200, length=8, context=2, rng=np.random.default_rng(0))
    for s in segs:
        T = targets[s.trace].T
        assert 0 <= s.first and s.start + s.length <= T
        assert s.length == min(8, T) and s.context == min(2, s.start)
    assert {s.trace for s in segs} == {0, 1}
    again = draw_segments(targets, 200, length=8, context=2, rng=np.random.default_rng(0))
    assert again == segs


def test_executed_windows_average_repetitions_and_map_columns():
    schema = ["mem.bw_Bps", "cpu.util.core0"]             # the agent has no core1
    ws = [ExecutedWindow(rep, w, 0, np.array([10.0 * (w + 1) + rep, 0.5], np.float32))
          for rep in range(2) for w in range(3)]
    ws[0].values[1] = np.nan                               # one unmeasured sample
    v = windows_to_values(ws, schema, MODEL_METRICS, T=3)
    assert v.shape == (3, 3)
    np.testing.assert_allclose(v[:, 2], [10.5, 20.5, 30.5])
    np.testing.assert_allclose(v[:, 0], [0.5, 0.5, 0.5])
    assert np.isnan(v[:, 1]).all()
    with pytest.raises(ValueError, match="window index 3 outside the 3-window plan"):
        windows_to_values([ExecutedWindow(0, 3, 0, np.zeros(2, np.float32))], schema, MODEL_METRICS, T=3)


def test_checkpoint_round_trips_and_refuses_another_run(tmp_path):
    st = AlignState(3, {"w": torch.ones(2)}, {}, {"buffers": []}, [{"epoch": 1}],
                    torch.Generator().get_state(), np.random.default_rng(0).bit_generator.state,
                    {"lr": 1e-4, "epochs": 5}, {"path": "m", "sha256": "abc"}, ["a.h5"])
    st.save(tmp_path / "ck.pt")
    back = AlignState.load(tmp_path / "ck.pt")
    assert back.epoch == 3 and torch.equal(back.policy["w"], torch.ones(2))
    back.check_compatible(config={"lr": 1e-4, "epochs": 9}, base_model={"sha256": "abc"},
                          targets=["a.h5"], path="ck")      # more epochs: fine
    with pytest.raises(ConfigError, match="config differs.*'lr'"):
        back.check_compatible(config={"lr": 1e-3, "epochs": 5}, base_model={"sha256": "abc"},
                              targets=["a.h5"], path="ck")
    with pytest.raises(ConfigError, match="made from model"):
        back.check_compatible(config={"lr": 1e-4, "epochs": 5}, base_model={"sha256": "def", "path": "x"},
                              targets=["a.h5"], path="ck")
    (tmp_path / "bad.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(ConfigError, match="bad.pt: not a readable alignment checkpoint"):
        AlignState.load(tmp_path / "bad.pt")


def test_cli_refuses_bad_arguments_with_clear_messages(tmp_path):
    from controller.cli import main
    model = tmp_path / "model"
    model.mkdir()
    tr = _trace(tmp_path / "t.h5", MODEL_METRICS)
    r = CliRunner().invoke(main, ["align", str(model), "--traces", str(tr), "--out", str(tmp_path / "m2")])
    assert r.exit_code == 2 and "choose exactly one executor" in r.output
    r = CliRunner().invoke(main, ["align", str(model), "--sim", "--out", str(tmp_path / "m2")])
    assert r.exit_code == 2 and "at least one target trace" in r.output
    r = CliRunner().invoke(main, ["align", str(model), "--traces", str(tr), "--sim", "--out",
                                  str(tmp_path / "m2"), "--set", "lerning_rate=1"])
    assert r.exit_code == 1 and "unknown field(s) ['lerning_rate']" in r.output
    r = CliRunner().invoke(main, ["align", str(model), "--traces", str(tr), "--sim", "--out",
                                  str(tmp_path / "m2"), "--set", "eta=0"])
    assert r.exit_code == 1 and "eta=0" in r.output and "log-probability" in r.output
    assert not (tmp_path / "m2").exists()
