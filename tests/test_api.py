"""The agent's HTTP API through the real app factory on 127.0.0.1 (aiohttp TestServer).

Most tests use the simulated host backend (labelled simulated; fast, no stressors); the
last ones use the real host backend's samplers. Runs of real stressors against a real
agent process are in test_daemon.py.
"""

import asyncio
import contextlib
import io

import h5py
import msgpack
import numpy as np
import pytest
from aiohttp import WSServerHandshakeError
from aiohttp.test_utils import TestClient, TestServer

from mimesys import tracestream, wire
from agentd.api import create_app
from agentd.api.monitor import MonitorHub
from mimesys.backend import Backend, BackendInfo, MonitorSample
from agentd.backend_registry import create_backend
from agentd.config import config_from_dict
from mimesys.errors import ValidationError
from mimesys.metrics import MetricSpec
from mimesys.plan import Plan
from agentd.framelog import FrameLog
from mimesys.trace import Trace

TOKEN = b"test-token-0123456789abcdef"
AUTH = {"Authorization": "Bearer " + TOKEN.decode()}


def make_config(tmp_path, backend="sim", **sections):
    doc = {"agent": {"backend": backend, "state_dir": str(tmp_path / "state"),
                     "scratch_dir": str(tmp_path / "state" / "scratch"), "model_dir": str(tmp_path / "model"),
                     "run_lock": str(tmp_path / "run.lock")},
           "api": {"token_file": str(tmp_path / "token")}}
    for name, values in sections.items():
        doc.setdefault(name, {}).update(values)
    return config_from_dict(doc)


@contextlib.asynccontextmanager
async def agent(tmp_path, backend="sim", headers=AUTH, **sections):
    cfg = make_config(tmp_path, backend, **sections)
    app = create_app(cfg, create_backend(cfg), token=TOKEN)
    async with TestServer(app, host="127.0.0.1") as server:
        async with TestClient(server, headers=headers) as client:
            yield client


def run(coro):
    return asyncio.run(coro)


def cpu_plan(catalog, fractions, threads=2, window_s=1.0) -> Plan:
    """cpu_int_crc32 at fractions[t][k] on thread k in window t."""
    a = np.zeros((len(fractions), len(catalog), threads), np.float32)
    a[:, catalog.index("cpu_int_crc32"), :] = np.asarray(fractions, np.float32)
    return Plan.from_catalog(a, catalog, window_s=window_s)


async def body(resp) -> dict:
    assert resp.content_type == wire.CONTENT_TYPE, await resp.text()
    return msgpack.unpackb(await resp.read())


@pytest.fixture
def sim_paced(monkeypatch):
    """The simulated host at real pace for window_s (runs last long enough to overlap)."""
    monkeypatch.setenv("MIMESYS_SIM_SPEEDUP", "1")
    monkeypatch.setenv("MIMESYS_SIM_CPUS", "2")


@pytest.fixture(autouse=True)
def sim_defaults(monkeypatch):
    monkeypatch.setenv("MIMESYS_SIM_CPUS", "2")


# -- authentication ------------------------------------------------------------------
def test_every_endpoint_needs_the_token(tmp_path):
    async def main():
        async with agent(tmp_path, headers={}) as c:
            for method, path in [("GET", "/v1/info"), ("POST", "/v1/runs"), ("GET", "/v1/runs/x"),
                                 ("DELETE", "/v1/runs/x"), ("GET", "/v1/runs/x/trace.msgpack"),
                                 ("POST", "/v1/generate"), ("GET", "/healthz"), ("GET", "/metrics"),
                                 ("GET", "/v1/nope")]:
                for headers in ({}, {"Authorization": "Bearer wrong-token"}, {"Authorization": "Basic " + TOKEN.decode()},
                                {"Authorization": "Bearer " + TOKEN.decode() + "x"}):
                    async with c.request(method, path, headers=headers, data=wire.pack({})) as r:
                        assert r.status == 401, (method, path, headers)
                        assert "error" in await body(r)
                        assert r.headers["WWW-Authenticate"].startswith("Bearer")
            for path in ("/v1/monitor", "/v1/runs/x/trace"):
                for headers in ({}, {"Authorization": "Bearer nope"}):
                    with pytest.raises(WSServerHandshakeError) as e:
                        await c.ws_connect(path, headers=headers)
                    assert e.value.status == 401
            async with c.get("/healthz", headers=AUTH) as r:
                assert r.status == 200 and (await body(r))["ok"] is True
    run(main())


