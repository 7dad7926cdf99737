"""The scripting contract (mimesys/exitstatus.py): every row of the EXIT STATUS table is
produced by a real command, through the installed entry points' code (python -m ...cli), and
machine-readable output is only JSON on stdout."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from mimesys import exitstatus
from mimesys.plan import Plan

ROOT = Path(__file__).resolve().parent.parent
AGENT = [sys.executable, "-m", "agentd.cli"]
MIMESYS = [sys.executable, "-m", "controller.cli"]
ENV = {**os.environ, "MIMESYS_SIM_CPUS": "2", "MIMESYS_SIM_SPEEDUP": "0", "MIMESYS_TOKEN": "", "MIMESYS_FLEET": ""}


def plan_file(path: Path, catalog, threads=2, T=3, window_s=0.2) -> Path:
    a = np.zeros((T, len(catalog), threads), np.float32)
    a[:, catalog.index("cpu_int_crc32"), :] = 0.3
    Plan.from_catalog(a, catalog, window_s=window_s).write(path)
    return path


@pytest.fixture
def sim(tmp_path, catalog):
    cfg = tmp_path / "agent.toml"
    cfg.write_text(f'[agent]\nbackend = "sim"\nstate_dir = "{tmp_path}/state"\nscratch_dir = "{tmp_path}/scratch"\n')
    return cfg, plan_file(tmp_path / "p2.h5", catalog), plan_file(tmp_path / "p4.h5", catalog, threads=4)


def separate_streams() -> CliRunner:
    """A CliRunner whose .stdout is stdout alone (click 8.2+ always; 8.1, Debian 12's, on request)."""
    try:
        return CliRunner(mix_stderr=False)
    except TypeError:
        return CliRunner()


def run(cmd, **kw):
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, cwd=ROOT, env=ENV, timeout=120, **kw)


def test_the_table_is_the_documented_one():
    codes = [row[0] for row in exitstatus.TABLE]
    assert codes == ["0", "1", "2", "3", "4", "5", "128+N"]
    assert (exitstatus.OK, exitstatus.ERROR, exitstatus.USAGE, exitstatus.PARTIAL, exitstatus.WORKLOAD,
            exitstatus.DIVERGED, exitstatus.SIGNAL_BASE) == (0, 1, 2, 3, 4, 5, 128)
    assert exitstatus.status_of_wait(-9) == 137 and exitstatus.status_of_wait(7) == 7


def test_ok_error_and_usage_in_both_clis(sim, tmp_path):
    cfg, p2, _ = sim
    r = run(AGENT + ["replay", "--config", cfg, p2, "--no-record", "--", "true"])
    assert r.returncode == exitstatus.OK, r.stderr
    bad = tmp_path / "bad.h5"
    bad.write_bytes(b"not hdf5")
    r = run(AGENT + ["replay", "--config", cfg, bad])
    assert r.returncode == exitstatus.ERROR and "Error:" in r.stderr and "Traceback" not in r.stderr
    for cli in (AGENT, MIMESYS):
        r = run(cli + ["--no-such-option"])
        assert r.returncode == exitstatus.USAGE, r.stderr
    r = run(MIMESYS + ["train", str(bad), "--out", str(tmp_path / "m"), "--steps", "x"])
    assert r.returncode == exitstatus.USAGE and "--steps" in r.stderr
    # an error a command does not catch itself still gets one line and status 1
    r = run(MIMESYS + ["dataset", "info", str(bad)])
    assert r.returncode == exitstatus.ERROR and "Traceback" not in r.stderr, r.stderr


def test_replay_propagates_the_commands_failure_and_signal(sim):
    cfg, p2, _ = sim
    r = run(AGENT + ["replay", "--config", cfg, p2, "--no-record", "--", "sh", "-c", "exit 7"])
    assert r.returncode == 7 and "exit status 7" in r.stdout
    r = run(AGENT + ["replay", "--config", cfg, p2, "--no-record", "--", "sh", "-c", "kill -TERM $$"])
    assert r.returncode == 128 + signal.SIGTERM and "killed by signal 15 (SIGTERM)" in r.stdout, r.stdout


