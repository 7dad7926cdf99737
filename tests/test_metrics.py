"""/metrics: access (read-only scrape), exact values, stable series, the names Prometheus
users expect. Through the real app factory on 127.0.0.1; the scrape is parsed with
prometheus_client's own text parser, as a Prometheus server would read it."""

import asyncio
import time

import numpy as np
import pytest
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client.parser import text_string_to_metric_families

from mimesys import wire
from agentd.api import create_app
from agentd.api.state import BACKEND, RUNS
from mimesys.backend import RunOptions
from agentd.backend_registry import create_backend
from agentd.prometheus.names import prom_name
from agentd.prometheus.telemetry import SegmentErrors

from test_api import AUTH, TOKEN, cpu_plan, make_config

METRICS_TOKEN = b"metrics-only-token-0123456789"


@pytest.fixture(autouse=True)
def sim_defaults(monkeypatch):
    monkeypatch.setenv("MIMESYS_SIM_CPUS", "2")


def samples(text: str) -> dict:
    """{(name, frozenset(labels)): value} of every sample in a scrape."""
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


async def _app(tmp_path, backend="sim", **api):
    cfg = make_config(tmp_path, backend, api=api) if api else make_config(tmp_path, backend)
    mt = METRICS_TOKEN if api.get("metrics_token_file") else None
    return create_app(cfg, create_backend(cfg), token=TOKEN, metrics_token=mt)


def test_metrics_token_reads_metrics_only_and_the_run_token_still_reads(tmp_path):
    mt = tmp_path / "metrics-token"
    mt.write_bytes(METRICS_TOKEN)
    mt.chmod(0o600)

    async def main():
        app = await _app(tmp_path, metrics_token_file=str(mt))
        async with TestServer(app, host="127.0.0.1") as server, TestClient(server) as c:
            ro = {"Authorization": "Bearer " + METRICS_TOKEN.decode()}
            async with c.get("/metrics", headers=ro) as r:
                assert r.status == 200 and "mimesys_build_info" in await r.text()
            for method, path in (("GET", "/v1/info"), ("POST", "/v1/runs"), ("GET", "/healthz")):
                async with c.request(method, path, headers=ro) as r:
                    assert r.status == 401, path
            async with c.get("/metrics") as r:
                assert r.status == 401   # not public unless configured
            async with c.get("/metrics", headers=AUTH) as r:
                assert r.status == 200
    asyncio.run(main())


def test_public_metrics_needs_no_token_and_opens_nothing_else(tmp_path):
    async def main():
        app = await _app(tmp_path, public_metrics=True)
        async with TestServer(app, host="127.0.0.1") as server, TestClient(server) as c:
            async with c.get("/metrics") as r:
                assert r.status == 200
                assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
            async with c.get("/v1/info") as r:
                assert r.status == 401
    asyncio.run(main())


def test_metrics_token_file_is_checked_like_the_run_token(tmp_path):
    from mimesys.errors import ConfigError
    mt = tmp_path / "metrics-token"
    mt.write_bytes(METRICS_TOKEN)
    mt.chmod(0o644)
    cfg = make_config(tmp_path, api={"metrics_token_file": str(mt)})
    with pytest.raises(ConfigError, match=r"api.metrics_token_file .* world-readable"):
        cfg.read_metrics_token()


def test_counters_are_exact_past_ten_million_and_series_do_not_churn(tmp_path):
    async def main():
        app = await _app(tmp_path, "host", public_metrics=True)   # the real samplers' states
        async with TestServer(app, host="127.0.0.1") as server, TestClient(server) as c:
            runs = app[RUNS]
            big = 10**7 + 1
            runs.counters.windows_executed = big
            runs.counters.runs_by_state["done"] = 2**40 + 3
            async with c.get("/metrics") as r:
                text = await r.text()
            s = samples(text)
            assert s[("mimesys_windows_executed_total", frozenset())] == big
            assert s[("mimesys_runs_total", frozenset({("state", "done")}))] == 2**40 + 3
            # %g would have printed 1e+07 for 10000001.
            assert "mimesys_windows_executed_total 1e+07\n" not in text
            keys_before = {k for k in s if k[0].startswith("mimesys_sampler")}
            # A sampler changing state flips values; the set of series stays the same.
            backend = app[BACKEND]
            st = backend.sampler_states()
            name = next(iter(st))
            backend.sampler_states = lambda: {**st, name: {**st[name], "state": "failing", "errors": 7}}
            async with c.get("/metrics") as r:
                s2 = samples(await r.text())
            assert {k for k in s2 if k[0].startswith("mimesys_sampler")} == keys_before
            assert s2[("mimesys_sampler_state", frozenset({("sampler", name),
                                                            ("mimesys_sampler_state", "failing")}))] == 1
            assert s2[("mimesys_sampler_up", frozenset({("sampler", name)}))] == 0
    asyncio.run(main())


