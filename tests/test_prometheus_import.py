"""The Prometheus importer's PSI mapping and paging, and replay's textfile, without servers
(tests/test_prometheus_server.py runs them against real Prometheus and node_exporter)."""

import json
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from prometheus_client.parser import text_string_to_metric_families

from controller.importers.prometheus import load_answers, pages

ROOT = Path(__file__).resolve().parent.parent


def answer(series):
    return {"status": "success", "data": {"resultType": "matrix", "result": [
        {"metric": {"__name__": name, "instance": "h:9100", **labels}, "values": [[t, str(v)] for t, v in vals]}
        for name, labels, vals in series]}}


def test_psi_counters_become_the_fraction_of_each_window_stalled():
    doc = answer([
        ("node_pressure_io_waiting_seconds_total", {}, [(0, 10.0), (1, 10.25), (2, 11.25), (3, 11.25)]),
        ("node_pressure_io_stalled_seconds_total", {}, [(0, 5.0), (1, 5.125), (2, 5.5), (3, 5.5)]),
        ("node_pressure_cpu_waiting_seconds_total", {}, [(0, 1.0), (1, 1.5), (2, 2.0), (3, 2.5)]),
        ("node_pressure_memory_stalled_seconds_total", {}, [(0, 0.0), (1, 0.0), (2, 0.0), (3, 0.0)]),
    ])
    trace, report = load_answers(doc, "test", window_s=1.0)
    col = {n: trace.values[:, i] for i, n in enumerate(trace.names)}
    np.testing.assert_allclose(col["psi.io.some"], [0.25, 1.0, 0.0])
    np.testing.assert_allclose(col["psi.io.full"], [0.125, 0.375, 0.0])
    np.testing.assert_allclose(col["psi.cpu.some"], [0.5, 0.5, 0.5])
    np.testing.assert_allclose(col["psi.memory.full"], [0.0, 0.0, 0.0])
    assert "node_pressure_io_waiting_seconds_total" in json.dumps(report.to_dict())


def test_pages_cover_the_range_once_and_stay_under_the_point_limit():
    ps = pages(100.0, 130.0, 1.0, page_points=7)
    times = [t for a, b in ps for t in np.arange(a, b + 0.5, 1.0)]
    assert times == list(np.arange(100.0, 131.0, 1.0))           # every step once, no overlap
    assert all((b - a) / 1.0 + 1 <= 7 for a, b in ps)
    assert pages(0, 0, 15) == [(0, 0)]
    with pytest.raises(ValueError, match="page_points"):
        pages(0, 10, 1, page_points=20_000)


