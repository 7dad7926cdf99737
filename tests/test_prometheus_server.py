"""A real Prometheus server (Debian's `prometheus` package) scraping a real agent during a run,
and node_exporter (Debian's `prometheus-node-exporter`) with an offline replay's textfile,
all on 127.0.0.1. Then the Prometheus importer reads the server back over HTTP in pages,
and the Grafana dashboard is checked against the series the server really has.

Skipped, saying why, where the two Debian packages are not installed (`make setup` installs
them as root)."""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import msgpack
import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
DASHBOARD = ROOT / "contrib" / "grafana" / "mimesys-dashboard.json"
TOKEN = "prom-test-run-token-0123456789"
METRICS_TOKEN = "prom-test-metrics-token-0123456789"
PROMETHEUS = shutil.which("prometheus")
NODE_EXPORTER = shutil.which("prometheus-node-exporter") or shutil.which("node_exporter")
RUNNER = (ROOT / "stressors" / "build" / "mimesys-runner").exists() or shutil.which("mimesys-runner")

# `mimesys-agent serve` with its run manager's counters starting at 10^7 windows and 2^40 done runs.
COUNTERS_PAST_TEN_MILLION = """
import sys
from agentd import cli, runs
_init = runs.RunManager.__init__
def _init_past_ten_million(self, *a, **kw):
    _init(self, *a, **kw)
    self.counters.windows_executed = 10**7
    self.counters.runs_by_state["done"] = 2**40
runs.RunManager.__init__ = _init_past_ten_million
sys.argv[0] = "mimesys-agent"
cli.main()
"""

