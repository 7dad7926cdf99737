"""Burst statistics (mimesys/bursts.py) on hand-built series whose answers are known."""

import math

import numpy as np
import pytest

from mimesys import bursts
from mimesys.errors import ValidationError
from mimesys.metrics import Availability, MetricSpec
from mimesys.trace import Trace


def test_runs_and_durations_of_a_square_wave():
    # 3 samples busy at 0.8, 5 idle at 0.05, repeated; dt = 0.1 s
    x = np.array(([0.8] * 3 + [0.05] * 5) * 4)
    b, i = bursts.runs(x, 1.0)
    assert [n for _, n in b] == [3, 3, 3, 3]
    assert [n for _, n in i] == [5, 5, 5, 5]
    s = bursts.burst_stats(x, 0.1, 1.0)
    assert s.burst_s_median == pytest.approx(0.3)
    assert s.idle_s_median == pytest.approx(0.5)
    assert s.burst_consumption == pytest.approx(0.8)
    assert s.bursts == 4
    assert s.burst_share == pytest.approx(12 / 32)


def test_hysteresis_keeps_a_burst_that_dips_between_low_and_high():
    # 0.2 is below HIGH (0.25) but above LOW (0.15): it continues a burst, never starts one
    x = np.array([0.0, 0.5, 0.2, 0.2, 0.5, 0.0, 0.2, 0.0])
    b, i = bursts.runs(x, 1.0)
    assert b == [(1, 4)]
    assert i == [(0, 1), (5, 3)]
    # without hysteresis the dip splits it
    b2, _ = bursts.runs(x, 1.0, high=0.25, low=0.25)
    assert b2 == [(1, 1), (4, 1)]


def test_threshold_is_relative_to_the_peak():
    x = np.array([0, 300, 300, 0, 0, 0], float)
    assert bursts.runs(x, 1000.0)[0] == [(1, 2)]     # 30 % of the peak: a burst
    assert bursts.runs(x, 10000.0)[0] == []          # 3 %: idle


def test_nan_ends_a_run_and_counts_in_neither():
    x = np.array([0.9, 0.9, np.nan, 0.9, 0.0, 0.0])
    b, i = bursts.runs(x, 1.0)
    assert b == [(0, 2), (3, 1)]
    assert i == [(4, 2)]
    s = bursts.burst_stats(x, 1.0, 1.0)
    assert s.burst_share == pytest.approx(3 / 5)


def test_p90_and_no_bursts():
    x = np.array([0.9] * 1 + [0] * 2 + [0.9] * 10 + [0] * 2)
    s = bursts.burst_stats(x, 1.0, 1.0)
    assert s.burst_s_median == pytest.approx(5.5)
    assert s.burst_s_p90 == pytest.approx(np.percentile([1, 10], 90))
    quiet = bursts.burst_stats(np.zeros(10), 1.0, 1.0)
    assert math.isnan(quiet.burst_s_median) and math.isnan(quiet.burst_consumption)
    assert quiet.idle_s_median == 10 and quiet.bursts == 0


def test_bad_thresholds_and_peak_are_refused():
    with pytest.raises(ValidationError, match="low"):
        bursts.runs(np.zeros(3), 1.0, high=0.1, low=0.2)
    with pytest.raises(ValidationError, match="peak"):
        bursts.runs(np.zeros(3), 0.0)


def _trace(cols: dict, units: dict, window_s=1.0, unavailable=()):
    names = list(cols)
    metrics = [MetricSpec(n, units[n], Availability.UNSUPPORTED if n in unavailable else Availability.AVAILABLE)
               for n in names]
    return Trace(np.stack([np.asarray(cols[n], np.float32) for n in names], axis=1), metrics, window_s=window_s)


def test_trace_resources_peaks_and_fallback():
    T = 8
    tr = _trace({"cpu.util.core0": [0.9, 0, 0, 0.9, 0.9, 0, 0, 0], "cpu.util": [0.5] * T,
                 "disk.write_Bps": [0, 100, 100, 0, 0, 0, 0, 0], "net.tx_Bps": [np.nan] * T,
                 "gpu.util": [0.5] * T, "mem.used_B": [1e9] * T, "net.rx_Bps": [0] * T},
                {"cpu.util.core0": "fraction", "cpu.util": "fraction", "disk.write_Bps": "B/s",
                 "net.tx_Bps": "B/s", "gpu.util": "fraction", "mem.used_B": "B", "net.rx_Bps": "B/s"},
                unavailable=("gpu.util",))
    names = bursts.resource_metrics(tr)
    assert names == ["cpu.util.core0", "disk.write_Bps", "net.rx_Bps"]   # no aggregates, gauges, NaN or unavailable
    assert bursts.is_resource("net.lo.tx_Bps") and not bursts.is_resource("net.eth0.tx_Bps")
    st = bursts.trace_burst_stats(tr, peaks={"disk.write_Bps": 1000.0})
    assert st["disk.write_Bps"].bursts == 0 and st["disk.write_Bps"].peak_from == "host peak"
    assert "net.rx_Bps" not in st            # all zero, no peak: no threshold exists
    st2 = bursts.trace_burst_stats(tr)
    assert st2["disk.write_Bps"].bursts == 1 and st2["disk.write_Bps"].peak_from == "series max"
    assert st2["cpu.util.core0"].burst_s_median == pytest.approx(1.5)


def test_relative_errors_structure_error_and_mape():
    a = bursts.burst_stats(np.array([0.9, 0.9, 0, 0, 0, 0] * 3), 1.0, 1.0)
    same = bursts.structure_error({"c": a}, {"c": a}, 1.0)
    assert same == 0.0
    b = bursts.burst_stats(np.array([0.9, 0, 0, 0, 0, 0] * 3), 1.0, 1.0)
    e = bursts.relative_errors(a, b, 1.0)
    assert e["burst_s_median"] == pytest.approx(0.5)
    assert e["idle_s_median"] == pytest.approx(1 / 4)
    quiet = bursts.burst_stats(np.zeros(18), 1.0, 1.0)
    eq = bursts.relative_errors(a, quiet, 1.0)
    assert eq["burst_s_median"] == bursts.ERROR_CAP and eq["burst_consumption"] == bursts.ERROR_CAP
    assert math.isnan(bursts.relative_errors(quiet, quiet, 1.0)["burst_s_median"])
    assert bursts.structure_error({"c": a}, {}, 1.0) == pytest.approx(1.0)   # executed lacks the resource
    assert bursts.mape([(2.0, 3.0), (4.0, 2.0), (math.nan, 1.0)]) == pytest.approx(50.0)
    assert math.isnan(bursts.mape([(math.nan, 1.0)]))
