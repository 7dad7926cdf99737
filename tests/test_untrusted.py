"""Untrusted files and bodies (issue 16): every HDF5 from outside is checked before a byte of
data is read, errors give indices and never values, wire bodies carry raw arrays and msgpack
is decoded with limits. Each test is one finding of the review at e177fa4."""

import io
import json
from pathlib import Path

import h5py
import msgpack
import numpy as np
import pytest

from mimesys import wire
from mimesys.errors import PlanError, TraceError, ValidationError
from mimesys.metrics import MetricSpec
from mimesys.plan import Plan
from mimesys.trace import Trace
from mimesys.untrusted import unpack_limited
from test_api import agent, body, cpu_plan, run

SECRET = b"TOPSECRET-KEY-MATERIAL\n"


def _plan_attrs(f, catalog):
    f.attrs["format"] = "mimesys.plan"
    f.attrs["schema_version"] = 1
    f.attrs["catalog_hash"] = catalog.hash
    f.attrs["catalog_names"] = json.dumps(catalog.names)


def _external_plan(tmp_path, catalog) -> Path:
    """A plan whose /compositions bytes are another file on the reader's host (the secret)."""
    secret = tmp_path / "secret.key"
    secret.write_bytes(SECRET * 8)
    p = tmp_path / "ext.h5"
    with h5py.File(p, "w") as f:
        f.create_dataset("compositions", shape=(1, len(catalog), 1), dtype="<u2",
                         external=[(str(secret), 0, h5py.h5f.UNLIMITED)])
        _plan_attrs(f, catalog)
    return p


def test_external_storage_plan_is_refused_and_no_secret_byte_leaks(tmp_path, catalog):
    p = _external_plan(tmp_path, catalog)
    first = int(np.frombuffer(SECRET[:2], "<u2")[0])
    with pytest.raises(PlanError, match="external file") as e:
        Plan.read(p)
    assert str(first) not in str(e.value)
    # The same file over the wire, as HDF5 bytes: the body names the secret by absolute path.
    with pytest.raises(PlanError, match="external file") as e:
        Plan.from_bytes(p.read_bytes(), where="plan")
    assert str(first) not in str(e.value)


def test_validation_errors_name_indices_never_values(catalog):
    plan = cpu_plan(catalog, [[0.0, 0.0]])
    plan.compositions[0, 0, 1] = 20308.0
    with pytest.raises(PlanError) as e:
        plan.validate(catalog)
    assert "20308" not in str(e.value) and "window 0, thread 1" in str(e.value)
    plan.compositions[0, 0, 1] = 0.75
    plan.compositions[0, 1, 1] = 0.75
    with pytest.raises(PlanError) as e:
        plan.validate(catalog)
    assert "1.5" not in str(e.value) and "window 0, thread 1" in str(e.value)


def _plan_file(catalog, build) -> bytes:
    buf = io.BytesIO()
    with h5py.File(buf, "w") as f:
        build(f)
        _plan_attrs(f, catalog)
    return buf.getvalue()


def test_virtual_dataset_is_refused(tmp_path, catalog):
    src = tmp_path / "src.h5"
    with h5py.File(src, "w") as f:
        f.create_dataset("x", data=np.zeros((1, len(catalog), 1), np.float32))
    layout = h5py.VirtualLayout(shape=(1, len(catalog), 1), dtype="<f4")
    layout[:] = h5py.VirtualSource(str(src), "x", shape=(1, len(catalog), 1))
    data = _plan_file(catalog, lambda f: f.create_virtual_dataset("compositions", layout))
    with pytest.raises(PlanError, match="virtual dataset"):
        Plan.from_bytes(data)


