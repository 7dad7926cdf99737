"""Scoring on the target's own scale and added activity where the target was idle
(controller/evaluate/own_scale.py)."""

from __future__ import annotations

import numpy as np
import pytest

from mimesys.metrics import MetricSpec
from mimesys.trace import Trace
from controller.evaluate.own_scale import idle_window_additions, own_scale_scores, resource_mean

NAMES = ["cpu.util.core0", "disk.read_Bps", "disk.write_Bps", "net.lo.tx_Bps", "disk.vda.read_Bps", "disk.busy"]
UNITS = ["fraction", "B/s", "B/s", "B/s", "B/s", "fraction"]


def _trace(cols: dict) -> Trace:
    T = len(next(iter(cols.values())))
    v = np.zeros((T, len(NAMES)), np.float32)
    for n, c in cols.items():
        v[:, NAMES.index(n)] = c
    return Trace(v, [MetricSpec(n, u) for n, u in zip(NAMES, UNITS)])


def test_a_little_traffic_where_the_target_had_little_costs_in_full():
    T = 20
    target = _trace({"cpu.util.core0": np.full(T, 0.5), "disk.write_Bps": np.full(T, 2e6)})
    same = own_scale_scores(target, target, NAMES[:4])
    assert all(v == pytest.approx(0.0, abs=1e-9) for v in same.values())
    # 20 MB/s of reads where the target read nothing: 1 % of a 2 GB/s device, all of its own scale
    ex = _trace({"cpu.util.core0": np.full(T, 0.5), "disk.write_Bps": np.full(T, 2e6),
                 "disk.read_Bps": np.full(T, 20e6)})
    s = own_scale_scores(target, ex, NAMES[:4])
    assert s["disk.read_Bps"] == pytest.approx(1.0) and s["disk.write_Bps"] == pytest.approx(0.0, abs=1e-9)
    cpu, res = resource_mean(s)
    assert cpu == pytest.approx(0.0, abs=1e-9) and res == pytest.approx(0.25)   # cpu, read, write, lo


def test_added_activity_counts_windows_where_the_target_was_idle_with_a_windows_slack():
    T = 12
    reads = np.where((np.arange(T) >= 4) & (np.arange(T) < 8), 100e6, 0.0)
    target = _trace({"disk.read_Bps": reads, "net.lo.tx_Bps": np.full(T, 1e3)})
    late = _trace({"disk.read_Bps": np.roll(reads, 1), "net.lo.tx_Bps": np.full(T, 2e3)})
    got = idle_window_additions(target, late)
    assert got["disk.read"]["added_windows"] == 0           # one window late: within the slack
    assert got["net.lo"]["added_windows"] == 0             # the agent's own few KB/s: idle
    bad = _trace({"disk.read_Bps": reads + np.where(np.arange(T) < 2, 30e6, 0.0), "net.lo.tx_Bps": np.full(T, 50e6)})
    got = idle_window_additions(target, bad)
    assert got["disk.read"]["added_windows"] == 2 and got["disk.read"]["max_added_share"] == pytest.approx(0.3)
    assert got["net.lo"]["added_windows"] == T
    assert "disk.busy" not in got and set(got) == {"disk.read", "disk.write", "net.lo"}


