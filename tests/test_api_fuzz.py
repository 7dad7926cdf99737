"""Fuzz the body-taking endpoints: whatever a client sends, the answer is a 4xx with a reason,
never a 500 (and the agent keeps serving). Runs against the real app on 127.0.0.1 with the
simulated host backend, so an accepted plan (201) costs nothing."""

import asyncio
import io

import h5py
import msgpack
import numpy as np
import pytest
from aiohttp.test_utils import TestClient, TestServer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mimesys import wire
from agentd.api import create_app
from agentd.backend_registry import create_backend

from test_api import AUTH, TOKEN, make_config

ENDPOINTS = ("/v1/runs", "/v1/generate")


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    """One agent for all examples, driven from a private event loop."""
    import os
    os.environ.setdefault("MIMESYS_SIM_CPUS", "2")
    loop = asyncio.new_event_loop()
    cfg = make_config(tmp_path_factory.mktemp("fuzz"), "sim", api={"max_body_mib": 1})
    app = create_app(cfg, create_backend(cfg), token=TOKEN)
    server = TestServer(app, host="127.0.0.1")
    c = TestClient(server, headers=AUTH, loop=loop)
    loop.run_until_complete(c.start_server())

    def post(path, data):
        async def go():
            async with c.post(path, data=data) as r:
                return r.status, r.content_type, await r.read()
        return loop.run_until_complete(go())

    def cancel_current():
        async def go():
            async with c.get("/v1/info") as r:
                cur = msgpack.unpackb(await r.read())["current_run"]
            if cur:
                async with c.delete(f"/v1/runs/{cur}") as r:
                    await r.read()
        loop.run_until_complete(go())

    post.cancel_current = cancel_current
    yield post
    loop.run_until_complete(c.close())
    loop.close()


def check(status, content_type, data):
    assert status < 500, (status, data[:300])
    if status >= 400:
        assert content_type == wire.CONTENT_TYPE
        reply = msgpack.unpackb(data)
        assert isinstance(reply.get("error"), str) and reply["error"], reply


scalars = st.one_of(st.none(), st.booleans(), st.integers(min_value=-(2**63), max_value=2**64 - 1),
                    st.floats(allow_nan=True), st.text(max_size=20), st.binary(max_size=64))
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                        st.dictionaries(st.text(max_size=8), inner, max_size=4)),
                      max_leaves=12)
keys = st.sampled_from(["plan", "options", "trace", "seed", "v", "x"]) | st.text(max_size=8)
option_maps = st.dictionaries(st.sampled_from(["repetitions", "warmup_windows", "record", "seed", "bogus"]),
                              scalars, max_size=4)


def hdf5_with(attrs: dict, data) -> bytes:
    buf = io.BytesIO()
    with h5py.File(buf, "w") as f:
        if data is not None:
            f.create_dataset("compositions" if "plan" in attrs.get("format", "") else "values", data=data)
        for k, v in attrs.items():
            f.attrs[k] = v
    return buf.getvalue()


hdf5_bodies = st.builds(
    hdf5_with,
    st.fixed_dictionaries({}, optional={
        "format": st.sampled_from(["mimesys.plan", "mimesys.trace", "x"]),
        "schema_version": st.integers(-3, 5),
        "catalog_names": st.sampled_from(['["cpu_int_crc32"]', "[1]", "{", "null"]),
        "metrics": st.sampled_from(['[{"name": "cpu.util"}]', "[]", '[{"x": 1}]', "7"]),
        "window_s": st.floats(allow_nan=True),
        "seed": st.integers(-5, 5),
    }),
    st.one_of(st.none(), st.builds(lambda shape, fill: np.full(shape, fill, np.float32),
                                   st.sampled_from([(1,), (1, 18, 2), (2, 18, 3), (0, 18, 2), (3, 1)]),
                                   st.floats(width=32, allow_nan=True, allow_infinity=True))))

def _valid_plan() -> bytes:
    from mimesys.catalog import load_catalog
    from mimesys.plan import Plan
    cat = load_catalog()
    return Plan.from_catalog(np.full((2, len(cat), 2), 0.01, np.float32), cat, window_s=0.05).to_bytes()


# Valid plans too, so random options also reach the run manager (201, then cancelled).
plan_bodies = st.one_of(hdf5_bodies, st.just(_valid_plan()))

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@FUZZ
@given(path=st.sampled_from(ENDPOINTS), data=st.binary(max_size=512))
def test_random_bytes_never_500(client, path, data):
    check(*client(path, data))


@FUZZ
@given(path=st.sampled_from(ENDPOINTS), body=st.dictionaries(keys, values, max_size=5))
def test_random_msgpack_maps_never_500(client, path, body):
    check(*client(path, msgpack.packb(body, use_bin_type=True)))


@FUZZ
@given(path=st.sampled_from(ENDPOINTS), blob=plan_bodies, options=option_maps, seed=scalars)
def test_hostile_hdf5_files_and_options_never_500(client, path, blob, options, seed):
    body = {"plan": blob, "options": options} if path == "/v1/runs" else {"trace": blob, "seed": seed}
    status, ctype, data = client(path, wire.pack(body))
    check(status, ctype, data)
    if status in (201, 409):
        client.cancel_current()  # an accepted plan: free the agent for the next example
