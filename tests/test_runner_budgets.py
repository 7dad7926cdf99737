"""Budgets (issue 16): the runner drops every capability first thing, raises its own
oom_score_adj, keeps its private memory under agent.memory_budget_mib (kernel-enforced at
allocation) and refuses to start a run that would leave less than the margin available."""

import asyncio
from pathlib import Path

import pytest

from agentd.config import config_from_dict
from mimesys.errors import ConfigError, RunnerError
from agentd.runner import RunnerConfig, default_memory_budget, start_runner
from runner_helpers import make_plan, runner_or_skip


def _status_of_running(plan, config):
    async def go():
        handle = await start_runner(plan, config)
        status = Path(f"/proc/{handle.pid}/status").read_text()
        oom = Path(f"/proc/{handle.pid}/oom_score_adj").read_text().strip()
        await handle.wait()
        return status, oom
    return asyncio.run(go())


def _field(status: str, key: str) -> str:
    return status.split(key + ":")[1].split()[0]


def test_runner_holds_no_capability_and_goes_first_under_memory_pressure(catalog):
    runner_or_skip()
    plan = make_plan(catalog, {"cpu_fp_poly": 0.5}, T=3, K=1, window_s=0.2)
    status, oom = _status_of_running(plan, RunnerConfig(cpus=(0,)))
    for key in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert int(_field(status, key), 16) == 0, (key, _field(status, key))
    assert _field(status, "NoNewPrivs") == "1"
    assert oom == "1000"


def test_memory_budget_refuses_buffers_before_they_are_touched(catalog):
    runner_or_skip()
    plan = make_plan(catalog, {"mem_random_1G": 0.5}, T=2, K=1, window_s=0.1)
    with pytest.raises(RunnerError, match=r"over --memory-budget 256 MiB"):
        asyncio.run(start_runner(plan, RunnerConfig(cpus=(0,), memory_budget_bytes=256 << 20)))
    # The same plan within a budget that fits runs.
    small = make_plan(catalog, {"cpu_fp_poly": 0.5}, T=2, K=1, window_s=0.1)
    status, _ = _status_of_running(small, RunnerConfig(cpus=(0,), memory_budget_bytes=256 << 20))
    assert int(_field(status, "VmData")) > 0


def test_memory_margin_refuses_a_run_that_would_starve_the_host(catalog):
    runner_or_skip()
    plan = make_plan(catalog, {"cpu_fp_poly": 0.5}, T=2, K=1, window_s=0.1)
    with pytest.raises(RunnerError, match=r"under the memory margin of"):
        asyncio.run(start_runner(plan, RunnerConfig(cpus=(0,), memory_margin_bytes=1 << 50)))


def test_memory_budget_config(tmp_path):
    cfg = config_from_dict({"agent": {"memory_budget_mib": 512, "memory_margin_mib": 128}})
    assert cfg.agent.memory_budget_mib == 512 and cfg.agent.memory_margin_mib == 128
    with pytest.raises(ConfigError, match="memory_budget_mib"):
        config_from_dict({"agent": {"memory_budget_mib": -1}})
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       2048000 kB\nMemFree: 1 kB\n")
    assert default_memory_budget(str(meminfo)) == 2048000 * 1024 // 2


def test_unit_bounds_memory_and_sets_noroot():
    unit = (Path(__file__).resolve().parents[1] / "systemd" / "mimesys-agent.service").read_text()
    lines = {ln.split("=", 1)[0]: ln.split("=", 1)[1] for ln in unit.splitlines() if "=" in ln and not ln.startswith("#")}
    assert lines["OOMPolicy"] == "continue"           # an OOM-killed runner fails its run, not the agent
    assert lines["MemoryMax"].endswith("%") and lines["MemoryHigh"].endswith("%")
    assert int(lines["MemoryHigh"][:-1]) < int(lines["MemoryMax"][:-1])
    assert "noroot" in lines["SecureBits"].split() and "noroot-locked" in lines["SecureBits"].split()
