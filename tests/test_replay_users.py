"""Offline replay for the people who use it: folding threads onto fewer CPUs, the hardware
check (warning, --strict refusal), --run-as for the wrapped command, --via-agent handing the
plan to the local daemon, and the run lock usable by its group."""

from __future__ import annotations

import os
import pwd
import re
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from agentd.fold import fold_threads
from mimesys.plan import Plan
from mimesys.trace import Trace

ROOT = Path(__file__).resolve().parent.parent
AGENT = [sys.executable, "-m", "agentd.cli"]
ENV = {**os.environ, "MIMESYS_SIM_CPUS": "2", "MIMESYS_SIM_SPEEDUP": "0", "MIMESYS_TOKEN": ""}


def plan(catalog, fractions, window_s=0.2, **kw) -> Plan:
    """fractions [T, K] of cpu_int_crc32, plus 0.1 of mem_stream on thread 0."""
    fr = np.asarray(fractions, np.float32)
    a = np.zeros((fr.shape[0], len(catalog), fr.shape[1]), np.float32)
    a[:, catalog.index("cpu_int_crc32"), :] = fr
    return Plan.from_catalog(a, catalog, window_s=window_s, **kw)


def run(cmd, env=ENV, **kw):
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, cwd=ROOT, env=env, timeout=120,
                          **kw)


@pytest.fixture
def sim_cfg(tmp_path):
    cfg = tmp_path / "agent.toml"
    cfg.write_text(f'[agent]\nbackend = "sim"\nstate_dir = "{tmp_path}/state"\nscratch_dir = "{tmp_path}/scratch"\n')
    return cfg


def test_fold_threads_sums_threads_and_reports_what_did_not_fit(catalog):
    p = plan(catalog, [[0.2, 0.3, 0.4, 0.1], [0.9, 0.1, 0.6, 0.2]])
    folded, rep = fold_threads(p, 2)
    a = folded.compositions
    assert a.shape[2] == 2 and folded.validate(catalog)
    crc = catalog.index("cpu_int_crc32")
    # window 0: slot 0 = 0.2+0.4, slot 1 = 0.3+0.1 (fits); window 1: slot 0 = 1.5 -> scaled to 1
    assert np.allclose(a[0, crc], [0.6, 0.4], atol=1e-6)
    assert np.allclose(a[1, crc], [1.0, 0.3], atol=1e-5)
    assert rep == {"from_threads": 4, "to_threads": 2, "dropped_fraction": pytest.approx(0.5 / 2.8, abs=1e-5),
                   "windows_scaled": 1}
    assert folded.provenance["folded_threads"] == rep
    same, rep = fold_threads(p, 8)
    assert same is p and rep["dropped_fraction"] == 0.0


def test_replay_folds_only_when_asked(tmp_path, sim_cfg, catalog):
    plan(catalog, [[0.6] * 4] * 3).write(tmp_path / "p4.h5")
    r = run(AGENT + ["replay", "--config", sim_cfg, tmp_path / "p4.h5", "--no-record"])
    assert r.returncode == 4 and "--fold-threads" in r.stderr
    r = run(AGENT + ["replay", "--config", sim_cfg, tmp_path / "p4.h5", "-o", tmp_path / "r.h5", "--fold-threads"])
    assert r.returncode == 0, r.stderr
    assert "folded 4 threads onto 2 CPUs: 16.7% of the planned work did not fit" in r.stderr
    tr = Trace.read(tmp_path / "r.h5")
    assert tr.T == 3 and tr.provenance["plan_provenance"]["folded_threads"]["to_threads"] == 2