def test_evaluate_scores_on_the_targets_own_scale_by_default():
    """`mimesys evaluate`'s table and MEAN: reads where the target read nothing cost in full on
    the default scale, and almost nothing against the device's 2 GB/s (the old default)."""
    from controller.evaluate.driver import EvalOptions, score_peaks
    from controller.evaluate.dtw import compare
    from pathlib import Path

    T = 20
    target = _trace({"cpu.util.core0": np.full(T, 0.5), "disk.write_Bps": np.full(T, 2e6)})
    replay = _trace({"cpu.util.core0": np.full(T, 0.5), "disk.write_Bps": np.full(T, 2e6),
                     "disk.read_Bps": np.full(T, 20e6)})
    assert EvalOptions(outdir=Path(".")).scale == "own"
    host = {"disk.read_Bps": 2e9, "disk.write_Bps": 1e9}
    own = compare(target, replay, NAMES[:3], peaks=score_peaks(target, NAMES[:3], host, "own"))
    device = compare(target, replay, NAMES[:3], peaks=score_peaks(target, NAMES[:3], host, "device"))
    assert own["disk.read_Bps"].distance == pytest.approx(1.0)
    assert device["disk.read_Bps"].distance == pytest.approx(0.01)
    assert own["cpu.util.core0"].distance == device["cpu.util.core0"].distance == 0.0
    with pytest.raises(ValueError, match="scale 'peak'"):
        score_peaks(target, NAMES[:3], host, "peak")


def test_added_windows_are_attributed_to_the_plan_only_where_it_drove_the_resource():
    from mimesys.catalog import load_catalog
    from mimesys.plan import Plan
    from controller.evaluate.own_scale import attribute_to_plan

    T = 12
    target = _trace({"cpu.util.core0": np.full(T, 0.5)})
    reads = np.zeros(T)
    reads[[3, 9]] = 30e6                                   # two windows of reads the target never had
    replay = _trace({"cpu.util.core0": np.full(T, 0.5), "disk.read_Bps": reads})
    names = [s.name for s in load_catalog().stressors]
    a = np.zeros((T, len(names), 1), np.float32)
    a[:, names.index("cpu_int_crc32"), 0] = 0.4
    a[2, names.index("disk_rand_read_4k"), 0] = 0.1        # the plan read next to window 3 only
    add = attribute_to_plan(idle_window_additions(target, replay), Plan(a, names, "sha256:x"))
    assert add["disk.read"]["windows"] == [3, 9]
    assert add["disk.read"]["added_windows"] == 2 and add["disk.read"]["by_plan"] == 1


def _used(values_mib) -> Trace:
    v = (np.asarray(values_mib, np.float32) * 2**20)[:, None]
    return Trace(v, [MetricSpec("mem.used_B", "B")])


def test_used_memory_is_scored_on_the_target_s_range_and_memory_held_throughout_counts():
    from controller.evaluate.own_scale import memory_range_score
    target = _used([1000] * 5 + [1600] * 10 + [1000] * 5)           # rose 600 MiB over its least
    assert memory_range_score(target, target)["dtw"] == pytest.approx(0.0, abs=1e-9)
    # 400 MiB of buffers held the whole run: off by 2/3 of the range where the target rested
    held = memory_range_score(target, _used([1400] * 5 + [2000] * 10 + [1400] * 5))
    assert held["dtw"] > 0.4 and held["added_windows"] == 8
    half = memory_range_score(target, _used([1000] * 5 + [1300] * 10 + [1000] * 5))
    assert 0.3 < half["dtw"] < 0.45 and half["range_B"] == pytest.approx(600 * 2**20)
    added = memory_range_score(target, _used([1000] * 5 + [1600] * 10 + [1300] * 5))
    assert added["added_windows"] == 4            # the last five windows, less the ±1 window of slack
    assert memory_range_score(target, _trace({"cpu.util.core0": np.zeros(20)})) is None


def test_memory_a_plan_holds_where_its_target_held_none_is_counted():
    from controller.evaluate.own_scale import memory_added_by_plan
    from mimesys.plan import Plan
    target = _used([1000] * 5 + [1600] * 5)
    plan = Plan(np.zeros((10, 1, 1), np.float32), ["x"], "h",
                mem_held_B=np.array([0, 0, 0, 50, 0, 600, 600, 600, 600, 600], np.float64) * 2**20,
                provenance={"memory_held": {"idle_B": 1000 * 2**20, "noise_B": 32 * 2**20}})
    assert memory_added_by_plan(target, plan) == 1
    plan.provenance = {}
    assert memory_added_by_plan(target, plan) is None
