"""Evaluation: normalized DTW (by hand on small series), results grouped by load level, and
the driver end to end against a real agent on 127.0.0.1 running the SIMULATED host backend.

The generator used here is a test generator (duty cycle of one CPU stressor matched to each
core's target utilization), written for this test because it needs no dataset; the product
methods (the ONNX model, the aligned model, controller/baselines/from_dataset.py) plug into the same
`generate(trace, *, seed) -> Plan` interface."""

from __future__ import annotations

import asyncio
import json
import math
import os
import socket
from pathlib import Path

import numpy as np
import pytest

from mimesys.metrics import Availability, MetricSpec
from mimesys.plan import Plan
from mimesys.trace import Trace
from controller.evaluate.dtw import compare, normalized_dtw
from controller.evaluate.report import EvaluationResults, load_level

from conftest import ROOT, SHARED_TRACES


def test_dtw_identical_is_zero_and_opposite_is_one():
    a = np.array([0.0, 0.5, 1.0, 0.5])
    assert normalized_dtw(a, a, unit="fraction").distance == 0.0
    assert normalized_dtw(np.zeros(5), np.ones(5), unit="fraction").distance == pytest.approx(1.0)


def test_dtw_by_hand():
    """target 0,0,1,1 vs executed 0,1,1,1 (fractions, scale 1).
    Free warping: the path (0,0),(1,0),(2,1),(3,2),(3,3) pairs equal values everywhere: D = 0, |P| = 5.
    Band 1 (no shift allowed): the diagonal pairs window 1's 0 with 1: D = sqrt(1) = 1, |P| = 4,
    d = 1/sqrt(4) = 0.5."""
    r = normalized_dtw([0, 0, 1, 1], [0, 1, 1, 1], unit="fraction", band=None)
    assert r.raw == 0.0 and r.path_len == 5 and r.distance == 0.0
    r = normalized_dtw([0, 0, 1, 1], [0, 1, 1, 1], unit="fraction", band=1)
    assert r.raw == pytest.approx(1.0) and r.path_len == 4 and r.distance == pytest.approx(0.5)


def test_dtw_scale_uses_peak_then_max():
    r = normalized_dtw([0, 5e9], [0, 2.5e9], unit="B/s", peak=1e10, band=1)
    # scaled 0, 0.5 vs 0, 0.25: sqrt((0.25^2)/2) = 0.1768
    assert r.scale_from == "peak" and r.distance == pytest.approx(math.sqrt(0.25 ** 2 / 2))
    r = normalized_dtw([0, 5e9], [0, 2.5e9], unit="B/s", band=1)
    assert r.scale_from == "max" and r.distance == pytest.approx(math.sqrt(0.5 ** 2 / 2))
    r = normalized_dtw([np.nan, 1.0], [0.5, 0.5], unit="fraction")
    assert math.isnan(r.distance) and "fewer than 2" in r.reason


def test_load_levels_and_summary(tmp_path):
    def tr(u):
        return Trace(np.full((4, 1), u, np.float32), [MetricSpec("cpu.util", "fraction")])
    assert [load_level(tr(u)) for u in (0.1, 0.3, 0.59, 0.6, 0.95)] == ["low", "mid", "mid", "high", "high"]
    res = EvaluationResults()
    for name, u, method in (("a", 0.1, "m"), ("b", 0.9, "m")):
        res.add(name, method, load_level(tr(u)), compare(tr(u), tr(u + 0.1), ["cpu.util"], band=2))
    s = res.summary()
    assert s["m"]["low"]["cpu.util"] == pytest.approx(0.1, abs=1e-6)
    assert s["m"]["all"]["MEAN"] == pytest.approx(0.1, abs=1e-6)
    paths = res.write(tmp_path)
    assert json.loads(paths["json"].read_text())["summary"]["m"]["high"]["cpu.util"] == pytest.approx(0.1, abs=1e-6)
    assert paths["csv"].read_text().splitlines()[0].startswith("trace,method,load_level,metric,dtw_normalized")


# -- end to end on a real agent (simulated host) ----------------------------------------------