def test_public_healthz_is_opt_in(tmp_path):
    async def main():
        async with agent(tmp_path, headers={}, api={"public_healthz": True}) as c:
            async with c.get("/healthz") as r:
                assert r.status == 200
            async with c.get("/v1/info") as r:
                assert r.status == 401
    run(main())


# -- limits and malformed bodies -----------------------------------------------------
def test_oversized_body_is_413_declared_or_chunked(tmp_path):
    async def main():
        async with agent(tmp_path, api={"max_body_mib": 0.01}) as c:  # ~10 KiB
            big = wire.pack({"plan": b"\0" * 20000})
            async with c.post("/v1/runs", data=big) as r:
                assert r.status == 413
                assert "exceeds the limit" in (await body(r))["error"]

            async def chunks():
                for _ in range(20):
                    yield b"\0" * 1024
            async with c.post("/v1/runs", data=chunks()) as r:  # no Content-Length
                assert r.status == 413
                assert "exceeds the limit" in (await body(r))["error"]
            async with c.post("/v1/generate", data=big) as r:
                assert r.status == 413
    run(main())


def test_malformed_bodies_are_400_with_the_reason(tmp_path, catalog):
    good = cpu_plan(catalog, [[0.5, 0.5]])
    nan = cpu_plan(catalog, [[0.5, 0.5], [0.5, 0.5]])
    nan.compositions[1, 0, 1] = np.nan
    cases = [
        (b"", "empty request body"),
        (b"\xc1\xc1", "not valid msgpack"),
        (msgpack.packb([1, 2]), "expected a msgpack map"),
        (wire.pack({}), "missing field 'plan'"),
        (wire.pack({"plan": "text"}), "must be a map of raw arrays"),
        (wire.pack({"plan": {**good.to_wire(), "compositions": {"shape": [1, 2], "dtype": "<f4", "bytes": b""}}}),
         "plan.compositions"),
        (wire.pack({"plan": good.to_wire(), "extra": 1}), "unknown field(s) ['extra']"),
        (wire.pack({"plan": good.to_wire(), "options": [1]}), "options must be a map"),
        (wire.pack({"plan": good.to_wire(), "options": {"repetitions": 0}}), "options.repetitions: 0 outside"),
        (wire.pack({"plan": good.to_wire(), "options": {"repetitions": True}}), "options.repetitions: expected an integer"),
        (wire.pack({"plan": good.to_wire(), "options": {"record": "yes"}}), "options.record"),
        (wire.pack({"plan": good.to_wire(), "options": {"seed": -1}}), "options.seed"),
        (wire.pack({"plan": good.to_wire(), "options": {"warmup": 1}}), "valid: repetitions, warmup_windows"),
        (wire.pack({"plan": nan.to_wire()}), "window 1, thread 1"),
        (wire.pack({"plan": cpu_plan(catalog, [[0.5] * 3], threads=3).to_wire()}), "3 threads; this host runs at most 2 (its CPU limit)"),
        (wire.pack({"v": 99, "plan": good.to_wire()}), "wire version 99 not supported"),
    ]

    async def main():
        async with agent(tmp_path) as c:
            for data, fragment in cases:
                async with c.post("/v1/runs", data=data) as r:
                    got = await body(r)
                    assert r.status == 400, (fragment, got)
                    assert fragment in got["error"], (fragment, got)
            async with c.post("/v1/generate", data=wire.pack({"trace": "junk"})) as r:
                assert r.status == 400 and "must be a map of raw arrays" in (await body(r))["error"]
            async with c.post("/v1/generate", data=wire.pack({"trace": {}, "seed": "s"})) as r:
                assert r.status == 400 and "seed" in (await body(r))["error"]
            async with c.get("/v1/runs/not-a-run") as r:
                assert r.status == 404 and "no run" in (await body(r))["error"]
            async with c.get("/v1/runs/20260101T000000Z-abcdef") as r:
                assert r.status == 404
            async with c.put("/v1/runs") as r:
                assert r.status == 405 and "error" in await body(r)
    run(main())


