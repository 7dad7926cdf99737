"""bench/colocation_real.py's scoring and host watch (issue 42: the colocation floor).

With two runs a condition the floor and a method's error are the pairwise definitions the bench
has always used; with more, the means of disjoint groups of N//2 runs. HostNoise counts a busy
process that is neither this process's nor the neighbour's, and not one of its own children.
"""

import os
import subprocess
import sys
import time

import numpy as np
import pytest

from bench_modules import load_bench, require_bench

require_bench("colocation_real")


def _bench():
    return load_bench("colocation_real")


def _runs(series: dict[str, list[list[float]]]) -> dict:
    return {"m": {c: [{"tps": s} for s in ss] for c, ss in series.items()}}


def test_two_runs_score_pairwise_as_before():
    cr = _bench()
    alone = [[100.0, 100, 100], [100, 100, 100]]
    mix = [[90.0, 80, 70], [80, 80, 80]]          # degradations 20 and 20 overall; per interval 10,20,30 / 20,20,20
    rep = [[90.0, 90, 90], [70, 70, 70]]
    s = cr.summarize(_runs({"alone": alone, "mix": mix, "x": rep}), ["m"], ["x"])
    row = s["by_mix"]["m"]
    assert row["group_k"] == 1
    assert row["floor"]["overall_pp"] == pytest.approx(0.0)
    assert row["floor"]["per_interval_pp"] == pytest.approx(20 / 3)
    # pairs: (20 vs 10, 20 vs 30) for each mix run: overall 10 each
    assert row["methods"]["x"]["overall_pp"] == pytest.approx(10.0)
    assert row["host_noise_pct"]["max"] == 0.0      # runs recorded before the bench watched the host


def test_four_runs_score_means_of_two():
    cr = _bench()
    alone = [[100.0, 100]] * 4
    mix = [[90.0, 90], [70, 70], [80, 80], [80, 80]]   # degradations 10, 30, 20, 20
    s = cr.summarize(_runs({"alone": alone, "mix": mix, "x": mix}), ["m"], ["x"])
    row = s["by_mix"]["m"]
    assert row["group_k"] == 2
    # splits {0,1}|{2,3}: 20 vs 20; {0,2}|{1,3}: 15 vs 25; {0,3}|{1,2}: 15 vs 25
    assert row["floor"]["overall_pp"] == pytest.approx(20 / 3)
    degs = [cr.degradations(np.array([100.0, 100]), m) for m in mix]
    assert len(cr.floor_errors(degs, 2)) == 3
    assert len(cr.cross_errors(degs, degs, 2)) == 36


def test_nothing_scores_the_alone_runs_as_a_replay():
    """A plan the neighbour does not feel scores what the alone runs score against the mix: a
    mix that degrades the neighbour by 20 % leaves "nothing" 20 points off, one that does not
    touch it leaves "nothing" at the floor."""
    cr = _bench()
    alone = [[100.0, 100], [100, 100]]
    hurts = cr.summarize(_runs({"alone": alone, "mix": [[80.0, 80], [80, 80]], "x": [[80.0, 80], [80, 80]]}),
                         ["m"], ["x"])
    assert hurts["by_mix"]["m"]["nothing"] == {"overall_pp": pytest.approx(20.0), "per_interval_pp": pytest.approx(20.0)}
    assert hurts["methods"]["nothing"]["overall_pp"] == pytest.approx(20.0)
    assert hurts["methods"]["x"]["overall_pp"] == pytest.approx(0.0)
    idle = cr.summarize(_runs({"alone": alone, "mix": [[100.0, 100], [100, 100]], "x": [[80.0, 80], [80, 80]]}),
                        ["m"], ["x"])
    assert idle["methods"]["nothing"]["overall_pp"] == pytest.approx(0.0)
    assert idle["methods"]["x"]["overall_pp"] == pytest.approx(20.0)


@pytest.mark.serial   # counts another process's CPU on this host
def test_host_noise_counts_a_foreign_busy_process():
    cr = _bench()
    watch = cr.HostNoise([], 1)
    watch.start()
    # a busy loop reparented to init: neither this process's descendant nor the neighbour's
    subprocess.run(["sh", "-c", "timeout 2.5 sh -c 'while :; do :; done' >/dev/null 2>&1 &"], check=True)
    time.sleep(3.2)
    watch.done.set()
    watch.join()
    assert len(watch.foreign_pct) >= 2
    assert max(watch.foreign_pct) > 100 / (os.cpu_count() or 1) * 0.3, watch.foreign_pct
    # this process's own child is not foreign
    own = cr.HostNoise([], 1)
    own.start()
    p = subprocess.Popen(["timeout", "2.5", "sh", "-c", "while :; do :; done"])
    time.sleep(3.2)
    own.done.set()
    own.join()
    p.wait()
    assert max(own.foreign_pct) < 100 / (os.cpu_count() or 1) * 0.3, own.foreign_pct