def test_a_plan_for_other_hardware_warns_or_is_refused_with_strict(tmp_path, sim_cfg, catalog):
    other = {"simulated": True, "cpu_model": "some other CPU", "cores": 64, "memory_B": 2**40}
    plan(catalog, [[0.3, 0.3]] * 2, host_fingerprint=other).write(tmp_path / "other.h5")
    r = run(AGENT + ["replay", "--config", sim_cfg, tmp_path / "other.h5", "--no-record"])
    assert r.returncode == 0 and "warning: the plan was made for other hardware" in r.stderr, r.stderr
    assert "cpu_model: some other CPU (plan) vs mimesys simulated host (here)" in r.stderr
    r = run(AGENT + ["replay", "--config", sim_cfg, tmp_path / "other.h5", "--no-record", "--strict"])
    assert r.returncode == 1 and "(--strict)" in r.stderr and "cores: 64 (plan) vs 2 (here)" in r.stderr
    # a plan made on this (simulated) host: no word
    from mimesys.sim.model import SimParams
    same = SimParams(n_cpus=2).fingerprint()
    plan(catalog, [[0.3, 0.3]] * 2, host_fingerprint=same).write(tmp_path / "same.h5")
    r = run(AGENT + ["replay", "--config", sim_cfg, tmp_path / "same.h5", "--no-record", "--strict"])
    assert r.returncode == 0 and "warning" not in r.stderr, r.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="--run-as needs root")
def test_run_as_runs_the_command_unprivileged(tmp_path, sim_cfg, catalog):
    plan(catalog, [[0.3, 0.3]] * 2).write(tmp_path / "p.h5")
    nobody = pwd.getpwnam("nobody")
    r = run(AGENT + ["replay", "--config", sim_cfg, tmp_path / "p.h5", "--no-record", "--run-as", "nobody",
                     "--", "sh", "-c", 'echo "uid=$(id -u) home=$HOME"'])
    assert r.returncode == 0, r.stderr
    assert f"uid={nobody.pw_uid} home={nobody.pw_dir}" in r.stdout
    r = run(AGENT + ["replay", "--config", sim_cfg, tmp_path / "p.h5", "--run-as", "no-such-user-x", "--", "true"])
    assert r.returncode == 1 and "no such user 'no-such-user-x'" in r.stderr
    r = run(AGENT + ["replay", "--config", sim_cfg, tmp_path / "p.h5", "--run-as", "nobody"])
    assert r.returncode == 2 and "--run-as" in r.stderr


# The wrapped command reports its session, controlling terminal (tty_nr, 0: none), stdin and environment.
SESSION_PROBE = 'set -- $(cat /proc/$$/stat); echo "pid=$1 sid=$6 tty=$7 stdin=$(readlink /proc/$$/fd/0)"; env'


def _replay_on_a_terminal(cfg, plan_path, *args):
    """Replay around SESSION_PROBE from a session whose controlling terminal is a fresh pty (as
    root's shell would be), with root's secrets in the environment; -> (probe line, its environment)."""
    import fcntl
    import termios
    try:
        master, slave = os.openpty()
    except OSError as e:   # a throwaway root without /dev/pts (CI's Debian-python stage): no terminal to give
        pytest.skip(f"no pseudo-terminal here: {e}")
    env = {**ENV, "MIMESYS_TOKEN": "root-api-token", "SSH_AUTH_SOCK": "/tmp/ssh-root/agent.1",
           "KRB5CCNAME": "FILE:/tmp/krb5cc_0", "SUDO_USER": "admin", "SUDO_COMMAND": "/bin/bash",
           "LANG": "C.UTF-8", "LC_TIME": "C", "TERM": "xterm", "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
    try:
        r = subprocess.run([str(c) for c in AGENT + ["replay", "--config", cfg, plan_path, "--no-record", *args,
                                                     "--", "sh", "-c", SESSION_PROBE]],
                           stdin=slave, capture_output=True, text=True, cwd=ROOT, env=env, timeout=120,
                           start_new_session=True, preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0))
    finally:
        os.close(slave)
        os.close(master)
    assert r.returncode == 0, r.stdout + r.stderr
    probe = re.search(r"pid=(\d+) sid=(\d+) tty=(\d+) stdin=(\S*)", r.stdout)
    assert probe, r.stdout
    env = dict(line.split("=", 1) for line in r.stdout.splitlines()
               if re.match(r"[A-Za-z_][A-Za-z0-9_]*=", line) and not line.startswith("pid="))
    return probe, env