class DutyCycleTestGenerator:
    """Test generator: thread k runs `cpu_int_crc32` for the target's cpu.util.core<k> of each window."""

    def __init__(self, catalog, threads: int, gain: float = 1.0):
        self.catalog, self.threads, self.gain = catalog, threads, gain

    def generate(self, trace: Trace, *, seed: int = 0) -> Plan:
        a = np.zeros((trace.T, len(self.catalog), self.threads), np.float32)
        m = self.catalog.index("cpu_int_crc32")
        for k in range(self.threads):
            name = f"cpu.util.core{k}"
            u = trace.column(name) if name in trace.names else trace.column("cpu.util")
            a[:, m, k] = np.clip(np.nan_to_num(u) * self.gain, 0, 1)
        return Plan.from_catalog(a, self.catalog, seed=seed, provenance={"by": "test duty-cycle generator"})


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def _start_sim_agent(tmp_path, cpus: int):
    from aiohttp import web

    from agentd.api import create_app
    from agentd.config import config_from_dict
    from mimesys.sim import SimBackend
    from mimesys.sim.backend import SimConfig

    token = "t" * 32
    tok = tmp_path / "token"
    tok.write_text(token)
    os.chmod(tok, 0o600)
    cfg = config_from_dict({"agent": {"backend": "sim", "state_dir": str(tmp_path / "state"),
                                      "scratch_dir": str(tmp_path / "scratch")},
                            "api": {"token_file": str(tok), "bind": "127.0.0.1", "port": 0}})
    backend = SimBackend(SimConfig(n_cpus=cpus, noise=0.0))
    app = create_app(cfg, backend)
    runner = web.AppRunner(app)
    await runner.setup()
    port = _free_port()
    site = web.TCPSite(runner, "127.0.0.1", port)
    await site.start()
    return runner, f"http://127.0.0.1:{port}", token


@pytest.mark.skipif(not SHARED_TRACES.is_dir(), reason=f"shared traces directory {SHARED_TRACES} absent")
def test_driver_end_to_end_on_simulated_agent(tmp_path, catalog):
    from controller.evaluate.driver import EvalOptions, evaluate
    from controller.fleet import AgentClient
    from controller.importers import get

    imported, _ = get("tacc_stats").load(SHARED_TRACES / "stats-num_vms_1_7.txt")
    low = Trace(np.full((20, 2), 0.1, np.float32), [MetricSpec("cpu.util.core0", "fraction"),
                                                     MetricSpec("cpu.util.core1", "fraction")])

    async def main():
        runner, url, token = await _start_sim_agent(tmp_path, cpus=2)
        client = AgentClient(url, token)
        try:
            methods = {"duty": DutyCycleTestGenerator(catalog, 2), "half-duty": DutyCycleTestGenerator(catalog, 2, 0.5)}
            return await evaluate({"num_vms_1_7": imported, "flat10": low}, methods, client,
                                  EvalOptions(outdir=tmp_path / "eval", band=5, plots=True))
        finally:
            await client.close()
            await runner.cleanup()

    res = asyncio.run(main())
    assert res.meta["simulated"] is True
    assert not [r for r in res.runs if "error" in r], res.runs
    s = res.summary()
    # the full duty cycle follows the target's CPU better than half of it, on both targets
    assert s["duty"]["all"]["cpu.util"] < s["half-duty"]["all"]["cpu.util"]
    assert {r.load_level for r in res.rows} <= {"low", "mid", "high"}
    out = tmp_path / "eval"
    for f in ("results.json", "results.csv", "summary.csv", "num_vms_1_7.png", "flat10.png",
              "executed/num_vms_1_7__duty.h5", "plans/flat10__half-duty.h5"):
        assert (out / f).exists(), f
    ex = Trace.read(out / "executed/num_vms_1_7__duty.h5")
    assert ex.simulated and ex.T == imported.T
    # the overlays are drawn after the last replay, so their memory is in none of them
    last_replay = max(f.stat().st_mtime_ns for f in (out / "executed").glob("*.h5"))
    assert min(f.stat().st_mtime_ns for f in out.glob("*.png")) > last_replay
    mapping = next(r["mapping"] for r in res.runs if r["trace"] == "num_vms_1_7")
    assert any("preserve-total" in src for src, _ in mapping["mapped"])
    assert next(r.load_level for r in res.rows if r.trace == "num_vms_1_7") == "low"   # on its own 20-core host

    # score again from the saved executed traces, CPU only, without the agent
    from controller.evaluate.driver import rescore
    again = rescore({"num_vms_1_7": imported, "flat10": low}, out, EvalOptions(outdir=out, band=5, metrics=("cpu.util",)))
    assert {r.metric for r in again.rows} == {"cpu.util"}
    assert again.summary()["duty"]["all"]["cpu.util"] == pytest.approx(s["duty"]["all"]["cpu.util"], rel=1e-6)