def test_latency_percentiles_per_interval(tmp_path):
    cr = _bench()
    t0 = 1000.0
    # pgbench -l lines: client, transaction, latency (us), script, epoch seconds, microseconds
    lines = [f"0 {i} {100 + i % 10} 0 {1000 + i // 100} {(i % 100) * 10000}" for i in range(500)]
    lines += [f"1 {i} 5000 0 1004 500000" for i in range(3)]     # slow transactions in the third 2-s interval
    (tmp_path / "tx.1").write_text("\n".join(lines) + "\n")
    lat = cr.latency_percentiles([tmp_path / "tx.1"], t0, 2, 3)
    assert lat["50"][0] == pytest.approx(0.1045, abs=1e-3)
    assert lat["99"][2] > lat["99"][0]
    assert len(lat["95"]) == 3
    s = cr.summarize({"m": {"alone": [{"tps": [1.0], "latency_ms": {"50": [1.0, 1.0]}}] * 2,
                            "mix": [{"tps": [1.0], "latency_ms": {"50": [1.5, 1.5]}}] * 2}}, ["m"], [], "p50")
    assert s["by_mix"]["m"]["mix_degradation_pct"] == [pytest.approx(50.0)] * 2    # latency added is positive


def test_host_noise_accounting_without_load(monkeypatch):
    """The arithmetic on made-up /proc readings: a foreign process's CPU counts, a process of the
    bench's own tree and a kernel thread do not, a new process counts in full, steal per CPU; a
    process once the bench's stays the bench's when it is reparented to init."""
    cr = _bench()
    hn = sys.modules["hostnoise"]      # the watcher's module (bench/hostnoise.py), loaded by the bench
    me = os.getpid()
    looks = iter([
        ({1: (0, 0.0), me: (1, 5.0), 500: (me, 1.0), 600: (1, 2.0), 700: (2, 0.0)}, 10.0),
        # +1 s foreign (600), +3 s own child (500, reparented to init since), +4 s kernel thread
        # (700), new foreign 800 with 0.5 s
        ({1: (0, 0.0), me: (1, 5.0), 500: (1, 4.0), 600: (1, 3.0), 700: (2, 4.0), 800: (1, 0.5)}, 10.2),
    ])
    state = {}

    def fake_cpu_times():
        state["cur"] = next(looks)
        return state["cur"][0]

    monkeypatch.setattr(hn, "cpu_times", fake_cpu_times)
    monkeypatch.setattr(hn, "_steal", lambda: state["cur"][1])
    monkeypatch.setattr(hn, "NCPU", 2)
    times = iter([100.0, 100.0, 102.0, 102.0])
    monkeypatch.setattr(hn.time, "monotonic", lambda: next(times, 200.0))
    h = cr.HostNoise([], 2, period=2)
    h.done.wait = lambda t=None, _n=iter([False, True]): next(_n)
    h.run()
    assert h.foreign_pct == [pytest.approx(1.5 / 4 * 100)]
    assert h.steal_pct == [pytest.approx(0.2 / 4 * 100)]


def test_a_placed_condition_replays_its_methods_plan_with_that_agent_config(tmp_path):
    c = _bench()
    assert c.plan_method("inverse@free") == "inverse" and c.plan_method("single") == "single"
    plans, config = tmp_path / "plans", tmp_path / "agent" / "agent.toml"
    free = c.workload_argv("inverse@free", "kv_grow", 60, plans, config)
    pinned = c.workload_argv("inverse", "kv_grow", 60, plans, config)
    assert str(plans / "kv_grow__inverse.h5") in free and str(plans / "kv_grow__inverse.h5") in pinned
    assert free[free.index("--config") + 1] == str(config.with_name("agent-free.toml"))
    assert pinned[pinned.index("--config") + 1] == str(config)
    assert c.workload_argv("alone", "kv_grow", 60, plans, config) is None


