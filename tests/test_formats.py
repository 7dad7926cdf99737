"""Plan, trace and catalog formats: round trips and the validation errors users see."""

import numpy as np
import pytest

from mimesys.catalog import load_catalog
from mimesys.errors import CatalogError, PlanError, TraceError
from mimesys.metrics import Availability, MetricSpec
from mimesys.plan import Plan
from mimesys.trace import Trace


def _plan(catalog, T=4, K=2, seed=1):
    rng = np.random.default_rng(seed)
    a = rng.dirichlet(np.ones(len(catalog) + 1), size=(T, K)).astype(np.float32)[..., :-1]  # [T, K, M]
    return Plan.from_catalog(np.transpose(a, (0, 2, 1)).copy(), catalog, seed=seed, provenance={"by": "test"})


def test_catalog_has_every_class_and_stable_hash(catalog):
    assert len(catalog) >= 16
    assert {s.resource_class for s in catalog.stressors} == {"cpu", "cache", "memory", "disk", "network"}
    assert catalog.hash == load_catalog(catalog.path).hash
    assert catalog.hash.startswith("sha256:")


def test_catalog_rejects_duplicates(tmp_path):
    p = tmp_path / "c.toml"
    entry = '[[stressor]]\nname="a"\nkernel="k"\nclass="cpu"\ndescription="d"\n'
    p.write_text(entry + entry)
    with pytest.raises(CatalogError, match="duplicate name 'a'"):
        load_catalog(p)


def test_catalog_names_a_misspelt_key_and_the_valid_ones(tmp_path):
    p = tmp_path / "c.toml"
    p.write_text('[[stressor]]\nname="a"\nkernel="k"\nclass="cpu"\ndescription="d"\nparms={n=1}\n')
    with pytest.raises(CatalogError, match=r"c.toml: stressor #1: unknown key\(s\) \['parms'\]; valid: name, kernel"):
        load_catalog(p)
    p.write_text('stressors=[]\n')
    with pytest.raises(CatalogError, match=r"unknown key\(s\) \['stressors'\]"):
        load_catalog(p)
    p.write_text('[[stressor]\n')
    with pytest.raises(CatalogError, match="c.toml: not valid TOML"):
        load_catalog(p)


def test_plan_round_trip(tmp_path, catalog):
    plan = _plan(catalog).validate(catalog)
    plan.write(tmp_path / "p.h5")
    back = Plan.read(tmp_path / "p.h5").validate(catalog)
    np.testing.assert_array_equal(back.compositions, plan.compositions)
    assert back.provenance == {"by": "test"} and back.seed == 1 and back.catalog_hash == catalog.hash
    assert Plan.from_bytes(plan.to_bytes()).catalog_names == catalog.names


@pytest.mark.parametrize("edit,match", [
    (lambda a: a.__setitem__((2, 3, 1), np.nan), r"non-finite value \(window 2, thread 1, stressor"),
    (lambda a: a.__setitem__((1, 0, 0), -0.25), r"outside \[0, 1\] \(window 1, thread 0, stressor 'cpu_int_crc32'\)"),
    (lambda a: a.__setitem__((3, slice(0, 3), 1), 0.5), r"sum to more than 1 \(window 3, thread 1\)"),
])
def test_plan_validation_names_the_place(catalog, edit, match):
    plan = _plan(catalog)
    plan.compositions[:] = 0
    edit(plan.compositions)
    with pytest.raises(PlanError, match=match):
        plan.validate(catalog)


def test_plan_rejects_unknown_and_reordered_catalog(catalog):
    plan = _plan(catalog)
    plan.catalog_names = ["bogus"] + plan.catalog_names[1:]
    with pytest.raises(PlanError, match="unknown stressor.*'bogus'"):
        plan.validate(catalog)
    plan = _plan(catalog)
    plan.catalog_names = [plan.catalog_names[1], plan.catalog_names[0]] + plan.catalog_names[2:]
    with pytest.raises(PlanError, match="catalog order differs from this agent's at position 0"):
        plan.validate(catalog)


def test_plan_shape_mismatch(catalog):
    plan = _plan(catalog)
    plan.compositions = plan.compositions[:, :-1, :]
    with pytest.raises(PlanError, match="shape mismatch"):
        plan.validate(catalog)


def test_plan_read_garbage(tmp_path):
    p = tmp_path / "bad.h5"
    p.write_bytes(b"not hdf5 at all")
    with pytest.raises(PlanError, match="bad.h5: not a readable HDF5 plan"):
        Plan.read(p)


def test_trace_round_trip_and_csv(tmp_path):
    metrics = [MetricSpec("cpu.util.core0", "fraction"),
               MetricSpec("llc.miss_per_s", "1/s", Availability.UNSUPPORTED, "perf_event_open: ENOENT")]
    values = np.array([[0.5, np.nan], [0.25, np.nan]], np.float32)
    tr = Trace(values, metrics, window_start_ns=np.array([10, 20]), simulated=True)
    tr.write(tmp_path / "t.h5")
    back = Trace.read(tmp_path / "t.h5")
    assert back.simulated and back.metrics[1].availability is Availability.UNSUPPORTED
    np.testing.assert_array_equal(back.values, values)
    back.write_csv(tmp_path / "t.csv")
    lines = (tmp_path / "t.csv").read_text().splitlines()
    assert lines[0] == "window,start_s,cpu.util.core0,llc.miss_per_s"
    assert lines[1] == "0,0.000000,0.5,"


def test_trace_schema_mismatch():
    with pytest.raises(TraceError, match="2 columns but the schema lists 1"):
        Trace(np.zeros((3, 2), np.float32), [MetricSpec("a", "")]).validate()
