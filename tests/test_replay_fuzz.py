"""Hostile plan files given to `mimesys-agent replay` (issue 22): the short, deterministic
in-suite part of bench/hardening_fuzz.py's replay phase, with the same builder (tests/hostile_h5.py).

replay reads a plan from disk, often as root, and then starts the runner. Each file here goes to
`mimesys-agent replay FILE --no-record -- true` with the real host backend whose runner is a
sentinel script (it records that it was started and runs nothing). Whatever the file: a
documented exit status (1: refused on reading; 4: a plan that cannot run here), one line on
stderr and no traceback, no spelling of the secret that external storage points at, a few
seconds at most; and a file with a feature the untrusted-HDF5 gate must refuse never reaches
the runner."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from mimesys import exitstatus
from hostile_h5 import M, PLAN_ATTRS, ReplayHarness, build, h5_spec, replay_verdict, write_secrets

SECONDS_PER_CASE = 15.0    # each case takes ~0.5 s on an idle 2-vCPU host; the bound is for a loaded one


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("replay-fuzz")
    write_secrets(tmp)
    h = ReplayHarness(tmp / "replay")
    h.tmp = tmp
    return h


def spec(**kw) -> dict:
    """A valid plan of 2 windows, 2 threads, all zeros; kw varies one feature."""
    return {"kind": "plan", "dims": [2, M, 2], "valid": False, "dtype": "<f4", "storage": "data", "filter": None,
            "sub": 3, "window_start_ns": None, "attrs": {k: 0 for k in PLAN_ATTRS}, **kw}


def replay(harness, case, name):
    path = harness.tmp / name
    path.write_bytes(case.data)
    r = harness.replay(path)
    assert not replay_verdict(case, r), (case.label(), replay_verdict(case, r), r["stderr"][-500:])
    assert r["seconds"] < SECONDS_PER_CASE, (case.label(), r["seconds"])
    return r


def test_a_valid_plan_reaches_the_sentinel_runner(harness):
    """The harness tests what it claims: the checks before the runner are the real ones."""
    case = build(spec(), harness.tmp)
    assert not case.hostile
    r = replay(harness, case, "valid.h5")
    assert r["runner_started"] and r["status"] == exitstatus.WORKLOAD, r["stderr"]


HOSTILE = {
    "external": spec(storage="external"),
    "virtual": spec(storage="virtual"),
    "soft_link": spec(storage="soft_link"),
    "external_link": spec(storage="external_link"),
    "compound": spec(dtype="compound"),
    "vlen_str": spec(dtype="vlen_str"),
    "lzf": spec(filter="lzf"),
    "declared_size": spec(storage="chunked_unwritten", dims=[200_000, 200_000, 2]),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_hostile_plan_file_is_refused_on_reading(harness, name):
    case = build(HOSTILE[name], harness.tmp)
    assert case.hostile, "the builder did not write the feature"
    r = replay(harness, case, f"{name}.h5")
    assert r["status"] == exitstatus.ERROR and not r["runner_started"]
    lines = r["stderr"].decode(errors="replace").strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), lines


@pytest.mark.parametrize("seed", [-1, 2.0 ** 70])
def test_a_plan_seed_outside_u64_is_refused_on_reading(harness, seed, catalog):
    """Found by this fuzz: the HDF5 reader took any seed attribute while the wire form wanted
    [0, 2^64), and the schedule packs it as a u64, so `replay` of a plan with seed 2^70 ended in
    a struct.error traceback at runner start (and the agent's sim backend ran it)."""
    from mimesys.errors import PlanError
    from mimesys.plan import Plan
    from agentd.schedule import compile_plan
    case = build(spec(attrs={**{k: 0 for k in PLAN_ATTRS}, "seed": PLAN_ATTRS["seed"].index(seed)}), harness.tmp)
    r = replay(harness, case, "seed.h5")
    assert r["status"] == exitstatus.ERROR and b"attribute seed must be an integer in [0, 2^64)" in r["stderr"]
    with pytest.raises(PlanError, match="seed"):
        Plan.from_bytes(case.data)     # the agent's path
    plan = Plan.from_catalog(np.zeros((1, len(catalog), 1), np.float32), catalog, window_s=0.05)
    with pytest.raises(PlanError, match="2\\^64"):
        compile_plan(plan, catalog, seed=1 << 64)

@settings(max_examples=6, derandomize=True, database=None, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(plan=h5_spec("plan"))
def test_drawn_plan_files(harness, plan):
    case = build(plan, harness.tmp)
    replay(harness, case, "drawn.h5")


def test_secret_spellings_are_caught():
    """The leak check itself: a replay that printed the secret's value would be caught."""
    from hostile_h5 import SECRET_VALUE, leaks
    assert leaks(f"value {float(SECRET_VALUE)}".encode()) and leaks(repr(np.float32(SECRET_VALUE)).encode())
    assert leaks(np.full(4, SECRET_VALUE, "<u2").tobytes()) and not leaks(b"Error: plan.h5: no /compositions")


def test_a_fifo_named_as_the_plan_is_refused_not_waited_on(harness):
    """Found writing this fuzz: HDF5 opens a path with open(2), which blocks on a FIFO until a
    writer comes, so `replay /tmp/x.h5` (root) hung forever on a FIFO anyone could plant there.
    The same gate serves every plan and trace read by path (mimesys/untrusted.py open_h5)."""
    import os
    fifo = harness.tmp / "fifo.h5"
    os.mkfifo(fifo)
    link = harness.tmp / "fifo-link.h5"
    link.symlink_to(fifo)
    for path in (fifo, link):
        r = harness.replay(path, timeout_s=20)
        assert r["status"] == exitstatus.ERROR, (r["status"], r["stderr"])
        assert b"not a regular file" in r["stderr"] and not r["runner_started"] and not r["traceback"]
    from mimesys.errors import TraceError
    from mimesys.trace import Trace
    with pytest.raises(TraceError, match="not a regular file"):
        Trace.read(fifo)          # before the fix: blocked here, in-process
