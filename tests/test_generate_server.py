"""The inference server (`mimesys serve`) and its client commands, on 127.0.0.1: a real
server process-internal app on a TCP port and a real agent (agentd's app with the
SIMULATED host backend) for profiling."""

import asyncio
import json
import threading
from pathlib import Path

import aiohttp
import numpy as np
import pytest
from click.testing import CliRunner

from mimesys import wire
from mimesys.plan import Plan
from mimesys.trace import Trace
from controller.commands.client import generate_from_file, profile_from_file
from controller.export import export_onnx
from controller.inference_server import STATE
from controller.model.config import ModelConfig
from controller.train import TrainConfig, train
from test_exit_status import separate_streams
from test_model_toydata import TOY_METRICS, write_toy_dataset

TOKEN = "server-token-123"


class Servers:
    """The inference server and one simulated agent, in a background event loop."""

    def __init__(self, onnx: Path, dataset: Path, state: Path):
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(onnx, dataset, state), daemon=True)
        self.thread.start()
        assert self.ready.wait(60), "servers did not start"

    def _run(self, onnx, dataset, state):
        asyncio.set_event_loop(self.loop)
        self.loop.run_until_complete(self._start(onnx, dataset, state))
        self.ready.set()
        self.loop.run_forever()

    async def _start(self, onnx, dataset, state):
        from aiohttp import web
        from bench.sim_agents import start_agents
        from controller.inference_server import create_app
        urls, self.agent_runners = await start_agents(1, b"agent-token", state, n_cpus=2, speedup=0.0)
        app = self.app = create_app(onnx, token=TOKEN.encode(), dataset=dataset, agent_url=urls[0], agent_token="agent-token")
        self.runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        self.url = f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}"

    def stop(self):
        async def _stop():
            await self.runner.cleanup()
            for r in self.agent_runners:
                await r.cleanup()
        asyncio.run_coroutine_threadsafe(_stop(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


@pytest.fixture(scope="module")
def servers(tmp_path_factory, catalog):
    d = tmp_path_factory.mktemp("srv")
    data = write_toy_dataset(d / "toy.h5", catalog, S=300)
    train(data, d / "model", TrainConfig(steps=40, batch_size=64, warmup_steps=5, cpu_threads=1), ModelConfig(),
          progress=False)
    export_onnx(d / "model", d / "onnx")
    import h5py
    with h5py.File(data) as f:
        Trace(f["obs"][:12], TOY_METRICS, simulated=True).write(d / "trace.h5")
    s = Servers(d / "onnx", data, d / "agents")
    s.dir = d
    yield s
    s.stop()


def call(servers, method, path, body=None, token=TOKEN):
    async def go():
        async with aiohttp.ClientSession() as sess:
            headers = {"Authorization": f"Bearer {token}"} if token else {}
            async with sess.request(method, servers.url + path, headers=headers,
                                    data=None if body is None else wire.pack(body)) as r:
                return r.status, wire.unpack(await r.read())
    return asyncio.run(go())


def test_health_info_and_auth(servers):
    assert call(servers, "GET", "/healthz") == (200, {"v": 1, "ok": True})
    status, body = call(servers, "GET", "/healthz", token=None)
    assert status == 401 and "Authorization" in body["error"]
    status, info = call(servers, "GET", "/v1/info")
    assert status == 200 and info["methods"] == ["diffusion", "nearest", "knn", "single"]
    assert info["threads"] == 2 and info["simulated_training_data"] is True and info["profiling_agent"]


def test_generate_and_series(servers, catalog):
    trace = Trace.read(servers.dir / "trace.h5").to_wire()
    status, out = call(servers, "POST", "/v1/generate", {"trace": trace, "seed": 2})
    assert status == 200, out
    plan = Plan.from_wire(out["plan"])
    plan.validate(catalog)
    assert plan.T == 12 and out["provenance"]["generator"] == "diffusion"
    status, out = call(servers, "POST", "/v1/generate/series", {"traces": [trace, trace], "method": "knn"})
    assert status == 200 and out["windows"] == [12, 12] and out["method"] == "knn"
    assert [Plan.from_wire(p).T for p in out["plans"]] == [12, 12]


def test_bad_requests_are_4xx_with_a_reason(servers, monkeypatch):
    trace = Trace.read(servers.dir / "trace.h5")
    status, out = call(servers, "POST", "/v1/generate", {"trace": "junk"})
    assert status == 400 and "trace" in out["error"]
    status, out = call(servers, "POST", "/v1/generate", {"trace": (servers.dir / "trace.h5").read_bytes()})
    assert status == 415 and "HDF5" in out["error"] and "Trace.to_wire" in out["error"]
    status, out = call(servers, "POST", "/v1/generate", {"trace": trace.to_wire(), "method": "oracle"})
    assert status == 400 and "not served here" in out["error"]
    status, out = call(servers, "POST", "/v1/generate/series", {"traces": []})
    assert status == 400
    status, out = call(servers, "POST", "/v1/generate/series", {"traces": [trace.to_wire(), b"x"]})
    assert status == 415 and "traces[1]" in out["error"]
    # A series is bounded by its windows in all, checked before anything is planned.
    monkeypatch.setattr(servers.app[STATE], "max_windows", 20)
    status, out = call(servers, "POST", "/v1/generate/series", {"traces": [trace.to_wire()] * 2})
    assert status == 400 and "24 windows in this request; this server plans at most 20" in out["error"], out


def test_client_commands_write_plans_pngs_and_profile_on_the_agent(servers, tmp_path, monkeypatch):
    monkeypatch.setenv("MIMESYS_TOKEN", TOKEN)
    out = separate_streams().invoke(generate_from_file, ["--server", servers.url, "--file",
                                                         str(servers.dir / "trace.h5"), "-o", str(tmp_path / "plan.h5"),
                                                         "--json"])
    assert out.exit_code == 0, out.output
    assert Plan.read(tmp_path / "plan.h5").T == 12
    assert json.loads(out.stdout) == {"plan": str(tmp_path / "plan.h5"), "png": str(tmp_path / "plan.png"),
                                      "windows": 12, "method": "diffusion"}
    assert (tmp_path / "plan.png").read_bytes()[:4] == b"\x89PNG"
    out = CliRunner().invoke(profile_from_file, ["--server", servers.url, "--file", str(servers.dir / "trace.h5"),
                                                 "-o", str(tmp_path / "cmp.png"), "--trace", str(tmp_path / "exec.h5")])
    assert out.exit_code == 0, out.output
    rep = json.loads(out.output.strip().splitlines()[-1])
    assert rep["simulated"] is True and rep["windows"] == 12
    out = separate_streams().invoke(profile_from_file, ["--server", servers.url, "--file",
                                                        str(servers.dir / "trace.h5"), "-o", str(tmp_path / "cmp2.png"),
                                                        "--json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout)["windows"] == 12   # stdout is the JSON alone (the bar is on stderr)
    assert 0 <= rep["dtw"]["cpu.util.core0"] <= 1
    executed = Trace.read(tmp_path / "exec.h5")
    assert executed.simulated and executed.T == 12 and np.isfinite(executed.column("cpu.util.core0")).all()
    assert (tmp_path / "cmp.png").read_bytes()[:4] == b"\x89PNG"