def test_evaluate_cli_errors_are_one_line(tmp_path):
    from click.testing import CliRunner

    from controller.cli import main
    r = CliRunner().invoke(main, ["evaluate"])
    assert r.exit_code == 1 and "needs at least one --trace and one --method, and an agent (--fleet FILE" in r.output
    t = tmp_path / "t.h5"
    Trace(np.zeros((3, 1), np.float32), [MetricSpec("cpu.util", "fraction")]).write(t)
    r = CliRunner().invoke(main, ["evaluate", "--agent", "http://127.0.0.1:9", "--trace", str(t), "--method", "bogus"])
    assert r.exit_code == 1 and "unknown baseline 'bogus'" in r.output
    r = CliRunner().invoke(main, ["evaluate", "--agent", "http://127.0.0.1:9", "--trace", str(t),
                                  "--method", f"model={tmp_path}"])
    assert r.exit_code == 1 and "is not a model directory (no manifest.json" in r.output
    r = CliRunner().invoke(main, ["evaluate", "colocation", "--app", "true", "--mix", "true",
                                  "--plan", str(tmp_path / "missing.h5")])
    assert r.exit_code == 2 and "does not exist" in r.output



def test_cli_evaluates_product_baselines_on_simulated_agent(tmp_path):
    """`mimesys evaluate` end to end with the real baselines (controller/baselines/from_dataset.py) built from a
    simulated dataset, against a real agent (simulated host) on 127.0.0.1."""
    from click.testing import CliRunner

    from controller.cli import main as cli
    from controller.dataset import simulated_dataset

    ds = tmp_path / "ds.h5"
    simulated_dataset(12, 8, repetitions=2, n_cpus=2, seed=3).write(ds)
    target = tmp_path / "target.h5"
    t = np.linspace(0, 1, 24, dtype=np.float32)
    Trace(np.stack([0.2 + 0.6 * t, 0.8 - 0.6 * t, 0.5 * np.ones_like(t)], axis=1),
          [MetricSpec("cpu.util.core0", "fraction"), MetricSpec("cpu.util.core1", "fraction"),
           MetricSpec("cpu.util", "fraction")]).write(target)

    async def main():
        runner, url, token = await _start_sim_agent(tmp_path, cpus=2)
        tok = tmp_path / "tok"
        tok.write_text(token)
        tok.chmod(0o600)
        try:
            return await asyncio.to_thread(
                CliRunner().invoke, cli, ["evaluate", "--agent", url, "--token-file", str(tok), "--trace", str(target),
                                          "--method", "nearest", "--method", "knn", "--method", "single",
                                          "--dataset", str(ds), "-o", str(tmp_path / "ev"), "--band", "3"])
        finally:
            await runner.cleanup()

    r = asyncio.run(main())
    assert r.exit_code == 0, r.output
    assert "SIMULATED host" in r.output
    doc = json.loads((tmp_path / "ev" / "results.json").read_text())
    assert set(doc["summary"]) == {"nearest", "knn", "single"}
    assert all(0 <= v["all"]["MEAN"] <= 1 for v in doc["summary"].values())
    assert (tmp_path / "ev" / "target.png").exists()


def test_added_activity_flags_what_the_target_left_idle():
    from controller.evaluate.added_activity import added_activity
    specs = [MetricSpec("net.lo.tx_Bps", "B/s"), MetricSpec("disk.read_Bps", "B/s"), MetricSpec("cpu.util", "fraction")]
    target = Trace(np.array([[1e3, 5e8, 0.5]] * 10, np.float32), specs)
    executed = Trace(np.array([[2e9, 4e8, 0.5]] * 10, np.float32), specs)
    got = added_activity(target, executed, [s.name for s in specs], peaks={"net.lo.tx_Bps": 4e9, "disk.read_Bps": 1e9})
    assert set(got) == {"net.lo.tx_Bps"}                    # disk was busy in the target; cpu matches
    assert got["net.lo.tx_Bps"]["executed_mean"] == pytest.approx(0.5)
    assert added_activity(target, target, [s.name for s in specs], peaks={"net.lo.tx_Bps": 4e9}) == {}


def test_added_activity_is_the_plans_only_where_a_stressor_of_it_drives_that_resource(catalog):
    """A plan of pure CPU cannot have put packets on a real interface or loopback: those go to
    the host's background; CPU above an idle target is the plan's; a plan running the loopback
    stressor did add loopback traffic."""
    from controller.evaluate.added_activity import added_activity, split_by_plan
    from mimesys.plan import Plan
    specs = [MetricSpec("net.rx_pps", "1/s"), MetricSpec("net.lo.tx_Bps", "B/s"), MetricSpec("cpu.util", "fraction")]
    target = Trace(np.array([[0.0, 0.0, 0.0]] * 10, np.float32), specs)
    executed = Trace(np.array([[40.0, 1e9, 0.5]] * 10, np.float32), specs)
    added = added_activity(target, executed, [s.name for s in specs], peaks={"net.lo.tx_Bps": 4e9})
    assert set(added) == {"net.rx_pps", "net.lo.tx_Bps", "cpu.util"}

    def plan_of(name):
        a = np.zeros((10, len(catalog), 1), np.float32)
        a[:, catalog.index(name), 0] = 0.5
        return Plan.from_catalog(a, catalog)
    by_plan, background = split_by_plan(added, plan_of("cpu_int_crc32"))
    assert set(by_plan) == {"cpu.util"} and set(background) == {"net.rx_pps", "net.lo.tx_Bps"}
    by_plan, background = split_by_plan(added, plan_of("net_tcp_loopback"))
    assert set(by_plan) == {"cpu.util", "net.lo.tx_Bps"} and set(background) == {"net.rx_pps"}


