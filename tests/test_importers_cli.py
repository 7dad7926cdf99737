"""`mimesys import`: a real file in, a trace and a report out; mapped onto a saved host; a
malformed file gives a one-line error naming file and line and writes nothing."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from mimesys.metrics import MetricSpec
from mimesys.trace import Trace
from controller.cli import main

from conftest import ROOT, SHARED_TRACES

FIX = ROOT / "tests" / "fixtures" / "importers"


@pytest.mark.skipif(not SHARED_TRACES.is_dir(), reason=f"shared traces directory {SHARED_TRACES} absent")
def test_import_real_trace_onto_saved_host(tmp_path):
    host = tmp_path / "host.json"
    host.write_text(json.dumps({
        "fingerprint": {"cpu": {"logical_cpus": 2}},
        "calibration": {"peaks": {"mem.bw_Bps": 1.0e10}},
        "schema": [MetricSpec(n, u).to_dict() for n, u in (("cpu.util.core0", "fraction"), ("cpu.util.core1", "fraction"),
                                                           ("cpu.util", "fraction"), ("mem.bw_Bps", "B/s"),
                                                           ("disk.write_Bps", "B/s"), ("psi.io.some", "fraction"))]}))
    out = tmp_path / "t.h5"
    r = CliRunner().invoke(main, ["import", str(SHARED_TRACES / "stats-num_vms_1_7.txt"), "--format", "tacc_stats",
                                  "-o", str(out), "--host", str(host), "--source-peak", "mem.bw_Bps=4e10",
                                  "--report-json", str(tmp_path / "r.json")])
    assert r.exit_code == 0, r.output
    assert "dropped:" in r.output and "mapped onto" in r.output and "x 0.25 (target peak" in r.output
    tr = Trace.read(out)
    assert tr.names == ["cpu.util.core0", "cpu.util.core1", "cpu.util", "mem.bw_Bps", "disk.write_Bps", "psi.io.some"]
    assert np.isnan(tr.column("psi.io.some")).all()
    rep = json.loads((tmp_path / "r.json").read_text())
    assert ["psi.io.some", "not in the source trace"] in rep["missing"]
    assert tr.provenance["import_report"]["source_format"] == "tacc_stats"


def test_import_fixture_without_host(tmp_path):
    out = tmp_path / "a.h5"
    r = CliRunner().invoke(main, ["import", str(FIX / "alibaba_machine_usage.csv"), "--format", "alibaba",
                                  "--machine", "m_1932", "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert Trace.read(out).T == 6


def test_malformed_file_writes_nothing(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("timestamp,cpu.util\n1,0.5\n2,oops\n")
    out = tmp_path / "t.h5"
    r = CliRunner().invoke(main, ["import", str(bad), "--format", "csv", "-o", str(out)])
    assert r.exit_code == 1
    assert f"{bad}:3: column 'cpu.util' is 'oops'" in r.output and "Traceback" not in r.output
    assert not out.exists() and list(tmp_path.iterdir()) == [bad]


def test_unknown_format_and_misplaced_option(tmp_path):
    r = CliRunner().invoke(main, ["import", str(FIX / "trace.csv"), "--format", "nope", "-o", str(tmp_path / "x.h5")])
    assert r.exit_code == 2 and "alibaba" in r.output
    r = CliRunner().invoke(main, ["import", str(FIX / "trace.csv"), "--format", "csv", "--machine", "m_1",
                                  "-o", str(tmp_path / "x.h5")])
    assert r.exit_code == 1 and "--machine does not apply to the csv format" in r.output