def test_a_workload_that_fails_is_kept_with_what_it_said_not_scored(monkeypatch, tmp_path):
    """A replay that exits non-zero (4: its plan did not finish) marks the run failed with the
    workload's own output, stdout included (replay --no-progress says why there), so the bench
    measures it again instead of stopping the whole campaign of runs."""
    c = _bench()
    said = "workload: 3 windows executed (plan of 60), state failed"
    monkeypatch.setattr(c, "workload_argv", lambda *a: ["sh", "-c", f"echo '{said}'; echo oops >&2; exit 4"])
    monkeypatch.setattr(c, "neighbour_tps", lambda *a: ([1.0], {"noise_pct": [0.0]}))
    r = c.measure([], "inverse@yield", "kv_grow", 1, 1, tmp_path, tmp_path / "agent.toml")
    assert r["workload_failed"].startswith("exited 4:") and said in r["workload_failed"] and "oops" in r["workload_failed"]
    monkeypatch.setattr(c, "workload_argv", lambda *a: ["true"])
    assert "workload_failed" not in c.measure([], "inverse@yield", "kv_grow", 1, 1, tmp_path, tmp_path / "agent.toml")


def test_a_stop_mid_run_takes_the_workloads_whole_session_down(monkeypatch, tmp_path):
    """The workload runs in a session of its own (so that the bench's ^C reaches it only through
    the bench); a stop while the neighbour is measured must still end it, children included: a
    replay left running would hold the CPUs for the rest of its plan."""
    c = _bench()
    pids = tmp_path / "pids"
    monkeypatch.setattr(c, "workload_argv",
                        lambda *a: ["sh", "-c", f"sleep 60 & echo $$ $! > {pids}; wait"])

    def stopped(*a):
        deadline = time.monotonic() + 10
        while not (pids.exists() and len(pids.read_text().split()) == 2) and time.monotonic() < deadline:
            time.sleep(0.02)
        raise KeyboardInterrupt

    monkeypatch.setattr(c, "neighbour_tps", stopped)
    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        c.measure([], "inverse", "kv_grow", 60, 5, tmp_path, tmp_path / "agent.toml")
    assert time.monotonic() - t0 < 10          # not the workload's 60 s, nor finish()'s grace
    shell, child = map(int, pids.read_text().split())
    for pid in (shell, child):
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.05)
        else:
            pytest.fail(f"process {pid} of the workload outlived the stop")


def test_the_neighbours_client_threads_follow_its_clients():
    c = _bench()
    assert c.pgbench_threads(2) == 1            # the ping-pong neighbour as measured until now
    assert c.pgbench_threads(8) == min(8, os.cpu_count() or 1)


def test_a_split_condition_runs_the_plans_work_on_more_threads(tmp_path):
    """"inverse*3": three replays side by side of inverse's plan cut in three (every intensity and
    the memory held a third, no per-core busy target), each agent with a run lock of its own."""
    from mimesys.catalog import load_catalog
    from mimesys.plan import Plan
    from runner_helpers import make_plan

    c = _bench()
    catalog = load_catalog()
    plans, config = tmp_path / "plans", tmp_path / "agent" / "agent.toml"
    plans.mkdir()
    config.parent.mkdir()
    config.write_text('[agent]\nbackend = "host"\n')
    plan = make_plan(catalog, {"cpu_int_crc32": 0.9, "mem_stream_triad_256M": 0.3}, T=4, K=2, window_s=1.0)
    plan.core_busy_target = np.full((4, 2), 0.95, np.float32)
    plan.mem_held_B = np.full(4, 600 * 2**20, np.float64)
    plan.write(plans / "kv_grow__inverse.h5")

    assert c.plan_method("inverse*3") == "inverse" and c.plan_method("inverse*3@free") == "inverse"
    argv = c.workload_argv("inverse*3", "kv_grow", 60, plans, config)
    assert argv[:2] == ["sh", "-c"]
    lines = [ln for ln in argv[2].splitlines() if "agentd.cli replay" in ln]
    assert len(lines) == 3
    split = Plan.read(plans / "kv_grow__inverse__x3.h5")
    np.testing.assert_allclose(split.compositions, plan.compositions / 3, rtol=1e-6)
    np.testing.assert_allclose(split.mem_held_B, plan.mem_held_B / 3)
    assert split.core_busy_target is None and split.provenance["copies"] == 3
    locks = set()
    for i, line in enumerate(lines):
        own = config.with_name(f"agent-copy{i}.toml")
        assert str(own) in line and str(plans / "kv_grow__inverse__x3.h5") in line
        locks.add([ln for ln in own.read_text().splitlines() if ln.startswith("run_lock")][0])
    assert len(locks) == 3

    # the script waits for every copy and exits with the first one's failure
    script = argv[2].replace(f"{sys.executable} -m agentd.cli replay", "false")
    assert subprocess.run(["sh", "-c", script]).returncode == 1
    assert subprocess.run(["sh", "-c", argv[2].replace(f"{sys.executable} -m agentd.cli replay", "true")]
                          ).returncode == 0