@pytest.mark.parametrize("link", ["soft", "external"])
def test_links_other_than_hard_are_refused(tmp_path, catalog, link):
    def build(f):
        f.create_dataset("real", data=np.zeros((1, len(catalog), 1), np.float32))
        f["compositions"] = (h5py.SoftLink("/real") if link == "soft"
                             else h5py.ExternalLink("/etc/mimesys/tls/key.h5", "/x"))
    with pytest.raises(PlanError, match="only hard links"):
        Plan.from_bytes(_plan_file(catalog, build))


def test_sub_array_dtype_bomb_is_refused_before_reading(catalog):
    # 18 x 1 cells of a 5,000,000-float sub-array type: a tiny body declaring ~360 MB.
    dt = np.dtype(("<f4", (5_000_000,)))
    data = _plan_file(catalog, lambda f: f.create_dataset("compositions", shape=(1, len(catalog), 1), dtype=dt,
                                                          chunks=(1, 1, 1)))
    assert len(data) < 10_000
    with pytest.raises(PlanError, match="only plain integer or float"):
        Plan.from_bytes(data)


def test_unwritten_chunks_declaring_too_much_are_refused(catalog):
    def build(f):
        f.create_dataset("compositions", data=np.zeros((1, len(catalog), 1), np.float32))
        f.create_dataset("junk", shape=(1 << 20, 1 << 10), dtype="<f4", chunks=(1, 1024))  # 4 GiB, unwritten
    data = _plan_file(catalog, build)
    assert len(data) < 100_000
    with pytest.raises(PlanError, match="declares"):
        Plan.from_bytes(data)


def test_filters_outside_the_allow_list_are_refused(catalog):
    data = _plan_file(catalog, lambda f: f.create_dataset(
        "compositions", data=np.zeros((1, len(catalog), 1), np.float32), compression="lzf"))
    with pytest.raises(PlanError, match="filter 32000"):
        Plan.from_bytes(data)


def test_gzip_plans_still_read(catalog):
    plan = cpu_plan(catalog, [[0.5, 0.25]])
    back = Plan.from_bytes(plan.to_bytes())
    assert np.array_equal(back.compositions, plan.compositions)


def _trace_bytes(build) -> bytes:
    buf = io.BytesIO()
    with h5py.File(buf, "w") as f:
        f.create_dataset("values", data=np.zeros((3, 1), np.float32))
        f.attrs["format"] = "mimesys.trace"
        f.attrs["schema_version"] = 1
        f.attrs["metrics"] = '[{"name": "cpu.util"}]'
        build(f)
    return buf.getvalue()


def test_window_start_ns_is_size_checked_before_reading():
    data = _trace_bytes(lambda f: f.create_dataset("window_start_ns", shape=(100_000_000,), dtype="<i8",
                                                   chunks=(1 << 16,)))
    assert len(data) < 100_000
    with pytest.raises(TraceError, match="one entry per window"):
        Trace.read(data)


def test_trace_with_external_storage_is_refused(tmp_path):
    secret = tmp_path / "secret"
    secret.write_bytes(SECRET * 4)
    data = _trace_bytes(lambda f: f.create_dataset("window_start_ns", shape=(3,), dtype="<i8",
                                                   external=[(str(secret), 0, h5py.h5f.UNLIMITED)]))
    with pytest.raises(TraceError, match="external file"):
        Trace.read(data, where="trace.h5 from agent a")


def test_msgpack_object_bomb_is_refused():
    # 200,000 empty arrays: 200 KB of body, ~11 MB of Python lists if decoded freely.
    data = msgpack.packb({"plan": [[] for _ in range(60_000)], "x": [[] for _ in range(60_000)],
                          "y": [[] for _ in range(60_000)], "z": [[] for _ in range(60_000)]})
    with pytest.raises(ValidationError, match="entries"):
        unpack_limited(data, "body")
    with pytest.raises(ValidationError, match="msgpack"):
        wire.unpack(msgpack.packb([0] * 200_000), where="body")   # one container too long