@pytest.mark.skipif(os.geteuid() != 0, reason="--run-as needs root")
def test_run_as_gives_the_command_no_terminal_no_stdin_and_only_allow_listed_variables(tmp_path, sim_cfg, catalog):
    """Finding 2 of issue 41: a process of the user must not be able to type into root's shell
    (TIOCSTI needs the terminal to be its controlling one) nor read root's secrets."""
    plan(catalog, [[0.3, 0.3]] * 2).write(tmp_path / "p.h5")
    # the harness: without --run-as the command has the replay's terminal (and the caller's environment)
    probe, env = _replay_on_a_terminal(sim_cfg, tmp_path / "p.h5")
    assert probe[3] != "0" and probe[4].startswith("/dev/pts/") and env["MIMESYS_TOKEN"] == "root-api-token"
    nobody = pwd.getpwnam("nobody")
    probe, env = _replay_on_a_terminal(sim_cfg, tmp_path / "p.h5", "--run-as", "nobody")
    pid, sid, tty, stdin = probe.groups()
    assert pid == sid and tty == "0" and stdin == "/dev/null", probe[0]
    assert set(env) - {"PWD", "SHLVL", "_", "OLDPWD"} == {"PATH", "LANG", "LC_TIME", "TERM", "HOME", "USER", "LOGNAME",
                                                          "SHELL"}, env
    assert (env["HOME"], env["USER"], env["LOGNAME"], env["SHELL"]) == (nobody.pw_dir, "nobody", "nobody",
                                                                        nobody.pw_shell)
    assert env["PATH"] == "/usr/sbin:/usr/bin:/sbin:/bin" and env["LC_TIME"] == "C"
    # stdin only when asked, and still no controlling terminal
    probe, env = _replay_on_a_terminal(sim_cfg, tmp_path / "p.h5", "--run-as", "nobody", "--pass-stdin")
    pid, sid, tty, stdin = probe.groups()
    assert pid == sid and tty == "0" and stdin.startswith("/dev/pts/"), probe[0]
    r = run(AGENT + ["replay", "--config", sim_cfg, tmp_path / "p.h5", "--pass-stdin", "--", "true"])
    assert r.returncode == 2 and "--pass-stdin is for --run-as" in r.stderr


# The wrapped command reports who it is, who its parent (the replay) is, and the replay's other
# children (the runner): uid and effective capabilities from /proc, one line each.
PROBE = r"""#!/bin/sh
caps() { grep -E '^(Uid|CapEff):' /proc/$1/status | awk '{printf "%s%s ", $1, $2}'; }
echo "command $(caps self)"
echo "replay $(caps $PPID)"
for st in /proc/[0-9]*/stat; do
  p=${st%/stat}; p=${p#/proc/}
  set -- $(cat "$st" 2>/dev/null)
  [ "$4" = "$PPID" ] && [ "$p" != "$$" ] && echo "child $2 $(caps $p)"
done
sleep 1.5
"""
CAP_SYS_ADMIN, CAP_PERFMON = 21, 38


def _replay_as_nobody(public_tmp, catalog):
    """A real-host replay (the real runner, the real samplers) run as root around PROBE run as nobody."""
    from runner_helpers import runner_or_skip
    runner_or_skip()
    d = public_tmp
    (d / "probe.sh").write_text(PROBE)
    (d / "probe.sh").chmod(0o755)
    cfg = d / "agent.toml"
    cfg.write_text(f'[agent]\nstate_dir = "{d}/state"\nscratch_dir = "{d}/scratch"\nrun_lock = "{d}/run.lock"\n')
    plan(catalog, [[0.4, 0.4]] * 8, window_s=0.25).write(d / "p.h5")
    r = run(AGENT + ["replay", "--config", cfg, d / "p.h5", "-o", d / "r.h5", "--no-progress",
                     "--run-as", "nobody", "--", d / "probe.sh"], env={**os.environ, "MIMESYS_TOKEN": ""})
    assert r.returncode == 0, r.stdout + r.stderr
    seen = {}
    for line in r.stdout.splitlines():
        m = re.fullmatch(r"(command|replay|child \((\S+)\)) Uid:(\d+) CapEff:([0-9a-f]+) ?", line)
        if m:
            seen[m[2] or m[1]] = (int(m[3]), int(m[4], 16))
    return r, seen, Trace.read(d / "r.h5")


