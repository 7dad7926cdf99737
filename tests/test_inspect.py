"""Looking at things: `trace info|csv|plot`, `plan show|to-json|from-json`, metric names and
units as HDF5 string datasets, the wall-clock start in traces, `record` writing as it goes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import h5py
import numpy as np
import pytest

from mimesys.catalog import load_catalog
from mimesys.errors import PlanError
from mimesys.plan import Plan
from agentd.planjson import dumps, from_json, to_json
from mimesys.trace import Trace

ROOT = Path(__file__).resolve().parent.parent
AGENT = [sys.executable, "-m", "agentd.cli"]
ENV = {**os.environ, "MIMESYS_SIM_CPUS": "2", "MIMESYS_SIM_SPEEDUP": "0"}


def run(*args, timeout=120):
    return subprocess.run(AGENT + [str(a) for a in args], capture_output=True, text=True, cwd=ROOT, env=ENV,
                          timeout=timeout)


@pytest.fixture
def sim_cfg(tmp_path):
    cfg = tmp_path / "agent.toml"
    cfg.write_text(f'[agent]\nbackend = "sim"\nstate_dir = "{tmp_path}/state"\nscratch_dir = "{tmp_path}/scratch"\n')
    return cfg


def test_a_hand_written_plan_round_trips(tmp_path, catalog):
    doc = {"window_s": 0.5, "seed": 7, "threads": [
        {"phases": [{"windows": 3, "run": {"cpu_int_crc32": 0.5}}, {"windows": 2, "run": {}},
                    {"windows": 1, "run": {"cpu_int_crc32": 0.3, catalog.stressors[1].name: 0.2}}]},
        {"phases": [{"windows": 6, "run": {"cpu_int_crc32": 0.25}}]}]}
    (tmp_path / "p.json").write_text(json.dumps(doc))
    r = run("plan", "from-json", tmp_path / "p.json", "-o", tmp_path / "p.h5")
    assert r.returncode == 0, r.stderr
    p = Plan.read(tmp_path / "p.h5")
    crc = catalog.index("cpu_int_crc32")
    assert (p.T, p.K, p.window_s, p.seed) == (6, 2, 0.5, 7)
    assert p.compositions[:3, crc, 0].tolist() == [0.5] * 3 and not p.compositions[3:5, :, 0].any()
    assert p.compositions[5, 1, 0] == np.float32(0.2)
    r = run("plan", "to-json", tmp_path / "p.h5")
    back = json.loads(r.stdout)
    assert back["threads"][0]["phases"] == doc["threads"][0]["phases"]      # merged phases, short decimals
    assert back["threads"][1]["phases"] == [{"windows": 6, "run": {"cpu_int_crc32": 0.25}}]
    assert r.stdout.count("\n") < 20            # one phase per line
    again = from_json(back, catalog)
    assert np.array_equal(again.compositions, p.compositions)
    r = run("plan", "show", tmp_path / "p.h5")
    assert r.returncode == 0 and "6 windows x 0.5 s, 2 thread(s), seed 7" in r.stdout
    assert "cpu_int_crc32" in r.stdout and " 0.333 " in r.stdout   # thread 0: 0.5*3 + 0.3 over 6 windows
    assert "made for: no host recorded" in r.stdout and "by: plan from-json" in r.stdout


def test_plan_show_names_the_planner_and_model_of_a_released_plan(tmp_path, catalog):
    a = np.zeros((2, len(catalog), 1), np.float32)
    prov = {"generator": "diffusion", "model_sha256": "sha256:e900643105c3634acddfd13ae6a9b08e",
            "model_git_revision": "322c8e8d6d71522098301db5346f9d49227fccf3"}
    fp = {"cpu": {"model": "Intel(R) Xeon(R) Processor", "logical_cpus": 2}}
    Plan.from_catalog(a, catalog, provenance=prov, host_fingerprint=fp).write(tmp_path / "g.h5")
    Plan.from_catalog(a, catalog, provenance={"generator": "knn"}).write(tmp_path / "k.h5")
    r = run("plan", "show", tmp_path / "g.h5")
    assert "made for: Intel(R) Xeon(R) Processor, 2 CPUs" in r.stdout, r.stdout + r.stderr
    assert "by: diffusion planner (model sha256:e900643105c3, revision 322c8e8d)" in r.stdout, r.stdout
    assert "by: knn planner\n" in run("plan", "show", tmp_path / "k.h5").stdout


@pytest.mark.parametrize("bad, message", [
    ({"threads": [{"phases": [{"windows": 2, "run": {"cpu_nope": 0.5}}]}]}, "threads[0].phases[0].run: unknown stressor 'cpu_nope'"),
    ({"threads": [{"phases": [{"windows": 2, "run": {"cpu_int_crc32": 1.5}}]}]}, "expected a fraction in [0, 1]"),
    ({"threads": [{"phases": [{"windows": 2}]}, {"phases": [{"windows": 3}]}]}, "threads[0] 2, threads[1] 3"),
    ({"threads": [{"phases": [{"windows": 0}]}]}, "threads[0].phases[0].windows: expected a positive integer"),
    ({"threads": [], "window_s": 1}, "threads must be a non-empty list"),
    ({"threads": [{"phases": [{"windows": 1}]}], "catalog_hash": "sha256:00"}, "is not this agent's catalog"),
    ({"threads": [{"phases": [{"windows": 1}]}], "extra": 1}, "unknown key(s) ['extra']"),
])
def test_a_bad_hand_written_plan_is_named_where(catalog, bad, message):
    with pytest.raises(PlanError) as e:
        from_json(bad, catalog)
    assert message in str(e.value)


def test_a_sum_above_one_is_refused(catalog):
    names = [s.name for s in catalog.stressors[:2]]
    with pytest.raises(PlanError, match=r"phases\[0\]\.run: fractions sum to 1\.2 > 1"):
        from_json({"threads": [{"phases": [{"run": {names[0]: 0.6, names[1]: 0.6}}]}]}, catalog)


def test_replay_trace_has_wall_clock_start_and_string_datasets_and_tools_show_it(tmp_path, sim_cfg, catalog):
    a = np.zeros((4, len(catalog), 2), np.float32)
    a[:, catalog.index("cpu_int_crc32"), :] = 0.4
    Plan.from_catalog(a, catalog, window_s=0.25).write(tmp_path / "p.h5")
    before = time.time()
    r = run("replay", "--config", sim_cfg, tmp_path / "p.h5", "-o", tmp_path / "r.h5", "--no-progress")
    assert r.returncode == 0, r.stderr
    tr = Trace.read(tmp_path / "r.h5")
    assert before - 1 < tr.started_unix_s < time.time()
    with h5py.File(tmp_path / "r.h5") as f:
        names = [x.decode() for x in f["metric_names"][:]]
        units = [x.decode() for x in f["metric_units"][:]]
    assert names == tr.names and units == [m.unit for m in tr.metrics]
    r = run("trace", "info", tmp_path / "r.h5", "--json")
    doc = json.loads(r.stdout)
    assert doc["windows"] == 4 and doc["simulated"] is True and doc["started_unix_s"] == tr.started_unix_s
    core0 = next(m for m in doc["metrics"] if m["name"] == "cpu.util.core0")
    assert core0["mean"] == pytest.approx(float(np.nanmean(tr.column("cpu.util.core0"))), rel=1e-6)
    r = run("trace", "info", tmp_path / "r.h5")
    assert "started: 20" in r.stdout and "[SIMULATED host]" in r.stdout
    r = run("trace", "csv", tmp_path / "r.h5")
    rows = r.stdout.splitlines()
    assert rows[0].startswith("window,start_s,cpu.util.core0") and len(rows) == 5
    pytest.importorskip("matplotlib")
    r = run("trace", "plot", tmp_path / "r.h5", "-o", tmp_path / "r.png")
    assert r.returncode == 0 and (tmp_path / "r.png").read_bytes()[:4] == b"\x89PNG"
    r = run("trace", "plot", tmp_path / "r.h5", "--all", "-o", tmp_path / "strip.png")
    assert r.returncode == 0 and (tmp_path / "strip.png").read_bytes()[:4] == b"\x89PNG"
    r = run("trace", "plot", tmp_path / "r.h5", "--metric", "no.such")
    assert r.returncode == 1 and "no metric(s) ['no.such']" in r.stderr


def test_record_writes_as_it_goes_and_survives_sigkill(tmp_path, sim_cfg):
    env = {**ENV, "MIMESYS_SIM_SPEEDUP": "1"}
    out = tmp_path / "rec.h5"
    proc = subprocess.Popen(AGENT + ["record", "--config", str(sim_cfg), "-o", str(out), "--seconds", "600",
                                     "--interval", "0.1", "--flush-every", "1", "--no-progress"],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        time.sleep(4)
        proc.send_signal(signal.SIGKILL)      # no chance to finish the file
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
    tr = Trace.read(out)
    assert tr.T >= 10, tr.T                    # what was flushed before the kill is there
    assert tr.provenance["complete"] is False and tr.started_unix_s is not None
    with h5py.File(out) as f:
        assert f["values"].chunks is not None and f["values"].maxshape == (None, len(tr.metrics))
    # a finished recording says so
    r = subprocess.run(AGENT + ["record", "--config", str(sim_cfg), "-o", str(tmp_path / "b.h5"), "--seconds", "1",
                                "--interval", "0.25", "--no-progress"], cwd=ROOT, env=ENV, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    b = Trace.read(tmp_path / "b.h5")
    assert b.T == 4 and b.provenance["complete"] is True and b.provenance["windows"] == 4


def test_dumps_is_json(catalog):
    a = np.zeros((2, len(catalog), 3), np.float32)
    a[0, 0, 2] = 0.125
    text = dumps(to_json(Plan.from_catalog(a, catalog)))
    assert json.loads(text)["threads"][2]["phases"][0] == {"windows": 1, "run": {catalog.stressors[0].name: 0.125}}


# A cursor move, a window title (OSC ... BEL), an 8-bit CSI and a bidirectional override.
HOSTILE = "\x1b[2J\x1b]0;owned\x07\x9b31m\u202e"


def test_printable_escapes_what_a_terminal_would_obey():
    from mimesys.terminal import printable
    assert printable("cpu.util é 中\u00a0x") == "cpu.util é 中\u00a0x"
    assert printable(HOSTILE) == "\\x1b[2J\\x1b]0;owned\\x07\\x9b31m\\u202e"
    assert printable("a\nb") == "a\\nb" and printable("a\nb\x1b", multiline=True) == "a\nb\\x1b"
    assert printable(7) == "7"


def test_plan_and_trace_strings_reach_the_terminal_escaped(tmp_path, sim_cfg, catalog):
    """Issue 41, finding 10: names, provenance and fingerprints from a plan or trace handed over
    were printed raw by `plan show`, `trace info` and `replay`."""
    from mimesys.metrics import MetricSpec
    a = np.zeros((2, len(catalog), 1), np.float32)
    a[:, catalog.index("cpu_int_crc32"), 0] = 0.3
    fp = {"simulated": True, "cpu_model": "cpu" + HOSTILE, "cores": 64, "memory_B": 2**40}
    Plan.from_catalog(a, catalog, window_s=0.2, provenance={"by": "by" + HOSTILE}, host_fingerprint=fp,
                      ).write(tmp_path / "p.h5")
    names = [n if n != "cpu_int_crc32" else n + HOSTILE for n in catalog.names]
    Plan(a, names, catalog.hash, window_s=0.2).write(tmp_path / "named.h5")
    Trace(values=np.zeros((2, 1), np.float32), metrics=[MetricSpec("m" + HOSTILE, "u" + HOSTILE)], window_s=1.0,
          provenance={"kind": "k" + HOSTILE}).write(tmp_path / "t.h5")
    outs = [run("plan", "show", tmp_path / "p.h5"), run("plan", "show", tmp_path / "named.h5"),
            run("trace", "info", tmp_path / "t.h5"),
            run("replay", "--config", sim_cfg, tmp_path / "p.h5", "--no-record"),            # warning
            run("replay", "--config", sim_cfg, tmp_path / "p.h5", "--no-record", "--strict"),  # error
            run("replay", "--config", sim_cfg, tmp_path / "named.h5", "--no-record")]         # error
    for r in outs:
        text = r.stdout + r.stderr
        assert not any(c in text for c in "\x1b\x07\x9b\u202e"), repr(text)
    escaped = "\\x1b[2J\\x1b]0;owned\\x07\\x9b31m\\u202e"
    assert f"by: by{escaped}" in outs[0].stdout and f"made for: cpu{escaped}, 64 CPUs" in outs[0].stdout
    assert f"cpu_int_crc32{escaped}" in outs[1].stdout
    assert f"kind: k{escaped}" in outs[2].stdout and f"m{escaped}" in outs[2].stdout
    assert f"u{escaped}" in outs[2].stdout
    assert outs[3].returncode == 0 and f"cpu_model: cpu{escaped} (plan)" in outs[3].stderr, outs[3].stderr
    assert outs[4].returncode == 1 and f"cpu_model: cpu{escaped} (plan)" in outs[4].stderr, outs[4].stderr
    assert outs[5].returncode != 0 and "\\x1b" in outs[5].stdout + outs[5].stderr, outs[5].stdout