def test_scrape_has_build_process_run_progress_and_host_gauges(tmp_path, catalog):
    plan = cpu_plan(catalog, [[0.5, 0.25]] * 6)

    async def main():
        app = await _app(tmp_path, public_metrics=True)
        async with TestServer(app, host="127.0.0.1") as server, TestClient(server, headers=AUTH) as c:
            run = await app[RUNS].start(plan, RunOptions())
            await asyncio.wait_for(run.task, 30)
            async with c.get("/metrics") as r:
                return samples(await r.text())
    s = asyncio.run(main())
    names = {k[0] for k in s}
    from mimesys import __version__
    assert any(k[0] == "mimesys_build_info" and ("version", __version__) in k[1] for k in s)
    assert {"process_resident_memory_bytes", "process_cpu_seconds_total", "process_open_fds"} <= names
    assert s[("mimesys_run_windows_done", frozenset())] == 6
    assert s[("mimesys_run_windows_total", frozenset())] == 6
    assert s[("mimesys_run_progress_ratio", frozenset())] == 1.0
    assert s[("mimesys_run_active", frozenset())] == 0
    assert s[("mimesys_run_started_timestamp_seconds", frozenset())] > 1.7e9
    # The simulated host reports no runner segments: the histogram exists and is empty.
    assert s[("mimesys_runner_segment_error_seconds_count", frozenset())] == 0
    # Host gauges from the run's last window, in base units, per cpu.
    busy = [v for (n, lab), v in s.items() if n == "mimesys_host_cpu_busy_ratio"]
    assert len(busy) == 2 and all(0 <= v <= 1 for v in busy)
    assert s[("mimesys_host_sample_timestamp_seconds", frozenset())] > 1.7e9


def test_segment_error_histogram_counts_each_active_cell_once():
    h = SegmentErrors(bounds=(1e-4, 1e-3, 1e-2))
    comp = np.array([[0.5, 0.0], [0.25, 0.0]], np.float32)         # M=2, K=2, W=1 s
    ran = np.array([[500_050_000, 0], [250_000_000, 2_000_000]])   # 50 µs, exact, idle cell ran 2 ms
    h.observe_window(comp, 1.0, ran)
    assert h.count == 3                                             # the cell idle in both stays out
    assert h.cumulative() == [("0.0001", 2), ("0.001", 2), ("0.01", 3), ("+Inf", 3)]
    assert h.sum_s == pytest.approx(50e-6 + 2e-3)
    h.observe_window(comp, 1.0, None)                               # the simulated host: nothing
    assert h.count == 3


@pytest.mark.parametrize("metric, unit, expected, labels, scale", [
    ("cpu.util.core3", "fraction", "mimesys_host_cpu_busy_ratio", (("cpu", "3"),), 1.0),
    ("cpu.idle_entries_per_s.core1", "1/s", "mimesys_host_cpu_idle_entries_per_second", (("cpu", "1"),), 1.0),
    ("disk.nvme0n1.write_Bps", "B/s", "mimesys_host_disk_written_bytes_per_second", (("device", "nvme0n1"),), 1.0),
    ("net.eth0.rx_pps", "1/s", "mimesys_host_network_receive_packets_per_second", (("device", "eth0"),), 1.0),
    ("psi.io.full", "fraction", "mimesys_host_pressure_io_stalled_ratio", (), 1.0),
    ("psi.memory.some", "fraction", "mimesys_host_pressure_memory_waiting_ratio", (), 1.0),
    ("mem.used_B", "B", "mimesys_host_memory_used_bytes", (), 1.0),
    ("llc.miss_per_s", "1/s", "mimesys_host_llc_misses_per_second", (), 1.0),
    ("probe.mem_latency_ns", "ns", "mimesys_host_probe_mem_latency_seconds", (), 1e-9),
])
def test_host_metric_names_follow_node_exporter_style_with_base_units(metric, unit, expected, labels, scale):
    pn = prom_name(metric, unit)
    assert (pn.name, pn.labels, pn.scale) == (expected, labels, scale)


@pytest.mark.parametrize("aggregate", ["cpu.util", "disk.read_Bps", "net.tx_Bps", "disk.busy"])
def test_host_wide_aggregates_are_left_to_promql(aggregate):
    assert prom_name(aggregate, "B/s") is None