def test_default_scores_every_metric_the_target_carries_once():
    from controller.evaluate.driver import EvalOptions, scored_metrics
    specs = [MetricSpec(n, u) for n, u in (("cpu.util.core0", "fraction"), ("disk.read_Bps", "B/s"),
                                           ("disk.vda.read_Bps", "B/s"), ("net.lo.rx_Bps", "B/s"),
                                           ("net.eth0.rx_Bps", "B/s"), ("llc.miss_per_s", "1/s"))]
    specs[-1] = MetricSpec("llc.miss_per_s", "1/s", Availability.UNSUPPORTED, "no PMU")
    values = np.ones((4, len(specs)), np.float32)
    values[:, -1] = np.nan                                   # not measured: NaN, never 0
    tr = Trace(values, specs)
    assert scored_metrics(tr, EvalOptions(outdir=Path("."))) == ["cpu.util.core0", "disk.read_Bps", "net.lo.rx_Bps",
                                                                 "net.eth0.rx_Bps"]
    assert scored_metrics(tr, EvalOptions(outdir=Path("."), metrics=("paper",))) == ["disk.read_Bps"]


class FlatTestGenerator(DutyCycleTestGenerator):
    """Test generator: every window runs the target's mean utilization (right level, no rhythm)."""

    def generate(self, trace: Trace, *, seed: int = 0) -> Plan:
        plan = super().generate(trace, seed=seed)
        plan.compositions[:] = plan.compositions.mean(axis=0, keepdims=True)
        return plan


def test_burst_structure_is_scored_for_every_method(tmp_path, catalog):
    """A square-wave target: the duty-cycle method keeps its bursts and gaps, the flat one (same
    mean, no rhythm) does not; both are scored by the same code and the flat one scores worse."""
    from controller.evaluate.driver import EvalOptions, evaluate
    from controller.fleet import AgentClient

    wave = np.array(([0.9] * 3 + [0.05] * 5) * 4, np.float32)
    target = Trace(np.stack([wave, wave], axis=1),
                   [MetricSpec("cpu.util.core0", "fraction"), MetricSpec("cpu.util.core1", "fraction")])

    async def main():
        runner, url, token = await _start_sim_agent(tmp_path, cpus=2)
        client = AgentClient(url, token)
        try:
            methods = {"duty": DutyCycleTestGenerator(catalog, 2), "flat": FlatTestGenerator(catalog, 2)}
            return await evaluate({"wave": target}, methods, client, EvalOptions(outdir=tmp_path / "eval", band=3))
        finally:
            await client.close()
            await runner.cleanup()

    res = asyncio.run(main())
    assert not [r for r in res.runs if "error" in r], res.runs
    b = res.burst_summary()
    assert b["duty"]["all"] < 0.25 < b["flat"]["all"]
    doc = json.loads((tmp_path / "eval" / "results.json").read_text())
    assert set(doc["burst_summary"]) == {"duty", "flat"}
    rows = [r for r in doc["bursts"] if r["method"] == "duty" and r["resource"] == "cpu.util.core0"]
    assert {r["statistic"] for r in rows} == {"burst_s_median", "burst_s_p90", "idle_s_median", "idle_s_p90",
                                             "burst_consumption"}
    med = next(r for r in rows if r["statistic"] == "burst_s_median")
    assert med["target"] == pytest.approx(3.0)
    assert next(r for r in rows if r["statistic"] == "idle_s_median")["target"] == pytest.approx(5.0)
    assert all(r["burst_error"] is not None for r in doc["runs"])
    assert (tmp_path / "eval" / "bursts.csv").read_text().startswith("trace,method,load_level,resource,statistic")
    assert (tmp_path / "eval" / "wave.png").exists()
    assert "burst error" in res.render()
    # beside the DTW: the target's own scale, and windows with activity the target never had
    for r in doc["runs"]:
        assert set(r["own_scale"]) == {"mean", "per_core_cpu", "resource_mean", "per_metric"}
        assert isinstance(r["idle_windows_added"], dict)
    own = doc["own_scale_summary"]
    assert own["duty"]["resource_mean"] < own["flat"]["resource_mean"]
    assert "own scale" in res.render() and "added windows" in res.render()
