"""bench/compare_placements.py: one method's replays per placement side by side, from the
fidelity bench's evaluation directories (issue 42: what a placement costs the recording)."""

from __future__ import annotations

import json

import pytest

from bench_modules import load_bench, require_bench

require_bench("compare_placements")


def _run(method, mix, per_core, memory, added=0):
    return {"method": method, "trace": mix,
            "own_scale": {"per_core_cpu": per_core, "cpu.util": 0.02, "resource_mean": 0.05, "per_metric": {},
                          "memory": {"dtw": memory, "added_by_plan": added}}}


def test_each_placement_is_scored_from_its_own_evaluations(tmp_path):
    cp = load_bench("compare_placements")
    for suffix, per_core in (("", 0.03), ("-yield", 0.05)):
        for r in range(2):
            d = tmp_path / f"eval-rep{r}{suffix}"
            d.mkdir()
            runs = [_run("inverse", "kv_grow", per_core + 0.01 * r, 0.07, added=r), _run("single", "kv_grow", 0.9, 0.5)]
            (d / "results.json").write_text(json.dumps({"runs": runs}))
    out = cp.compare(tmp_path, "inverse", 2, ("pinned", "yield"))
    assert out["kv_grow"]["pinned"]["per_core_cpu"] == pytest.approx(0.035)
    assert out["kv_grow"]["yield"]["per_core_cpu"] == pytest.approx(0.055)
    assert out["kv_grow"]["yield"]["memory_windows_added_by_plan"] == 1
    assert set(out["mean"]) == {"pinned", "yield"}
    with pytest.raises(SystemExit, match="with --placement free first"):
        cp.compare(tmp_path, "inverse", 2, ("pinned", "free"))