def test_hdf5_never_crosses_the_api_415_names_the_format(tmp_path, catalog):
    """An HDF5 file, as a whole body or in a field, is refused before libhdf5 sees a byte of it."""
    plan = cpu_plan(catalog, [[0.5, 0.5]])
    tr = Trace(values=np.zeros((3, 1), np.float32), metrics=[MetricSpec("cpu.util", "fraction")])
    path = tmp_path / "t.h5"
    tr.write(path)

    async def main():
        async with agent(tmp_path) as c:
            for route, body_ in (("/v1/runs", wire.pack({"plan": plan.to_bytes()})),
                                 ("/v1/runs", plan.to_bytes()),
                                 ("/v1/generate", wire.pack({"trace": path.read_bytes()}))):
                async with c.post(route, data=body_) as r:
                    got = await body(r)
                    assert r.status == 415, got
                    assert "HDF5" in got["error"] and "raw arrays" in got["error"], got
            async with c.post("/v1/runs", data=wire.pack({"plan": b"\0\1 not a file"})) as r:
                got = await body(r)
                assert r.status == 415 and "binary data" in got["error"]
    run(main())


# -- runs -------------------------------------------------------------------------------
def test_run_lifecycle_late_websocket_gets_every_window_from_the_first(tmp_path, catalog):
    plan = cpu_plan(catalog, [[0.2, 0.7], [0.7, 0.2], [0.5, 0.5], [0.0, 1.0]])

    async def main():
        async with agent(tmp_path) as c:
            async with c.post("/v1/runs", data=wire.pack({"plan": plan.to_wire(),
                                                          "options": {"repetitions": 2}})) as r:
                assert r.status == 201
                created = await body(r)
            run_id = created["run_id"]
            assert created["windows_total"] == 8
            for _ in range(200):  # the unpaced simulator finishes quickly
                async with c.get(f"/v1/runs/{run_id}") as r:
                    status = await body(r)
                if status["state"] != "running":
                    break
                await asyncio.sleep(0.02)
            assert status["state"] == "done" and status["windows_done"] == 8 and status["recorded"]
            # Connects after the run ended: still the header, all 8 windows in order, the end.
            frames = []
            async with c.ws_connect(f"/v1/runs/{run_id}/trace") as ws:
                async for msg in ws:
                    frames.append(msgpack.unpackb(msg.data))
            assert frames[0]["type"] == "header" and frames[0]["simulated"] is True
            assert frames[0]["run"]["run_id"] == run_id
            windows = [f for f in frames if f["type"] == "window"]
            assert [(f["repetition"], f["window"]) for f in windows] == [(r, t) for r in range(2) for t in range(4)]
            assert frames[-1] == {"v": 1, "type": "end", "state": "done", "windows_done": 8}
            n = len(frames[0]["metrics"])
            assert all(wire.vec_from_bytes(f["values"], n).shape == (n,) for f in windows)
            async with c.get(f"/v1/runs/{run_id}/trace.msgpack") as r:
                assert r.status == 200 and r.content_type == tracestream.CONTENT_TYPE
                data = await r.read()
            tr = tracestream.read_messages(data, "recorded trace", max_bytes=1 << 20)
            assert tr.T == 8 and tr.simulated and tr.provenance["run_id"] == run_id
            np.testing.assert_array_equal(tr.values[0], wire.vec_from_bytes(windows[0]["values"]))
            async with c.get("/v1/info") as r:
                info = await body(r)
            assert info["backend"] == "sim" and info["simulated"] is True
            assert info["catalog"]["hash"] == catalog.hash and info["schema"]
            async with c.get("/metrics") as r:
                text = await r.text()
            assert r.content_type == "text/plain"
            assert 'mimesys_runs_total{state="done"} 1.0' in text
            assert "mimesys_windows_executed_total 8.0" in text
            assert 'mimesys_agent_info{backend="sim",simulated="true"} 1.0' in text
    run(main())