def test_replay_workload_failure_under_a_successful_command(tmp_path, catalog):
    """The runner dies mid-run (killed by exact parent and name), the command exits 0: status 4."""
    from runner_helpers import runner_or_skip
    runner_or_skip()
    cfg = tmp_path / "host.toml"   # the real host backend and runner; the scratch area does not exist yet
    cfg.write_text(f'[agent]\nstate_dir = "{tmp_path}/state"\nscratch_dir = "{tmp_path}/new/scratch"\n'
                   f'scratch_budget_mib = 64\nrun_lock = "{tmp_path}/run.lock"\n')
    plan = plan_file(tmp_path / "p1.h5", catalog, threads=1, T=20, window_s=0.25)
    kill = "sleep 1; pkill -KILL -P $PPID -x mimesys-runner; sleep 1; exit 0"
    r = run(AGENT + ["replay", "--config", cfg, plan, "--no-record", "--no-progress", "--", "sh", "-c", kill])
    assert r.returncode == exitstatus.WORKLOAD, r.stdout + r.stderr
    assert "state failed" in r.stdout and "exit status 0" in r.stdout
    assert not list((tmp_path / "new" / "replay").iterdir())   # its private scratch was created, then removed
    # a plan that cannot run here at all is the same status, with the way out named
    p4 = plan_file(tmp_path / "p4.h5", catalog, threads=(os.cpu_count() or 1) + 1)
    r = run(AGENT + ["replay", "--config", cfg, p4, "--no-record", "--", "true"])
    assert r.returncode == exitstatus.WORKLOAD and "--fold-threads" in r.stderr, r.stdout + r.stderr


