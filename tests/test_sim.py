"""The simulated host: pure model properties and the Backend wrapper."""

import asyncio

import numpy as np
import pytest

from mimesys.backend import RunOptions
from mimesys.errors import PlanError
from mimesys.plan import Plan
from mimesys.sim import SimBackend, SimConfig, SimModel, SimParams


@pytest.fixture(scope="module")
def model(catalog):
    return SimModel.from_catalog(catalog, SimParams(n_cpus=4, noise=0.0))


def col(model, values, name):
    return float(values[[m.name for m in model.schema()].index(name)])


def one(catalog, name, threads=4, x=1.0, K=4):
    a = np.zeros((len(catalog), K))
    a[catalog.index(name), :threads] = x
    return a


def test_schema_matches_host_naming(model):
    names = [m.name for m in model.schema()]
    for n in ("cpu.util.core0", "cpu.util.core3", "cpu.util", "mem.bw_Bps", "llc.miss_per_s", "disk.read_Bps",
              "disk.write_Bps", "net.tx_Bps", "net.rx_Bps", "net.lo.tx_Bps", "psi.io.some", "psi.cpu.some"):
        assert n in names
    assert "cpu.util.core4" not in names
    assert len(set(names)) == len(names)
    assert all(m.source == "sim" for m in model.schema())


def test_deterministic_given_rng(catalog):
    m = SimModel.from_catalog(catalog, SimParams())
    a = one(catalog, "mem_random_1G", 2)
    v1, _ = m.step(a, m.idle_state(), np.random.default_rng(7))
    v2, _ = m.step(a, m.idle_state(), np.random.default_rng(7))
    v3, _ = m.step(a, m.idle_state(), np.random.default_rng(8))
    assert np.array_equal(v1, v2)
    assert not np.array_equal(v1, v3)


def test_memory_bandwidth_saturates(model, catalog):
    rng = np.random.default_rng(0)
    bw = [col(model, model.step(one(catalog, "mem_stream_triad_256M", k), model.idle_state(), rng)[0],
              "mem.bw_Bps") for k in (1, 2, 4)]
    assert bw[0] < bw[1] < bw[2] <= model.params.mem_peak_Bps * 1.05
    assert (bw[2] - bw[1]) < (bw[1] - bw[0])          # diminishing returns: saturation


def test_cache_warmth_carries_over(model, catalog):
    rng = np.random.default_rng(0)
    a = one(catalog, "cache_chase_llc", 1)
    cold, state = model.step(a, model.idle_state(), rng)
    warm, _ = model.step(a, state, rng)
    assert col(model, warm, "llc.miss_per_s") < 0.8 * col(model, cold, "llc.miss_per_s")


def test_streaming_evicts_cache_sensitive_neighbour(model, catalog):
    rng = np.random.default_rng(0)
    alone = one(catalog, "cache_chase_llc", 1)
    _, warm = model.step(alone, model.idle_state(), rng)
    v_alone, _ = model.step(alone, warm, rng)
    both = alone.copy()
    both[catalog.index("mem_stream_triad_256M"), 1:] = 1.0
    stream_only = one(catalog, "mem_stream_triad_256M", 3)
    stream_only = np.roll(stream_only, 1, axis=1)
    v_both, _ = model.step(both, warm, rng)
    v_stream, _ = model.step(stream_only, warm, rng)
    extra = col(model, v_both, "llc.miss_per_s") - col(model, v_stream, "llc.miss_per_s")
    assert extra > 2 * col(model, v_alone, "llc.miss_per_s")   # contention: super-additive


def test_saturated_disk_makes_io_threads_wait(model, catalog):
    rng = np.random.default_rng(0)
    v1, _ = model.step(one(catalog, "disk_seq_read_direct", 1), model.idle_state(), rng)
    v4, _ = model.step(one(catalog, "disk_seq_read_direct", 4), model.idle_state(), rng)
    assert col(model, v4, "disk.read_Bps") < 2 * col(model, v1, "disk.read_Bps")
    assert col(model, v4, "disk.read_Bps") <= model.params.disk_read_peak_Bps * 1.05
    util_per_thread = lambda v, k: (col(model, v, "cpu.util") * 4 - 4 * model.params.background_cpu) / k
    assert util_per_thread(v4, 4) < util_per_thread(v1, 1)
    assert col(model, v4, "psi.io.some") > 0.5