def test_one_run_at_a_time_409_names_the_running_run_and_delete_cancels(tmp_path, catalog, sim_paced):
    plan = cpu_plan(catalog, [[0.5, 0.5]] * 200, window_s=0.05)  # 10 s at real pace

    async def main():
        async with agent(tmp_path) as c:
            async with c.post("/v1/runs", data=wire.pack({"plan": plan.to_wire()})) as r:
                run_id = (await body(r))["run_id"]
            async with c.post("/v1/runs", data=wire.pack({"plan": plan.to_wire()})) as r:
                assert r.status == 409
                got = await body(r)
            assert got["running"] == run_id and run_id in got["error"]
            async with c.get(f"/v1/runs/{run_id}/trace.msgpack") as r:
                assert r.status == 409  # not written until the run ends
            # A live reader sees windows as they happen.
            async with c.ws_connect(f"/v1/runs/{run_id}/trace") as ws:
                first = msgpack.unpackb((await ws.receive()).data)
                second = msgpack.unpackb((await ws.receive(timeout=5)).data)
                assert first["type"] == "header" and second["type"] == "window" and second["window"] == 0
                async with c.delete(f"/v1/runs/{run_id}") as r:
                    assert r.status == 200 and (await body(r))["state"] == "cancelled"
                rest = [msgpack.unpackb(m.data) async for m in ws]
            assert rest[-1]["type"] == "end" and rest[-1]["state"] == "cancelled"
            async with c.get(f"/v1/runs/{run_id}") as r:
                st = await body(r)
            assert st["state"] == "cancelled" and 0 < st["windows_done"] < 200
            async with c.post("/v1/runs", data=wire.pack({"plan": cpu_plan(catalog, [[0.1, 0.1]], window_s=0.05).to_wire(),
                                                          "options": {"record": False}})) as r:
                assert r.status == 201  # free again
                second_id = (await body(r))["run_id"]
            await asyncio.sleep(0.5)
            async with c.get(f"/v1/runs/{second_id}/trace.msgpack") as r:
                assert r.status == 404 and "no recorded trace" in (await body(r))["error"]
    run(main())


def test_only_the_most_recent_runs_are_kept_on_disk(tmp_path, catalog):
    plan = cpu_plan(catalog, [[0.5, 0.5]])

    async def main():
        async with agent(tmp_path, runs={"keep": 2}) as c:
            ids = []
            for _ in range(4):
                async with c.post("/v1/runs", data=wire.pack({"plan": plan.to_wire()})) as r:
                    ids.append((await body(r))["run_id"])
                for _ in range(100):
                    async with c.get(f"/v1/runs/{ids[-1]}") as r:
                        if (await body(r))["state"] != "running":
                            break
                    await asyncio.sleep(0.02)
                await asyncio.sleep(1.05)  # run ids are stamped to the second
            kept = sorted(p.name for p in (tmp_path / "state" / "runs").iterdir())
            assert kept == sorted(ids[-2:])
            async with c.get(f"/v1/runs/{ids[0]}") as r:
                assert r.status == 404
    run(main())


def test_frame_log_is_bounded_and_tells_a_late_reader_what_it_missed():
    async def main():
        log = FrameLog(wire.pack({"type": "header"}), max_bytes=100)
        for i in range(10):
            log.append(wire.pack({"type": "window", "window": i, "pad": b"x" * 20}))
        log.close(wire.pack({"type": "end", "state": "done"}))
        frames = [msgpack.unpackb(f) async for f in log.follow()]
        assert frames[0]["type"] == "header"
        assert frames[1]["type"] == "gap" and frames[1]["missed"] == log.dropped > 0
        assert [f["window"] for f in frames[2:-1]] == list(range(log.dropped, 10))
        assert frames[-1]["type"] == "end"
    run(main())


