"""bench/wake_pattern.py: its conditions and summary (issue 42: what a neighbour feels from how a
load sleeps and wakes), and its per-CPU reading on this host."""

from __future__ import annotations

import pytest

from bench_modules import load_bench, require_bench

require_bench("wake_pattern")


def _bench():
    return load_bench("wake_pattern")


def test_conditions_name_their_load_and_bad_ones_are_refused(tmp_path):
    wp = _bench()
    duty = tmp_path / "duty"
    assert wp.load_argv("alone", 30, duty, None) is None
    assert wp.load_argv("duty:300:700", 30, duty, None) == [str(duty), "300", "700", "30"]
    assert wp.load_argv("mix:kv_grow", 30, duty, None)[-3:] == ["kv_grow", "--seconds", "30"]
    with pytest.raises(SystemExit, match="needs --config"):
        wp.load_argv("replay:p.h5", 30, duty, None)
    with pytest.raises(SystemExit, match="unknown condition 'spin'"):
        wp.load_argv("spin", 30, duty, None)


def test_summary_is_the_change_against_alone_and_the_load_per_cpu():
    wp = _bench()
    run = {"busy": [[0.5, 0.1], [0.7, 0.3]], "idle_entries_per_s": [[100, 10], [300, 30]], "steal_pct": [0.1],
           "foreign_pct": [1.0]}
    s = wp.summarize({"alone": [{**run, "tps": [100.0, 100.0]}], "duty:1:1": [{**run, "tps": [110.0, 110.0]}]})
    assert s["duty:1:1"]["tps_vs_alone_pct"] == [pytest.approx(10.0)]
    assert s["alone"]["tps_vs_alone_pct"] == [0.0]
    assert s["duty:1:1"]["busy_per_cpu"] == [0.6, 0.2]
    assert s["duty:1:1"]["idle_entries_per_s_per_cpu"] == [200, 20]
    assert s["duty:1:1"]["host_noise_max_pct"] == pytest.approx(1.1)


def test_per_cpu_reads_every_cpu_of_this_host():
    wp = _bench()
    busy, entries = wp.per_cpu()
    assert len(busy) == len(entries) >= 1 and all(b >= 0 for b in busy) and all(e >= 0 for e in entries)