def test_raw_plan_on_the_wire_runs_and_hostile_shapes_are_400(tmp_path, catalog):
    plan = cpu_plan(catalog, [[0.5, 0.5]] * 2)

    async def main():
        async with agent(tmp_path) as c:
            async with c.post("/v1/runs", data=wire.pack({"plan": plan.to_wire()})) as r:
                assert r.status == 201, await body(r)
            bad = plan.to_wire()
            bad["compositions"]["shape"] = [100_000, len(catalog), 2]   # 24 bytes of shape claim 14 MB
            async with c.post("/v1/runs", data=wire.pack({"plan": bad})) as r:
                assert r.status == 400
                assert "expected" in (await body(r))["error"]
    run(main())


def test_raw_trace_round_trips():
    tr = Trace(np.arange(6, dtype=np.float32).reshape(3, 2), [MetricSpec("a", "1"), MetricSpec("b", "1")],
               window_start_ns=np.arange(3, dtype=np.int64))
    back = Trace.from_wire(wire.unpack(wire.pack({"t": tr.to_wire()}))["t"])
    assert np.array_equal(back.values, tr.values) and np.array_equal(back.window_start_ns, tr.window_start_ns)
    w = tr.to_wire()
    w["window_start_ns"] = {"shape": [4], "dtype": "<i8", "bytes": b"\0" * 32}
    with pytest.raises(TraceError, match="at most 3"):
        Trace.from_wire(w)


def test_hdf5_in_a_request_is_refused_before_libhdf5_reads_it(catalog, monkeypatch):
    # 100 MB declared by a ~10 KB body: no HDF5 body is parsed at all (415), so its size never matters.
    from mimesys.api import bodies
    from mimesys.errors import UnsupportedMediaType
    data = _plan_file(catalog, lambda f: f.create_dataset("compositions", shape=(40_000, len(catalog), 36),
                                                          dtype="<f4", chunks=(1000, len(catalog), 1)))
    assert len(data) < 50_000
    monkeypatch.setattr(h5py, "File", None)          # reaching libhdf5 would fail differently
    with pytest.raises(UnsupportedMediaType, match="HDF5 file bytes"):
        bodies.plan_field({"plan": data})
    with pytest.raises(UnsupportedMediaType, match="HDF5 file bytes"):
        bodies.trace_field({"trace": data})
    with pytest.raises(UnsupportedMediaType, match="request body is an HDF5 file"):
        bodies.body_map(data, allowed=("plan",), required=("plan",), max_bytes=1 << 20)
    monkeypatch.undo()
    assert Plan.from_bytes(cpu_plan(catalog, [[0.5, 0.5]] * 3).to_bytes()).T == 3


def _plan_with_attr(catalog, key, value, **file_kw) -> bytes:
    buf = io.BytesIO()
    with h5py.File(buf, "w", **file_kw) as f:
        f.create_dataset("compositions", data=np.zeros((1, len(catalog), 1), np.float32))
        _plan_attrs(f, catalog)
        if isinstance(value, str):
            f.attrs[key] = value
        else:
            f.attrs.create(key, data=value)
    return buf.getvalue()


