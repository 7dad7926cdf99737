"""Plan → compiled schedule: exact durations, seeded order, layout of repetitions/warm-up."""

import numpy as np
import pytest

from mimesys.errors import PlanError
from mimesys.plan import Plan
from agentd.schedule import MAGIC, compile_plan, decode_schedule, durations_ns


def _paces(catalog):
    """A rate for every paced variant, as an agent with a calibration has them."""
    return {catalog.stressors[m].name: 1e8 for m in catalog.paced()}


def _random_plan(catalog, T=20, K=2, seed=1, window_s=1.0):
    rng = np.random.default_rng(seed)
    a = rng.dirichlet(np.ones(len(catalog) + 1), size=(T, K)).astype(np.float32)[..., :-1]
    a[rng.random(a.shape) < 0.3] = 0  # sparse compositions, as generated plans are
    return Plan.from_catalog(np.transpose(a, (0, 2, 1)).copy(), catalog, window_s=window_s, seed=seed)


def test_same_seed_same_bytes_other_seed_other_order(catalog):
    plan = _random_plan(catalog)
    a = compile_plan(plan, catalog, pace_Bps=_paces(catalog))
    assert a.data == compile_plan(plan, catalog, pace_Bps=_paces(catalog)).data
    assert a.data[:8] == MAGIC
    b = compile_plan(plan, catalog, seed=plan.seed + 1, pace_Bps=_paces(catalog))
    assert a.data != b.data
    _, _, wa = decode_schedule(a.data)
    _, _, wb = decode_schedule(b.data)
    # same durations per stressor, different order somewhere
    for x, y in zip(wa, wb):
        for tx, ty in zip(x.segments, y.segments):
            assert sorted(tx) == sorted(ty)
    assert any(tx != ty for x, y in zip(wa, wb) for tx, ty in zip(x.segments, y.segments))


def test_durations_exact_and_never_over_the_window(catalog):
    plan = _random_plan(catalog, T=30, K=3, window_s=0.7)
    sched = compile_plan(plan, catalog, pace_Bps=_paces(catalog))
    header, names, windows = decode_schedule(sched.data)
    W = header["window_ns"]
    assert W == 700_000_000 and names == catalog.names
    for t, win in enumerate(windows):
        for k, segs in enumerate(win.segments):
            got = dict(segs)
            want = np.floor(plan.compositions[t, :, k].astype(np.float64) * W).astype(np.int64)
            assert got == {m: int(d) for m, d in enumerate(want) if d > 0}
            assert sum(got.values()) <= W


def test_float32_sums_above_one_are_trimmed_to_the_window():
    a = np.full((18, 1), np.float32(1 / 18), np.float32)
    a[0, 0] += np.float32(5e-6)   # within Plan.SUM_TOLERANCE, above 1
    d = durations_ns(a, 1_000_000_000)
    assert d.sum() <= 1_000_000_000 and d.min() > 55_000_000


def test_order_is_randomized_per_window(catalog):
    a = np.zeros((50, len(catalog), 1), np.float32)
    a[:, :4, 0] = 0.2
    plan = Plan.from_catalog(a, catalog, window_s=1.0, seed=7)
    _, _, windows = decode_schedule(compile_plan(plan, catalog, pace_Bps=_paces(catalog)).data)
    orders = {tuple(m for m, _ in w.segments[0]) for w in windows}
    assert len(orders) > 10   # 24 possible orders of 4 stressors, 50 windows


def test_repetitions_and_warmup_layout(catalog):
    plan = _random_plan(catalog, T=3, K=1)
    sched = compile_plan(plan, catalog, repetitions=2, warmup_windows=2, pace_Bps=_paces(catalog))
    header, _, windows = decode_schedule(sched.data)
    # stored: the warm-up and the plan windows once; the runner executes 2 + 2 x 3
    assert header["S"] == 5 == sched.S and header["E"] == 8 == sched.E
    assert [(w.repetition, w.window) for w in windows] == [(-1, 0), (-1, 1), (0, 0), (0, 1), (0, 2)]
    assert [sched.executed(i) for i in range(8)] == [(-1, 0), (-1, 1), (0, 0), (0, 1), (0, 2),
                                                     (1, 0), (1, 1), (1, 2)]
    # warm-up runs window 0's composition
    assert sorted(windows[0].segments[0]) == sorted(windows[2].segments[0])


def test_plan_is_validated_before_compiling(catalog):
    plan = _random_plan(catalog, T=4)
    plan.compositions[2, 3, 1] = np.nan
    with pytest.raises(PlanError, match=r"window 2, thread 1, stressor 'cpu_simd_dist_256'"):
        compile_plan(plan, catalog, pace_Bps=_paces(catalog))
    plan = _random_plan(catalog, T=4)
    plan.catalog_hash = "sha256:0"
    with pytest.raises(PlanError, match="catalog hash"):
        compile_plan(plan, catalog, pace_Bps=_paces(catalog))
    with pytest.raises(PlanError, match="repetitions"):
        compile_plan(_random_plan(catalog, T=2), catalog, repetitions=0)