def test_deferred_writes_show_next_window(model, catalog):
    rng = np.random.default_rng(0)
    idle = np.zeros((len(catalog), 4))
    _, state = model.step(one(catalog, "disk_fallocate_punch", 4), model.idle_state(), rng)
    after, _ = model.step(idle, state, rng)
    never, _ = model.step(idle, model.idle_state(), rng)
    assert col(model, after, "disk.write_Bps") > col(model, never, "disk.write_Bps") + 1e6


def test_outputs_finite_and_bounded(catalog):
    from controller.campaign.proposals import random_compositions
    m = SimModel.from_catalog(catalog, SimParams(n_cpus=4))
    rng = np.random.default_rng(3)
    comps = random_compositions(rng, 200, len(catalog), 4)
    obs, _ = m.simulate(comps, None, rng)
    frac = np.array([s.unit == "fraction" for s in m.schema()])
    assert np.isfinite(obs).all()
    assert (obs >= 0).all() and (obs[:, frac] <= 1).all()


def test_no_pmu_marks_unsupported(catalog):
    m = SimModel.from_catalog(catalog, SimParams(pmu=False))
    spec = {s.name: s for s in m.schema()}
    assert not spec["mem.bw_Bps"].available and "simulated" in spec["mem.bw_Bps"].reason
    v, _ = m.step(np.zeros((len(catalog), 4)), m.idle_state(), np.random.default_rng(0))
    assert np.isnan(col(m, v, "mem.bw_Bps")) and np.isfinite(col(m, v, "cpu.util"))


def _plan(catalog, T=5, K=4):
    rng = np.random.default_rng(0)
    from controller.campaign.proposals import random_compositions
    return Plan.from_catalog(random_compositions(rng, T, len(catalog), K), catalog, seed=3)


def test_backend_executes_and_labels_simulated(catalog):
    be = SimBackend(SimConfig(n_cpus=4, seed=1), catalog)
    info = be.info()
    assert info.simulated and info.name == "sim" and info.fingerprint["simulated"] is True

    async def run():
        return [w async for w in be.execute(_plan(catalog), RunOptions(repetitions=2, warmup_windows=1))]
    ws = asyncio.run(run())
    assert [(w.repetition, w.window) for w in ws] == [(r, t) for r in range(2) for t in range(5)]
    assert all(w.values.shape == (len(be.metric_schema()),) for w in ws)


def test_backend_rejects_bad_plan(catalog):
    be = SimBackend(SimConfig(n_cpus=2), catalog)

    async def run():
        return [w async for w in be.execute(_plan(catalog, K=4), RunOptions())]
    with pytest.raises(PlanError, match="4 threads but this host has 2"):
        asyncio.run(run())


def test_backend_pacing_and_cancel(catalog):
    be = SimBackend(SimConfig(speedup=20.0), catalog)   # 1 s windows in 50 ms

    async def run():
        import time
        t0 = time.monotonic()
        got = []
        async for w in be.execute(_plan(catalog, T=4), RunOptions()):
            got.append(w)
        paced = time.monotonic() - t0
        agen = be.execute(_plan(catalog, T=1000), RunOptions())
        task = asyncio.ensure_future(agen.__anext__())
        await task
        t1 = time.monotonic()
        await agen.aclose()
        return paced, time.monotonic() - t1, len(got)
    paced, cancel_s, n = asyncio.run(run())
    assert n == 4 and paced >= 0.19
    assert cancel_s < 0.05


def test_backend_from_agent_config_reads_sim_environment(monkeypatch):
    from agentd.config import Config
    monkeypatch.setenv("MIMESYS_SIM_CPUS", "8")
    monkeypatch.setenv("MIMESYS_SIM_SEED", "5")
    be = SimBackend.from_config(Config())
    assert be.max_threads == 8 and be.config.seed == 5 and len(be.metric_schema()) == 8 + 1 + 5 + 2 + 8 + 2 + 5
    monkeypatch.setenv("MIMESYS_SIM_SPEEDUP", "fast")
    with pytest.raises(Exception, match="MIMESYS_SIM_SPEEDUP='fast': expected float"):
        SimBackend.from_config(Config())