@pytest.mark.parametrize("key, value, message", [
    ("provenance", "[" * 100_000 + "]" * 100_000, "attribute provenance: JSON nested more than 32 deep"),
    ("host_fingerprint", "[" + "[]," * 300_000 + "[]]", "attribute host_fingerprint: more than 250000 JSON values"),
    ("provenance", '"' + "x" * (5 << 20) + '"', "attribute provenance: 5242882 characters of JSON; at most"),
    ("catalog_names", '["a", ', "attribute catalog_names: not valid JSON"),
    ("provenance", np.zeros((1000, 1000), np.float32), "attribute provenance: expected one JSON string"),
    ("provenance", np.bytes_(b"{}" + b" " * (5 << 20)), "attribute provenance: 5242882 bytes; at most"),
])
def test_json_attributes_are_bounded_before_they_are_decoded(tmp_path, catalog, key, value, message):
    """Issue 41, finding 5: JSON attributes were json.loads'ed at any size and depth (a 60 MB
    `[[],[],…]` is ~1.3 GB of objects; deep nesting a RecursionError, a 500 with a traceback)."""
    data = _plan_with_attr(catalog, key, value, libver="latest")   # latest: attributes over 64 KiB
    with pytest.raises(PlanError) as e:
        Plan.from_bytes(data, where="plan.h5")
    assert str(e.value).startswith(f"plan.h5: {message}"), str(e.value)
    trace = io.BytesIO()
    with h5py.File(trace, "w", libver="latest") as f:
        f.create_dataset("values", data=np.zeros((3, 1), np.float32))
        f.attrs.update({"format": "mimesys.trace", "schema_version": 1, "metrics": '[{"name": "cpu.util"}]'})
        f.attrs[key if key != "catalog_names" else "metrics"] = value
    with pytest.raises(TraceError, match="trace.h5: attribute (provenance|host_fingerprint|metrics): "):
        Trace.read(trace.getvalue(), where="trace.h5")


def test_a_deeply_nested_plan_attribute_is_a_clear_error_not_a_traceback(tmp_path, catalog):
    # The plan file a `replay` reads (HDF5 no longer reaches the API: 415 there).
    data = _plan_with_attr(catalog, "provenance", "[" * 50_000 + "]" * 50_000)
    with pytest.raises(PlanError, match="attribute provenance: JSON nested more than 32 deep"):
        Plan.from_bytes(data, where="plan")
    deep = {"provenance": {}}
    node = deep["provenance"]
    for _ in range(40):
        node["x"] = {}
        node = node["x"]

    async def main():
        async with agent(tmp_path) as c:
            plan = cpu_plan(catalog, [[0.5, 0.5]])
            # 40 deep: within msgpack's own stack, over the body's 32
            async with c.post("/v1/runs", data=msgpack.packb({"plan": {**plan.to_wire(), **deep}})) as r:
                assert r.status == 400, await r.text()
                assert "request body: nested more than 32 deep" in (await body(r))["error"]
            # 20 deep in the plan's provenance: the run's trace would nest it a level further
            shallow = {"provenance": {}}
            node = shallow["provenance"]
            for _ in range(20):
                node["x"] = {}
                node = node["x"]
            async with c.post("/v1/runs", data=msgpack.packb({"plan": {**plan.to_wire(), **shallow}})) as r:
                assert r.status == 400, await r.text()
                assert "plan.provenance: nested more than 16 deep" in (await body(r))["error"]
    run(main())


def test_a_file_is_sized_as_read_not_as_stored(catalog):
    """uint8 on disk becomes float32 (or int64) in memory: a file declaring 0.3 GiB of bytes is
    2.4 GiB read, past the plan limit, and refused before a value is read."""
    M = len(catalog)
    T = (300 << 20) // (M * 64)
    data = _plan_file(catalog, lambda f: f.create_dataset("compositions", shape=(T, M, 64), dtype="u1",
                                                          chunks=(1024, M, 64)))
    assert len(data) < 100_000
    with pytest.raises(PlanError, match=r"declares \d+ bytes \(as read\); at most 1073741824"):
        Plan.from_bytes(data, where="plan")


def test_a_chunk_bomb_is_refused_before_it_is_read(catalog):
    """Small enough as data (86 MB), but stored in one-value chunks: 21.6 M chunk lookups in one
    read that holds the GIL."""
    M = len(catalog)
    data = _plan_file(catalog, lambda f: f.create_dataset("compositions", shape=(600_000, M, 2), dtype="<f4",
                                                          chunks=(1, 1, 1)))
    assert len(data) < 100_000
    with pytest.raises(PlanError, match=r"stored in \d+ chunks; at most 1048576"):
        Plan.from_bytes(data, where="plan")