needs_servers = pytest.mark.skipif(
    not (PROMETHEUS and NODE_EXPORTER),
    reason="Debian's prometheus and prometheus-node-exporter packages are not installed "
           "(apt-get install prometheus prometheus-node-exporter; `make setup` does it as root)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def secret(path: Path, text: str) -> Path:
    path.write_text(text + "\n")
    path.chmod(0o600)
    return path


def get_json(url: str, timeout=10):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return json.loads(r.read())


def query(prom: str, expr: str, at: float | None = None) -> list:
    q = {"query": expr, **({"time": repr(at)} if at else {})}
    ans = get_json(f"{prom}/api/v1/query?{urllib.parse.urlencode(q)}")
    assert ans["status"] == "success", ans
    return ans["data"]["result"]


def wait_for(pred, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.25)
    raise AssertionError(f"timed out waiting for {what}")


class Procs:
    def __init__(self):
        self.procs = []

    def start(self, args, log: Path, **kw):
        fh = log.open("w")
        p = subprocess.Popen(args, stdout=kw.pop("stdout", fh), stderr=fh, **kw)
        self.procs.append(p)
        return p

    def stop(self):
        for p in reversed(self.procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(15)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()


@needs_servers
@pytest.mark.skipif(not RUNNER, reason="mimesys-runner not built (make -C stressors)")
@pytest.mark.slow
def test_prometheus_scrapes_the_agent_during_a_run_and_the_importer_reads_it_back(tmp_path, catalog):
    from mimesys.plan import Plan
    procs = Procs()
    try:
        # -- the agent: real host backend, read-only metrics token ------------------------
        cfg = tmp_path / "agent.toml"
        cfg.write_text(f'[agent]\nstate_dir = "{tmp_path}/state"\nscratch_dir = "{tmp_path}/state/scratch"\n'
                       f'run_lock = "{tmp_path}/run.lock"\nscratch_budget_mib = 64\n'
                       f'[api]\ntoken_file = "{secret(tmp_path / "token", TOKEN)}"\nbind = "127.0.0.1"\nport = 0\n'
                       f'metrics_token_file = "{secret(tmp_path / "metrics-token", METRICS_TOKEN)}"\n')
        # The agent's counters start past 10^7 (and 2^40) so that the run below carries them over
        # 10_000_000 through the real server: exposition, scrape, TSDB and query API, all exact.
        agent = procs.start([sys.executable, "-c", COUNTERS_PAST_TEN_MILLION, "serve", "--config", str(cfg)],
                            tmp_path / "agent.log", stdout=subprocess.PIPE, text=True, cwd=ROOT)
        line = agent.stdout.readline()
        m = re.search(r"listening on http://(127\.0\.0\.1:\d+)", line)
        assert m, (tmp_path / "agent.log").read_text()
        agent_addr = m[1]
        # -- node_exporter with a textfile directory ----------------------------------------
        textdir = tmp_path / "textfile"
        textdir.mkdir()
        node_addr = f"127.0.0.1:{free_port()}"
        procs.start([NODE_EXPORTER, f"--web.listen-address={node_addr}", "--collector.disable-defaults",
                     "--collector.cpu", "--collector.pressure", "--collector.meminfo", "--collector.diskstats",
                     "--collector.netdev", "--collector.stat", "--collector.textfile",
                     f"--collector.textfile.directory={textdir}"], tmp_path / "node.log")
        # -- Prometheus: 1 s scrapes of both, the agent with its metrics token ------------
        prom_addr = f"127.0.0.1:{free_port()}"
        (tmp_path / "prometheus.yml").write_text(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\nscrape_configs:\n"
            f"  - job_name: mimesys\n    static_configs: [{{targets: ['{agent_addr}']}}]\n"
            f"    authorization: {{credentials_file: '{tmp_path / 'metrics-token'}'}}\n"
            f"  - job_name: node\n    static_configs: [{{targets: ['{node_addr}']}}]\n")
        procs.start([PROMETHEUS, f"--config.file={tmp_path / 'prometheus.yml'}",
                     f"--storage.tsdb.path={tmp_path / 'tsdb'}", f"--web.listen-address={prom_addr}"],
                    tmp_path / "prometheus.log")
        prom = f"http://{prom_addr}"
        wait_for(lambda: len([r for r in _safe_query(prom, "up == 1")]) == 2, 60,
                 "Prometheus to scrape the agent and node_exporter (logs: prometheus.log)")
        t0 = time.time()

        # -- a run on the agent: 16 windows of 0.5 s of real stressors ----------------------
        a = np.zeros((16, len(catalog), 2), np.float32)
        a[:, catalog.index("cpu_int_crc32"), :] = np.linspace(0.2, 0.9, 16)[:, None]
        plan = Plan.from_catalog(a, catalog, window_s=0.5)
        req = urllib.request.Request(f"http://{agent_addr}/v1/runs", method="POST",
                                     data=msgpack.packb({"plan": plan.to_wire(), "options": {"record": False}}),
                                     headers={"Authorization": f"Bearer {TOKEN}",
                                              "Content-Type": "application/msgpack"})
        with urllib.request.urlopen(req, timeout=30) as r:
            run_id = msgpack.unpackb(r.read())["run_id"]
        # Seen by Prometheus *during* the run:
        active = wait_for(lambda: _safe_query(prom, "mimesys_run_active == 1"), 30, "a scrape during the run")
        assert active[0]["metric"]["job"] == "mimesys"
        during = wait_for(lambda: _safe_query(prom, "mimesys_run_windows_done > 0 and mimesys_run_active == 1"), 30,
                          "progress scraped mid-run")
        assert 0 < float(during[0]["value"][1]) < 16
        wait_for(lambda: _safe_query(prom, "mimesys_run_windows_done == 16 and mimesys_run_active == 0"), 60,
                 f"run {run_id} to end in a scrape")
        # Counters past 10^7 come back exactly: 10^7 + the run's 16 windows, 2^40 + its 1 done run
        # (a %g exposition would have read 1e+07; a float32 anywhere would have lost the units).
        executed = query(prom, "mimesys_windows_executed_total")
        assert [r["value"][1] for r in executed] == [str(10**7 + 16)], executed
        done = query(prom, "mimesys_runs_total{state='done'}")
        assert [r["value"][1] for r in done] == [str(2**40 + 1)], done
        seg = query(prom, "mimesys_runner_segment_error_seconds_count")
        assert float(seg[0]["value"][1]) > 0    # the real runner reported its segments
        busy = query(prom, "mimesys_host_cpu_busy_ratio")
        assert len(busy) == 2 and all(0 <= float(r["value"][1]) <= 1 for r in busy)
        build = query(prom, "mimesys_build_info")
        assert build and build[0]["metric"]["version"]
        assert query(prom, "process_resident_memory_bytes{job='mimesys'}")

        # -- an offline replay, seen through node_exporter's textfile collector -------------
        # (an idle plan of the same 16 windows: what is checked is the textfile, not the load,
        # and the busy one cost ~9 CPU-s taken from the tests beside this one)
        idle = Plan.from_catalog(np.zeros_like(a), catalog, window_s=0.5)
        out = subprocess.run([sys.executable, "-m", "agentd.cli", "replay", "--config", str(cfg),
                              str(_write(idle, tmp_path / "plan.h5")), "--no-record", "--no-progress",
                              "--textfile-dir", str(textdir)], capture_output=True, text=True, timeout=120, cwd=ROOT)
        assert out.returncode == 0, out.stderr
        assert [p.name for p in textdir.iterdir()] == ["mimesys_replay.prom"]   # no temporary file left
        wait_for(lambda: _safe_query(prom, "mimesys_replay_windows_executed_total{job='node'} == 16"), 30,
                 "the replay's textfile in Prometheus")
        t1 = time.time()

        # -- the importer reads the server back: node_exporter series incl. PSI, in pages ---
        imported = tmp_path / "from-prometheus.h5"
        out = subprocess.run([sys.executable, "-m", "controller.cli", "import", "--url", prom,
                              "--start", repr(t0), "--end", repr(t1), "--step", "1", "--page-points", "5",
                              "--machine", node_addr, "-o", str(imported)],
                             capture_output=True, text=True, timeout=120, cwd=ROOT)
        assert out.returncode == 0, out.stderr
        from mimesys.trace import Trace
        tr = Trace.read(imported)
        assert tr.provenance["pages"] >= 3 and tr.window_s == 1.0
        assert tr.T >= int(t1 - t0) - 2
        names = set(tr.names)
        assert {"cpu.util.core0", "cpu.util.core1", "cpu.util"} <= names
        if Path("/proc/pressure/cpu").exists():
            assert {"psi.cpu.some", "psi.io.some", "psi.memory.some"} <= names
            assert np.nanmax(tr.values[:, tr.names.index("psi.cpu.some")]) <= 1.0
        # While the run was loading both CPUs, node_exporter saw them busy.
        assert np.nanmax(tr.values[:, tr.names.index("cpu.util")]) > 0.3

        # -- the dashboard names only series this server has --------------------------------
        have = set(get_json(f"{prom}/api/v1/label/__name__/values")["data"])
        used = dashboard_series()
        missing = sorted(n for n in used if n not in have)
        assert not missing, f"the dashboard queries series no scrape produced: {missing}"
    finally:
        procs.stop()


def _safe_query(prom, expr):
    try:
        return query(prom, expr)
    except OSError:
        return []


def _write(plan, path):
    plan.write(path)
    return path


def dashboard_series() -> set[str]:
    doc = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in doc["panels"] for t in p.get("targets", [])]
    exprs += [a["expr"] for a in doc["annotations"]["list"]]
    exprs += [v["definition"] for v in doc["templating"]["list"] if v.get("definition")]
    return {m for e in exprs for m in re.findall(r"\b((?:node|mimesys|process)_[A-Za-z0-9_]+)", e)}


def test_dashboard_loads_and_is_a_grafana_dashboard():
    doc = json.loads(DASHBOARD.read_text())
    assert doc["uid"] and doc["title"] and doc["schemaVersion"] >= 30
    ids = [p["id"] for p in doc["panels"]]
    assert len(ids) == len(set(ids))
    timeseries = [p for p in doc["panels"] if p["type"] == "timeseries"]
    assert timeseries and all(p["targets"] and p["datasource"]["uid"] == "${datasource}" for p in timeseries)
    assert all({"x", "y", "w", "h"} <= set(p["gridPos"]) for p in doc["panels"])
    # Runs and replays are annotations over the node_exporter panels.
    ann = {a["name"]: a["expr"] for a in doc["annotations"]["list"]}
    assert "mimesys_run_active" in ann["mimesys runs"] and "mimesys_replay_active" in ann["offline replays"]
    node_panels = [p for p in timeseries if any("node_" in t["expr"] for t in p["targets"])]
    assert len(node_panels) >= 5
    # Every mimesys series it queries is one the agent or the replay textfile exposes.
    agent_names = "".join(p.read_text() for p in sorted((ROOT / "agentd" / "prometheus").glob("*.py")))
    for name in sorted(n for n in dashboard_series() if n.startswith("mimesys_")):
        stem = re.sub(r"_(bucket|sum|count|total|info)$", "", name)
        stem = stem.replace("mimesys_host_", "")
        assert stem in agent_names, f"{name} is not exposed by agentd"