@pytest.mark.skipif(os.geteuid() != 0, reason="--run-as needs root")
def test_run_as_keeps_the_replays_privileges_while_the_command_runs_unprivileged(public_tmp, catalog):
    """What --run-as promises (agentd/runas.py): the command runs as the user with no capability;
    the replay process, whose samplers open the system-wide perf events, stays root with its
    capabilities (CAP_PERFMON or CAP_SYS_ADMIN) the whole time; the runner it starts drops every
    capability itself (stressors/runner.c) and still executes the plan's work."""
    r, seen, tr = _replay_as_nobody(public_tmp, catalog)
    nobody = pwd.getpwnam("nobody").pw_uid
    # seen while the command ran: (uid, CapEff) of each process
    assert seen["command"] == (nobody, 0), r.stdout
    uid, caps = seen["replay"]
    assert uid == 0 and (caps >> CAP_PERFMON & 1 or caps >> CAP_SYS_ADMIN & 1), r.stdout
    assert seen["mimesys-runner"] == (0, 0), r.stdout    # root's uid, no capability at all
    # ... and the runner did the plan's work: windows measured, both CPUs loaded around 0.4
    m = re.search(r"workload: (\d+) windows executed", r.stdout)
    assert m and int(m[1]) >= 4 and tr.T == int(m[1]), r.stdout
    util = tr.values[1:, tr.names.index("cpu.util")]
    assert np.all(np.isfinite(util)) and np.median(util) > 0.25, util