def test_replay_interrupted_exits_128_plus_sigint(sim, catalog, tmp_path):
    cfg, _, _ = sim
    long = plan_file(tmp_path / "long.h5", catalog, T=200, window_s=0.5)
    env = {**ENV, "MIMESYS_SIM_SPEEDUP": "1"}
    proc = subprocess.Popen(AGENT + ["replay", "--config", str(cfg), str(long), "--no-record"], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(3)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGINT, out + err
    assert "interrupted" in out


def test_sigterm_to_the_demo_stops_its_agent_and_removes_its_temporary_directory(tmp_path):
    """`kill` (SIGTERM) mid-demo unwinds like ^C: status 143, the agent it started and the step
    it was running are stopped, the agent's temporary token, state and scratch are removed."""
    trace = tmp_path / "trace.txt"
    trace.write_text("")                                  # preflight asks only that it exists
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    proc = subprocess.Popen(MIMESYS + ["demo", "-o", str(tmp_path / "out"), "--trace", str(trace), "--json"],
                            cwd=ROOT, env={**ENV, "TMPDIR": str(tmp)}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    seen = []
    try:
        for line in proc.stderr:                          # the demo's steps, with --json, on stderr
            seen.append(line)
            if "$ mimesys-agent calibrate" in line:       # the agent is up and calibrate has started
                break
        agent_dirs = list(tmp.glob("mimesys-demo-agent-*"))
        assert len(agent_dirs) == 1, "".join(seen)
        time.sleep(1.0)
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    left = processes_naming(str(agent_dirs[0]))
    for pid in left:                                      # a failing test leaves nothing running either
        os.kill(pid, signal.SIGKILL)
    assert rc == 128 + signal.SIGTERM and not left, (rc, left, "".join(seen))
    assert not agent_dirs[0].exists()
    assert json.loads(proc.stdout.read())["ok"] is False  # the summary is still written


def processes_naming(text: str) -> dict[int, str]:
    """{pid: command line} of the processes whose command line contains `text`."""
    found = {}
    for p in Path("/proc").glob("[0-9]*"):
        try:
            cmdline = (p / "cmdline").read_bytes()
        except OSError:
            continue                                      # it exited while we looked
        if text.encode() in cmdline:
            found[int(p.name)] = cmdline.replace(b"\0", b" ").decode(errors="replace")
    return found


@pytest.mark.slow
def test_fleet_probe_with_an_agent_down_is_a_partial_failure(tmp_path):
    tok = tmp_path / "token"
    tok.write_text("exit-status-token-0123456789abcdef")
    tok.chmod(0o600)
    proc = subprocess.Popen([sys.executable, str(ROOT / "bench" / "sim_agents.py"), "--n", "1", "--token-file",
                             str(tok), "--state-dir", str(tmp_path / "agents"), "--speedup", "60"],
                            stdout=subprocess.PIPE, text=True, cwd=ROOT, env=ENV)
    try:
        url = json.loads(proc.stdout.readline())["urls"][0]
        fleet = tmp_path / "fleet.toml"
        fleet.write_text(f'[[agent]]\nname = "up"\nurl = "{url}"\ntoken_file = "token"\n'
                         f'[[agent]]\nname = "down"\nurl = "http://127.0.0.1:9"\ntoken_file = "token"\n')
        r = run(MIMESYS + ["fleet", "probe", "--fleet", fleet])
        assert r.returncode == exitstatus.PARTIAL, r.stdout + r.stderr
        assert "down: UNREACHABLE" in r.stdout and "unreachable: down" in r.stderr
        r = run(MIMESYS + ["fleet", "probe", "--fleet", fleet, "--agent", "up"])
        assert r.returncode == exitstatus.OK, r.stdout + r.stderr
        r = run(MIMESYS + ["fleet", "probe", "--fleet", fleet, "--agent", "down", "--json"])
        assert r.returncode == exitstatus.ERROR
        assert json.loads(r.stdout)[0]["agent"] == "down"   # --json: stdout is JSON even when failing
        # collect --json: stdout is one JSON document, nothing else
        camp = tmp_path / "camp"
        from controller.campaign.campaign import CampaignConfig
        camp.mkdir()
        (camp / "campaign.toml").write_text(CampaignConfig(round_size=8, chain_len=4, sweep_intensities=(1.0,),
                                                           pool=100, trees=8).to_toml())
        r = run(MIMESYS + ["collect", camp, "--rounds", "0", "--fleet", fleet, "--agent", "up", "--json"])
        assert r.returncode == 0, r.stderr
        doc = json.loads(r.stdout)
        assert doc["simulated"] is True and doc["rounds"][0]["round"] == 0 and doc["samples"] > 0
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(15)


def test_evaluate_exits_partial_when_some_runs_failed(monkeypatch, tmp_path, catalog):
    """The status comes from the runs' outcomes; the driver is replaced so the test needs no agent."""
    from controller.cli import main
    from controller.commands import evaluate as ev
    from controller.evaluate import driver
    from mimesys.metrics import MetricSpec
    from mimesys.trace import Trace

    class Results:
        meta = {"simulated": True}

        def __init__(self, runs):
            self.runs = runs

        def render(self):
            return "table"

    outcome = {}

    async def fake_eval(targets, gens, client, opts):
        return Results(outcome["runs"])

    class Client:
        async def close(self):
            pass

    monkeypatch.setattr(driver, "evaluate", fake_eval)
    monkeypatch.setattr(ev, "one_agent", lambda *a, **kw: Client())
    monkeypatch.setattr(ev, "resolve_method", lambda spec, ds: (spec, object()))
    tr = tmp_path / "t.h5"
    Trace(values=np.zeros((2, 1), np.float32), metrics=[MetricSpec("cpu.util.core0", "fraction")]).write(tr)
    args = ["evaluate", "--trace", str(tr), "--method", "m1", "--method", "m2", "-o", str(tmp_path / "e")]
    for runs, code in (([{"trace": "t", "method": "m1"}, {"trace": "t", "method": "m2"}], exitstatus.OK),
                       ([{"trace": "t", "method": "m1"}, {"trace": "t", "method": "m2", "error": "boom"}],
                        exitstatus.PARTIAL),
                       ([{"trace": "t", "method": "m1", "error": "x"}, {"trace": "t", "method": "m2", "error": "y"}],
                        exitstatus.ERROR)):
        outcome["runs"] = runs
        r = CliRunner().invoke(main, args)
        assert r.exit_code == code, (runs, r.output)
        r = separate_streams().invoke(main, args + ["--json"])
        assert r.exit_code == code and json.loads(r.stdout)["runs"] == runs, r.stdout


def test_training_divergence_is_a_clear_error_with_its_status(tmp_path, catalog):
    from test_model_toydata import write_toy_dataset
    ds = write_toy_dataset(tmp_path / "toy.h5", catalog, S=120)
    r = run(MIMESYS + ["train", ds, "--out", tmp_path / "m", "--steps", "30", "--hidden", "16", "--blocks", "1",
                       "--threads", "1", "--lr", "1e30", "--no-progress"])
    assert r.returncode == exitstatus.DIVERGED, r.stdout + r.stderr
    assert "training diverged at step" in r.stderr and "Traceback" not in r.stderr
    lines = (tmp_path / "m" / "metrics.jsonl").read_text().splitlines()
    assert lines and "train_loss" in json.loads(lines[0])


def test_json_output_is_only_json(sim, tmp_path, catalog):
    cfg, p2, _ = sim
    r = run(AGENT + ["record", "--config", cfg, "-o", tmp_path / "rec.h5", "--seconds", "1", "--interval", "0.5",
                     "--json", "--progress"])
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["windows"] == 2 and doc["simulated"] is True and "recorded 2 windows" in r.stderr
    # replay -- CMD: one line after the command ends; the command's own stdout goes to stderr
    r = run(AGENT + ["replay", "--config", cfg, p2, "-o", tmp_path / "r.h5", "--json", "--",
                     "sh", "-c", "echo printed-by-$0; exit 3", "cmd"])
    assert r.returncode == 3, r.stderr
    doc = json.loads(r.stdout)
    assert "printed-by-cmd" in r.stderr and "printed-by-cmd" not in r.stdout
    assert doc["command_exit_status"] == 3 and doc["exit_status"] == 3 and doc["state"] == "done"
    assert doc["trace"] == str(tmp_path / "r.h5") and doc["simulated"] is True and doc["windows"] >= 3
    assert "workload:" in r.stderr
    r = run(AGENT + ["replay", "--config", cfg, p2, "--no-record", "--repetitions", "2", "--json"])
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["windows"] == 6 and doc["trace"] is None and doc["command"] is None and doc["exit_status"] == 0
    # check-config: the verdict as JSON, on success and on failure alike (then status 1)
    token = tmp_path / "token"
    token.write_text("0123456789abcdef0123456789abcdef\n")
    token.chmod(0o600)
    good = tmp_path / "good.toml"
    good.write_text(cfg.read_text() + f'[api]\ntoken_file = "{token}"\n')
    r = run(AGENT + ["check-config", "--config", good, "--json"])
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["ok"] is True and doc["problems"] == [] and doc["config"]["agent"]["backend"] == "sim"
    r = run(AGENT + ["check-config", "--config", cfg, "--json"])   # no token file: loads, would not start
    assert r.returncode == exitstatus.ERROR and "Error:" in r.stderr
    doc = json.loads(r.stdout)
    assert doc["ok"] is False and doc["loads"] is True and "token_file" in doc["problems"][0]
    # tls fingerprint
    crt, key = tmp_path / "a.crt", tmp_path / "a.key"
    r = run(AGENT + ["tls", "init", "--cert", crt, "--key", key, "--san", "localhost", "--json"])
    assert r.returncode == 0, r.stderr
    made = json.loads(r.stdout)
    r = run(AGENT + ["tls", "fingerprint", crt, "--json"])
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == {"cert": str(crt), "sha256": made["sha256"]}
    from runner_helpers import runner_or_skip
    runner_or_skip()
    one = plan_file(tmp_path / "p1.h5", catalog, threads=1, T=2, window_s=0.1)
    r = run(AGENT + ["run-plan", one, "--cpus", "0", "--json"])
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["windows"] == 2 and doc["exit"] == "done" and "cpu_int_crc32" in r.stderr


def test_progress_bars_only_on_a_terminal():
    from mimesys.cliopts import show_progress

    class Stream:
        def __init__(self, tty):
            self.tty = tty

        def isatty(self):
            return self.tty
    assert show_progress(None, Stream(False)) is False
    assert show_progress(None, Stream(True)) is (os.environ.get("TERM") != "dumb")
    assert show_progress(True, Stream(False)) is True and show_progress(False, Stream(True)) is False


def test_controller_json_output_is_only_json(tmp_path, monkeypatch):
    """--json on the controller's commands that run in seconds: stdout is one JSON document
    (json.loads of all of it), messages go to stderr. align, dataset build and the two server
    clients are covered beside their own tests (test_align_cli, test_campaign, test_generate_server)."""
    from mimesys.metrics import MetricSpec
    from mimesys.trace import Trace
    from controller.cli import main
    from controller.commands import demo as demo_cmd

    cli = separate_streams()
    out = tmp_path / "a.h5"
    r = cli.invoke(main, ["import", str(ROOT / "tests" / "fixtures" / "importers" / "alibaba_machine_usage.csv"),
                          "--format", "alibaba", "--machine", "m_1932", "-o", str(out), "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["trace"] == str(out) and doc["windows"] == 6 and doc["report"]["source_format"] == "alibaba"
    assert "wrote" in r.stderr

    fleet = tmp_path / "fleet.toml"
    fleet.write_text('[[agent]]\nurl = "http://127.0.0.1:9"\nname = "a1"\n'
                     '[[agent]]\nurl = "https://h2:8443"\nname = "a2"\ntls_sha256 = "' + "ab" * 32 + '"\n')
    r = cli.invoke(main, ["fleet", "list", "--fleet", str(fleet), "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert [a["name"] for a in doc["agents"]] == ["a1", "a2"] and doc["allow_mixed_hosts"] is False
    assert doc["agents"][0]["tls"] == "none" and doc["agents"][1]["tls"] == "sha256"

    # evaluate rescore: an earlier run's executed trace scored again
    metrics = [MetricSpec("cpu.util.core0", "fraction"), MetricSpec("cpu.util.core1", "fraction")]
    target = tmp_path / "t.h5"
    Trace(np.full((8, 2), 0.5, np.float32), metrics).write(target)
    ev = tmp_path / "eval"
    (ev / "executed").mkdir(parents=True)
    Trace(np.full((8, 2), 0.4, np.float32), metrics, simulated=True).write(ev / "executed" / "t__m.h5")
    (ev / "results.json").write_text(json.dumps({"meta": {"simulated": True}, "runs": [{"trace": "t", "method": "m"}]}))
    r = cli.invoke(main, ["evaluate", "rescore", str(ev), "--trace", str(target), "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["outdir"] == str(ev) and [(x["trace"], x["method"]) for x in doc["runs"]] == [("t", "m")]
    assert "rescored" in r.stderr

    # evaluate colocation: the result document (its measurement is test_evaluate_colocation's)
    import controller.evaluate.colocation as coloc
    result = {"app": "true", "measure": "wall time (s)", "higher_is_better": False, "repeats": 1, "warmup_s": 0.0,
              "mix": "true", "plan": "p.h5", "plan_windows": 2, "plan_repetitions": 1, "replayed_on": "local",
              "alone": {"median": 1.0}, "with_mix": {"median": 1.5}, "with_plan": {"median": 1.4},
              "degradation_mix_pct": 50.0, "degradation_plan_pct": 40.0, "difference_pp": 10.0}

    async def fake_colocation(*a, **kw):
        return result
    monkeypatch.setattr(coloc, "colocation", fake_colocation)
    plan = tmp_path / "p.h5"
    plan.write_bytes(b"")
    r = cli.invoke(main, ["evaluate", "colocation", "--app", "true", "--mix", "true", "--plan", str(plan),
                          "-o", str(tmp_path / "c.json"), "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout) == {**result, "output": str(tmp_path / "c.json")}
    assert "difference 10.0 percentage points" in r.stderr

    # demo takes 20 minutes; its summary is the same whether a step fails or not: a failed preflight
    # (which names nothing of the older demo output it leaves in place)
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / demo_cmd.MARKER).write_text("")
    (tmp_path / "d" / "dataset.h5").write_bytes(b"")
    r = cli.invoke(main, ["demo", "--trace", str(tmp_path / "absent.txt"), "-o", str(tmp_path / "d"), "--json"])
    assert r.exit_code == exitstatus.ERROR
    doc = json.loads(r.stdout)
    assert doc["ok"] is False and doc["failed_step"] == "preflight" and "absent.txt" in doc["error"]
    assert doc["out"] == str((tmp_path / "d").resolve()) and "[1/14] preflight" in r.stderr
    assert doc["paths"] == {} and doc["mean_dtw"] is None
    # ... and a finished one's paths and mean DTW per trace and method
    d = demo_cmd.Demo(tmp_path / "done", demo_cmd.DemoSettings(), prepared=True)
    (d.out / "evaluation").mkdir(parents=True)
    (d.out / "dataset.h5").write_bytes(b"")
    (d.out / "evaluation" / "results.csv").write_text(
        "trace,method,metric,dtw_normalized\nt,knn,cpu.util,0.25\nt,knn,mem.bw_Bps,0.75\nt,model,cpu.util,\n")
    doc = json.loads(json.dumps(demo_cmd.demo_summary(d, ok=True)))
    assert doc["ok"] is True and doc["mean_dtw"] == {"t": {"knn": 0.5, "model": None}}
    assert doc["paths"]["dataset"] == str(d.out / "dataset.h5") and "model" not in doc["paths"]