# -- generation ---------------------------------------------------------------------------
def test_generate_without_a_model_is_501_after_the_body_checks_out(tmp_path):
    tr = Trace(values=np.zeros((3, 1), np.float32), metrics=[MetricSpec("cpu.util", "fraction")])

    async def main():
        async with agent(tmp_path) as c:
            async with c.post("/v1/generate", data=wire.pack({"trace": tr.to_wire(), "seed": 1})) as r:
                assert r.status == 501
                assert "no generation model installed" in (await body(r))["error"]
    run(main())


# -- monitor -------------------------------------------------------------------------------
class TickingBackend(Backend):
    """A Backend whose monitor ticks fast, for testing the hub's fan-out without a host."""

    def __init__(self, period_s):
        self.period_s = period_s

    def info(self):
        return BackendInfo("ticking", simulated=True, fingerprint={})

    def metric_schema(self):
        return [MetricSpec("x", "1")]

    async def execute(self, plan, options):
        raise NotImplementedError
        yield

    async def monitor(self, interval_s=1.0):
        i = 0
        while True:
            await asyncio.sleep(self.period_s)
            i += 1
            yield MonitorSample(i, np.array([i], np.float32))


def test_monitor_hub_fans_one_loop_out_and_counts_a_slow_clients_misses():
    async def main():
        hub = MonitorHub(TickingBackend(0.005), interval_s=0.005, client_queue=4)
        fast = [hub.subscribe() for _ in range(3)]
        slow = hub.subscribe()
        got = [[] for _ in fast]

        async def read(i):
            while len(got[i]) < 30:
                got[i].append(msgpack.unpackb(await fast[i].get())["seq"])
        await asyncio.wait_for(asyncio.gather(*(read(i) for i in range(3))), 10)
        assert got[0] == got[1] == got[2] == list(range(1, 31))  # one loop, same frames
        assert slow.missed >= 20 and hub.missed_frames == slow.missed
        # The slow client keeps the freshest frames: 4 consecutive sequence numbers, none older.
        kept = [msgpack.unpackb(await slow.get())["seq"] for _ in range(4)]
        assert kept == list(range(kept[0], kept[0] + 4)) and kept[0] > 20
        for s in [*fast, slow]:
            hub.unsubscribe(s)
        assert hub._task is None  # nobody watching: the loop stops
        await hub.close()
    run(main())


def test_monitor_websocket_clients_share_frames_from_the_real_host(tmp_path):
    async def main():
        async with agent(tmp_path, backend="host", monitor={"interval_s": 0.2}) as c:
            async with c.ws_connect("/v1/monitor") as a, c.ws_connect("/v1/monitor") as b:
                ha = msgpack.unpackb((await a.receive(timeout=5)).data)
                hb = msgpack.unpackb((await b.receive(timeout=5)).data)
                assert ha["type"] == hb["type"] == "header" and ha["simulated"] is False
                names = [m["name"] for m in ha["metrics"]]
                sa = [msgpack.unpackb((await a.receive(timeout=5)).data) for _ in range(3)]
                sb = [msgpack.unpackb((await b.receive(timeout=5)).data) for _ in range(3)]
            # Both clients see the loop's frames; one may have joined one tick later.
            assert {f["seq"] for f in sa} & {f["seq"] for f in sb}
            v = wire.vec_from_bytes(sa[-1]["values"], len(names))
            core0 = v[names.index("cpu.util.core0")]
            assert 0.0 <= core0 <= 1.0  # a real /proc/stat reading, not NaN
            async with c.get("/v1/info") as r:
                info = await body(r)
            assert info["backend"] == "host" and info["simulated"] is False
            assert info["samplers"]["cpu"]["state"] == "ok"
            assert info["samplers"]["net"]["state"] == "ok"  # read on the sampler thread
            async with c.get("/metrics") as r:
                text = await r.text()
            assert "mimesys_monitor_samples_total" in text and 'mimesys_sampler_up{sampler="cpu"} 1.0' in text
            assert 'mimesys_host_cpu_busy_ratio{cpu="0"}' in text   # the monitor's last real sample
    run(main())