def test_a_scrape_keeps_the_host_sampled_and_the_loop_stops_when_scrapes_stop(tmp_path):
    from agentd.api.state import MONITOR

    async def main():
        cfg = make_config(tmp_path, "host", api={"public_metrics": True}, monitor={"interval_s": 0.1})
        app = create_app(cfg, create_backend(cfg), token=TOKEN)
        async with TestServer(app, host="127.0.0.1") as server, TestClient(server) as c:
            hub = app[MONITOR]
            assert hub._task is None                       # idle: nothing samples
            async with c.get("/metrics") as r:
                assert r.status == 200
            await asyncio.sleep(0.5)
            async with c.get("/metrics") as r:
                s = samples(await r.text())
            busy = [v for (n, _), v in s.items() if n == "mimesys_host_cpu_busy_ratio"]
            assert busy and all(0 <= v <= 1 for v in busy)  # real /proc/stat readings
            hub.hold(0.2)                                  # as if the last scrape were long ago
            await asyncio.sleep(0.6)
            assert hub._task is None
            n = hub.frames_sampled
            await asyncio.sleep(0.3)
            assert hub.frames_sampled == n
    asyncio.run(main())


def test_event_loop_lag_shows_a_stall_on_metrics_and_info(tmp_path):
    """A blocking call on the loop (here a 150 ms sleep) is what delays every request: the
    watcher must see it, in the histogram's slow buckets and in the maximum."""
    async def main():
        app = await _app(tmp_path, public_metrics=True)
        async with TestServer(app, host="127.0.0.1") as server, TestClient(server, headers=AUTH) as c:
            await asyncio.sleep(0.2)                 # the watcher's quiet wake-ups
            time.sleep(0.15)                         # a stall of the whole loop
            await asyncio.sleep(0.1)
            async with c.get("/metrics") as r:
                s = samples(await r.text())
            async with c.get("/v1/info") as r:
                info = wire.unpack(await r.read())
        return s, info
    s, info = asyncio.run(main())
    count = s[("mimesys_event_loop_lag_seconds_count", frozenset())]
    fast = s[("mimesys_event_loop_lag_seconds_bucket", frozenset({("le", "0.05")}))]
    assert count >= 4 and count - fast >= 1        # the stall is past 50 ms, the quiet ones are not all
    assert 0.09 <= s[("mimesys_event_loop_lag_max_seconds", frozenset())] < 1.0
    assert 0.09 <= info["event_loop_lag_max_s"] < 1.0


def test_loop_lag_buckets_are_cumulative():
    from agentd.api.looplag import BUCKETS, LoopLag
    lag = LoopLag()
    for x in (0.0002, 0.003, 0.3, 9.0):
        lag.add(x)
    cum = dict(lag.cumulative())
    assert cum["0.001"] == 1 and cum["0.005"] == 2 and cum["0.25"] == 2 and cum["0.5"] == 3
    assert cum["+Inf"] == 4 == lag.samples and len(cum) == len(BUCKETS) + 1
    assert lag.max_s == 9.0 and lag.sum_s == pytest.approx(9.3032)


def test_metrics_scrapes_are_capped_shared_and_off_the_run_executor(tmp_path, monkeypatch, caplog):
    """A public /metrics flood (issue 23): at most api.metrics_max_requests scrapes in the agent
    at once (503 beyond, counted), scrapes that arrive during a render share it, and the render
    runs on the metrics thread, never the default executor that writes a finished run's trace."""
    import threading

    from agentd.api import scrape
    release, threads = threading.Event(), []
    real = scrape.render

    def blocked_render(app):
        threads.append(threading.current_thread().name)
        if not release.wait(20):
            raise RuntimeError("test: render never released")
        return real(app)
    monkeypatch.setattr(scrape, "render", blocked_render)

    async def main():
        cfg = make_config(tmp_path, "sim", api={"public_metrics": True, "metrics_max_requests": 3})
        app = create_app(cfg, create_backend(cfg), token=TOKEN)
        async with TestServer(app, host="127.0.0.1") as server, TestClient(server) as c:
            held = [asyncio.create_task(c.get("/metrics")) for _ in range(3)]
            scrapes = app[scrape.SCRAPES]
            deadline = time.monotonic() + 20
            while scrapes.in_agent < 3:
                assert time.monotonic() < deadline, "three scrapes never reached the agent"
                await asyncio.sleep(0.01)
            over = [await c.get("/metrics") for _ in range(4)]     # while the three are held
            release.set()
            answered = await asyncio.gather(*held)
            texts = [await r.text() for r in answered]
            async with c.get("/metrics") as r:
                after = samples(await r.text())
            return [r.status for r in over], [r.status for r in answered], texts, scrapes.renders, after
    over, answered, texts, renders, after = asyncio.run(main())
    assert over == [503] * 4 and answered == [200] * 3
    assert len(set(texts)) == 1 and renders == 2            # three scrapes, one render; then the last one
    assert threads and all(t.startswith("metrics") for t in threads)
    assert after[("mimesys_metrics_scrapes_refused_total", frozenset())] == 4
    # load shed on purpose is counted, not logged as an error per refusal (a flood is not a log flood)
    assert not [r for r in caplog.records if r.levelno >= 30 and "metrics_max_requests" in r.getMessage()]