def test_import_url_needs_its_range():
    out = subprocess.run([sys.executable, "-m", "controller.cli", "import", "--url", "http://127.0.0.1:9", "-o",
                          "/tmp/never.h5"], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert out.returncode != 0 and "--url needs --start, --end and --step" in out.stderr
    out = subprocess.run([sys.executable, "-m", "controller.cli", "import", "--url", "http://127.0.0.1:9",
                          "--start", "2026-01-01T00:00:00Z", "--end", "2026-01-01T00:01:00Z", "--step", "15s",
                          "-o", "/tmp/never.h5"], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert out.returncode != 0 and "no answer for" in out.stderr and "Traceback" not in out.stderr


def test_replay_textfile_is_always_whole_and_ends_with_the_final_state(tmp_path, catalog, monkeypatch):
    from mimesys.plan import Plan
    a = np.zeros((30, len(catalog), 2), np.float32)
    a[:, catalog.index("cpu_int_crc32"), :] = 0.5
    Plan.from_catalog(a, catalog, window_s=0.05).write(tmp_path / "p.h5")
    (tmp_path / "tf").mkdir()
    cfg = tmp_path / "agent.toml"
    cfg.write_text(f'[agent]\nbackend = "sim"\nstate_dir = "{tmp_path}/s"\nscratch_dir = "{tmp_path}/s/scratch"\n'
                   f'run_lock = "{tmp_path}/run.lock"\n')
    prom = tmp_path / "tf" / "mimesys_replay.prom"
    seen, stop = [], threading.Event()

    def reader():   # what node_exporter would do at each scrape: read and parse the whole file
        while not stop.is_set():
            if prom.exists():
                fams = {f.name: f for f in text_string_to_metric_families(prom.read_text())}
                seen.append(fams["mimesys_replay_windows_executed"].samples[0].value)
    t = threading.Thread(target=reader)
    t.start()
    try:
        out = subprocess.run([sys.executable, "-m", "agentd.cli", "replay", "--config", str(cfg), str(tmp_path / "p.h5"),
                              "--no-record", "--no-progress", "--textfile-dir", str(tmp_path / "tf")],
                             capture_output=True, text=True, cwd=ROOT, timeout=120,
                             env={**__import__("os").environ, "MIMESYS_SIM_SPEEDUP": "1", "MIMESYS_SIM_CPUS": "2"})
    finally:
        stop.set()
        t.join()
    assert out.returncode == 0, out.stderr
    assert seen and seen == sorted(seen) and max(seen) == 30   # every read parsed; the count only grows
    fams = {f.name: f for f in text_string_to_metric_families(prom.read_text())}
    state = {s.labels["mimesys_replay_state"]: s.value for s in fams["mimesys_replay_state"].samples}
    assert state == {"running": 0, "done": 1, "failed": 0, "interrupted": 0}
    assert fams["mimesys_replay_active"].samples[0].value == 0
    assert sorted(p.name for p in (tmp_path / "tf").iterdir()) == ["mimesys_replay.prom"]
    out = subprocess.run([sys.executable, "-m", "agentd.cli", "replay", "--config", str(cfg), str(tmp_path / "p.h5"),
                          "--no-record", "--textfile-dir", str(tmp_path / "missing")],
                         capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert out.returncode != 0 and "--textfile-dir" in out.stderr and "not a directory" in out.stderr


# -- issue 22: validated ranges, bounded and checked pages ----------------------------------
@pytest.mark.parametrize("start,end,step", [(0, 10, float("nan")), (1.7e9, 1.7e9 + 10, 1e-12), (0, float("inf"), 1),
                                             (float("nan"), 10, 1), (0, 1e9, 0.01)])
def test_pages_refuse_ranges_that_never_end_or_never_fit(start, end, step):
    with pytest.raises(ValueError, match="step >=|samples per series"):
        pages(start, end, step)


@pytest.mark.parametrize("opt,value", [("--step", "nan"), ("--step", "1e-12"), ("--step", "inf"),
                                       ("--start", "nan"), ("--end", "inf")])
def test_import_url_refuses_a_step_or_time_that_would_page_forever(opt, value):
    from click.testing import CliRunner
    from controller.cli import main
    args = {"--start": "1700000000", "--end": "1700000060", "--step": "15"}
    args[opt] = value
    r = CliRunner().invoke(main, ["import", "--url", "http://127.0.0.1:9", *[x for kv in args.items() for x in kv],
                                  "-o", "/tmp/never.h5"])
    assert r.exit_code != 0 and opt in r.output and "Traceback" not in r.output, r.output


def _serve(handler_body):
    import http.server

    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):       # noqa: N802
            body = handler_body(self.path)
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, f"http://127.0.0.1:{srv.server_address[1]}"


def test_fetch_joins_pages_and_refuses_oversized_or_malformed_answers(monkeypatch):
    import urllib.parse

    import controller.importers.prometheus as prom
    from controller.importers.base import TraceImportError
    mode = {"kind": "ok"}

    def body(path):
        q = urllib.parse.parse_qs(urllib.parse.urlsplit(path).query)
        a, b, step = float(q["start"][0]), float(q["end"][0]), float(q["step"][0])
        ts = np.arange(a, b + step / 2, step)
        if mode["kind"] == "malformed":
            return json.dumps({"status": "success", "data": {"resultType": "matrix", "result": [7]}}).encode()
        if mode["kind"] == "huge":
            return b'{"status": "success", "data": {"result": []}, "pad": "' + b"x" * 4096 + b'"}'
        return json.dumps(answer([("node_context_switches_total", {}, [(t, 100 * t) for t in ts])])).encode()
    srv, url = _serve(body)
    try:
        tr, _ = prom.fetch(url, 1000.0, 1060.0, 1.0, page_points=7)
        assert tr.T == 60 and np.allclose(tr.column("perf.ctx_switches_per_s"), 100)
        mode["kind"] = "malformed"
        with pytest.raises(TraceImportError, match=r"result 0: not a series"):
            prom.fetch(url, 1000.0, 1060.0, 1.0)
        mode["kind"] = "huge"
        monkeypatch.setattr(prom, "MAX_PAGE_BYTES", 1024)
        with pytest.raises(TraceImportError, match=r"exceeds 1024 bytes"):
            prom.fetch(url, 1000.0, 1060.0, 1.0)
    finally:
        srv.shutdown()
        srv.server_close()


def test_fetch_is_bounded_by_what_it_keeps_over_every_page_and_by_series_times_grid(monkeypatch):
    """A server that answers page after page of many series is refused as the samples pile up,
    and an answer of many series over a long grid before a grid-long column is made for each."""
    import urllib.parse

    import controller.importers.prometheus as prom
    from controller.importers.base import TraceImportError

    def body(path):
        q = urllib.parse.parse_qs(urllib.parse.urlsplit(path).query)
        a, b, step = float(q["start"][0]), float(q["end"][0]), float(q["step"][0])
        ts = np.arange(a, b + step / 2, step)
        return json.dumps(answer([("node_cpu_seconds_total", {"cpu": str(c), "mode": "user"}, [(t, t) for t in ts])
                                  for c in range(50)])).encode()
    srv, url = _serve(body)
    try:
        monkeypatch.setattr(prom, "MAX_FETCH_SAMPLES", 2000)
        with pytest.raises(TraceImportError, match=r"more than 2000 samples by \[1040.0, 1049.0\] \(50 series so far\)"):
            prom.fetch(url, 1000.0, 1100.0, 1.0, page_points=10)
        monkeypatch.setattr(prom, "MAX_FETCH_SAMPLES", 1 << 25)
        monkeypatch.setattr(prom, "MAX_IMPORT_CELLS", 1000)
        with pytest.raises(TraceImportError, match=r"50 series × 100 sample intervals = 5000 values, more than 1000"):
            prom.fetch(url, 1000.0, 1100.0, 1.0, page_points=10)
    finally:
        srv.shutdown()
        srv.server_close()