def test_large_raw_plan_bodies_are_decoded_off_the_event_loop(tmp_path, catalog):
    # Smoke-check that the reply path works for a large valid plan (T=3600) and the agent still answers.
    plan = cpu_plan(catalog, np.full((3600, 2), 0.1))

    async def main():
        async with agent(tmp_path) as c:
            async with c.post("/v1/runs", data=wire.pack({"plan": plan.to_wire(), "options": {"record": False}})) as r:
                assert r.status == 201
            async with c.get("/healthz") as r:
                assert r.status == 200
    run(main())


def test_a_hostile_plan_file_is_refused_at_the_api_and_by_the_file_reader(tmp_path, catalog):
    """What used to be parsed in the agent (hostile attribute types; 100000 threads in a few KiB of
    gzip) is now 415 at the API, and the file reader that `replay` uses still refuses it clearly."""
    odd = io.BytesIO()
    with h5py.File(odd, "w") as f:
        f.create_dataset("compositions", data=np.zeros((1, len(catalog), 2), np.float32))
        f.attrs["format"] = "mimesys.plan"
        f.attrs["schema_version"] = np.array([1, 2])
        f.attrs["catalog_names"] = "{not json"
    wide = io.BytesIO()
    with h5py.File(wide, "w") as f:
        f.create_dataset("compositions", data=np.zeros((1, len(catalog), 100_000), np.float32),
                         compression="gzip", compression_opts=9)
        f.attrs["format"] = "mimesys.plan"
    assert len(wide.getvalue()) < 100_000
    with pytest.raises(ValidationError):
        Plan.from_bytes(odd.getvalue(), where="odd")
    with pytest.raises(ValidationError, match="100000 threads; this host runs at most 2"):
        Plan.from_bytes(wide.getvalue(), where="wide", max_threads=2)

    async def main():
        async with agent(tmp_path) as c:
            for buf in (odd, wide):
                async with c.post("/v1/runs", data=wire.pack({"plan": buf.getvalue()})) as r:
                    assert r.status == 415, await body(r)
    run(main())


def test_websocket_messages_from_clients_are_size_limited(tmp_path):
    async def main():
        async with agent(tmp_path, api={"max_ws_message_kib": 1}, monitor={"interval_s": 5}) as c:
            async with c.ws_connect("/v1/monitor") as ws:
                assert msgpack.unpackb((await ws.receive(timeout=5)).data)["type"] == "header"
                await ws.send_bytes(b"x" * 4096)
                msg = await ws.receive(timeout=5)
                while msg.type.name == "BINARY":
                    msg = await ws.receive(timeout=5)
                assert msg.type.name in ("CLOSE", "CLOSED", "CLOSING")
                assert ws.close_code == 1009  # message too big
    run(main())


def test_concurrent_submissions_exactly_one_runs(tmp_path, catalog, sim_paced):
    plan = cpu_plan(catalog, [[0.5, 0.5]] * 40, window_s=0.05)

    async def main():
        async with agent(tmp_path) as c:
            async def submit():
                async with c.post("/v1/runs", data=wire.pack({"plan": plan.to_wire()})) as r:
                    return r.status, await body(r)
            results = await asyncio.gather(*(submit() for _ in range(6)))
            winners = [b["run_id"] for s, b in results if s == 201]
            assert len(winners) == 1
            assert sorted(s for s, _ in results) == [201] + [409] * 5
            assert all(b["running"] == winners[0] for s, b in results if s == 409)
            async with c.delete(f"/v1/runs/{winners[0]}") as r:
                assert (await body(r))["state"] == "cancelled"
    run(main())