@pytest.mark.skipif(os.geteuid() != 0, reason="--run-as needs root")
def test_run_as_the_replay_still_counts_system_wide_perf_events(public_tmp, catalog):
    """The perf software events need the replay's privileges (an unprivileged replay gets
    permission_denied: test_samplers_perf.py); with --run-as they are measured while the command
    runs as nobody."""
    from conftest import perf_usable
    if not perf_usable():
        pytest.skip("system-wide software perf events are refused here even to root (perf_event_paranoid "
                    f"{Path('/proc/sys/kernel/perf_event_paranoid').read_text().strip()}, or no perf_event_open)")
    r, seen, tr = _replay_as_nobody(public_tmp, catalog)
    assert seen["command"][0] == pwd.getpwnam("nobody").pw_uid, r.stdout
    for name in ("perf.ctx_switches_per_s", "perf.migrations_per_s", "perf.page_faults_per_s"):
        spec = tr.metrics[tr.names.index(name)]
        assert spec.availability.value == "available", (name, spec)
        v = tr.values[:, tr.names.index(name)]
        assert np.all(np.isfinite(v)) and np.all(v >= 0), (name, v)
    # two threads switching to and from their sleeps every window: context switches counted
    assert np.median(tr.values[:, tr.names.index("perf.ctx_switches_per_s")]) > 10


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def public_tmp():
    """A directory other users can read (pytest's tmp_path is root's 0700)."""
    import shutil
    import tempfile
    d = Path(tempfile.mkdtemp(prefix="mimesys-test-"))
    d.chmod(0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.mark.slow
def test_via_agent_hands_the_plan_to_the_local_daemon(public_tmp, catalog):
    tmp_path = public_tmp
    tok = tmp_path / "token"
    tok.write_text("via-agent-token-0123456789abcdef\n")
    tok.chmod(0o640)
    cfg = tmp_path / "agent.toml"
    cfg.write_text(f'[agent]\nbackend = "sim"\nstate_dir = "{tmp_path}/state"\nscratch_dir = "{tmp_path}/scratch"\n'
                   f'[api]\ntoken_file = "{tok}"\nbind = "127.0.0.1"\nport = {free_port()}\n')
    env = {**ENV, "MIMESYS_SIM_SPEEDUP": "1"}
    agent = subprocess.Popen(AGENT + ["serve", "--config", str(cfg)], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True, cwd=ROOT, env=env)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and "listening on" not in (agent.stdout.readline() or "listening on"):
            pass
        assert agent.poll() is None, "agent did not start"
        plan(catalog, [[0.3, 0.3]] * 4, window_s=0.25).write(tmp_path / "p.h5")
        r = run(AGENT + ["replay", "--config", cfg, tmp_path / "p.h5", "--via-agent", "-o", tmp_path / "r.h5",
                         "--", "sh", "-c", "sleep 1.6; exit 0"], env=env)
        assert r.returncode == 0, r.stdout + r.stderr
        m = re.search(r"workload: (\d+) windows executed by the agent at http://127\.0\.0\.1:\d+ \(run \S+\), "
                      r"state done", r.stdout)
        assert m and int(m[1]) >= 4, r.stdout   # repeated until the command ended
        tr = Trace.read(tmp_path / "r.h5")
        assert tr.simulated and tr.T >= 4
        # Ctrl-C: the agent's run is cancelled with it (else the next replay would find the host busy)
        proc = subprocess.Popen([str(c) for c in AGENT + ["replay", "--config", cfg, tmp_path / "p.h5", "--via-agent",
                                                          "--no-record", "--", "sleep", "5"]],
                                cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(3)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == 130, out + err
        r = run(AGENT + ["replay", "--config", cfg, tmp_path / "p.h5", "--via-agent", "--no-record", "--repetitions",
                         "1"], env=env)
        assert r.returncode == 0 and "state done" in r.stdout, r.stdout + r.stderr
        # the agent's refusal is the replay's: too many threads for its 2 CPUs
        plan(catalog, [[0.3] * 3] * 2).write(tmp_path / "p3.h5")
        r = run(AGENT + ["replay", "--config", cfg, tmp_path / "p3.h5", "--via-agent", "--no-record", "--", "true"],
                env=env)
        assert r.returncode == 4 and "--fold-threads" in r.stderr, r.stdout + r.stderr
        # a token the caller cannot read is named, with the way in
        if os.geteuid() == 0:
            tok.chmod(0o600)
            for f in ("p.h5", "agent.toml"):
                (tmp_path / f).chmod(0o644)
            r = run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"] + AGENT
                    + ["replay", "--config", cfg, tmp_path / "p.h5", "--via-agent", "--no-record"], env=env)
            assert r.returncode == 1 and "permission denied reading the agent's token" in r.stderr, r.stderr
    finally:
        agent.send_signal(signal.SIGTERM)
        agent.wait(20)


def test_the_run_lock_is_group_writable_whoever_creates_it(tmp_path):
    from agentd.hostlock import host_run_lock
    old = os.umask(0o077)   # the unit's UMask
    try:
        with host_run_lock(tmp_path / "run.lock", owner="test"):
            mode = stat.S_IMODE((tmp_path / "run.lock").stat().st_mode)
    finally:
        os.umask(old)
    assert mode == 0o660


def test_run_plan_takes_the_agent_config(tmp_path, catalog):
    """--config: agent.cpus and the scratch budget become run-plan's defaults, and its scratch is a
    private directory in the replay area, created and removed."""
    from runner_helpers import runner_or_skip
    runner_or_skip()
    cfg = tmp_path / "agent.toml"
    cfg.write_text(f'[agent]\ncpus = [0]\nstate_dir = "{tmp_path}/state"\nscratch_dir = "{tmp_path}/s/scratch"\n'
                   f'scratch_budget_mib = 32\nrun_lock = "{tmp_path}/run.lock"\n')
    plan(catalog, [[0.2]] * 2).write(tmp_path / "p.h5")
    r = run(AGENT + ["run-plan", tmp_path / "p.h5", "--config", cfg, "--no-progress"])
    assert r.returncode == 0, r.stdout + r.stderr
    assert "1 threads on CPUs 0," in r.stdout
    assert (tmp_path / "s" / "replay").is_dir() and not list((tmp_path / "s" / "replay").iterdir())
