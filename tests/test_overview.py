"""The overview PNG (mimesys/overview.py): at most eight panels of what some trace measured, the
target and each method, scores in the legend, added windows shaded."""

import numpy as np
import pytest

from mimesys.metrics import MetricSpec
from mimesys.overview import MAX_PANELS, overview_png, panels_for
from mimesys.trace import Trace

pytest.importorskip("matplotlib")

SPECS = [MetricSpec("cpu.util.core0", "fraction"), MetricSpec("cpu.util.core1", "fraction"),
         MetricSpec("disk.write_Bps", "B/s"), MetricSpec("disk.read_Bps", "B/s"),
         MetricSpec("net.lo.tx_Bps", "B/s"), MetricSpec("mem.used_B", "B"), MetricSpec("perf.ctx_switches_per_s", "1/s")]


def _trace(seed, *, disk_read=False):
    rng = np.random.default_rng(seed)
    v = rng.uniform(0, 1, (30, len(SPECS))).astype(np.float32)
    v[:, 2] *= 1e8
    v[:, 3] = rng.uniform(0, 1e7, 30) if disk_read else 0.0       # the target never reads
    v[:, 4] *= 1e6
    v[:, 5] = 1e9
    return Trace(v, SPECS, window_s=1.0)


def test_panels_are_what_some_trace_measured_in_a_fixed_order():
    target = _trace(0)
    assert [p.title for p in panels_for([target])] == ["CPU per core", "disk write", "loopback", "memory held"]
    replay = _trace(1, disk_read=True)
    assert [p.title for p in panels_for([target, replay])][:3] == ["CPU per core", "disk read", "disk write"]
    assert len(panels_for([target, replay])) <= MAX_PANELS


def test_the_overview_is_a_png_with_each_method_and_its_added_windows(tmp_path):
    out = overview_png(tmp_path / "o.png", "a target", _trace(0), {"inverse": _trace(1), "single": _trace(2, disk_read=True)},
                       scores={"inverse": 0.08, "single": 0.2}, added={"single": {"disk.read": [3, 4, 5]}})
    data = out.read_bytes()
    assert data[:4] == b"\x89PNG" and len(data) > 10_000
