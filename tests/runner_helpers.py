"""Shared helpers for the runner/stressor tests: small plans, the runner binary, counters."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from mimesys.errors import RunnerError
from mimesys.plan import Plan

# Scratch for the stressors and probes whose IO must reach a real block device (/tmp may be tmpfs).
SCRATCH = Path("/var/tmp")


def runner_or_skip() -> Path:
    from agentd.runner import find_runner
    try:
        return find_runner()
    except RunnerError as e:
        pytest.skip(f"mimesys-runner not built: {e}")


def make_plan(catalog, spec: dict[str, float | list[float]], *, T: int, K: int, window_s: float, seed: int = 0):
    """spec: stressor name → fraction for every thread, or a list of K fractions."""
    a = np.zeros((T, len(catalog), K), np.float32)
    for name, f in spec.items():
        a[:, catalog.index(name), :] = np.asarray(f, np.float32)
    return Plan.from_catalog(a, catalog, window_s=window_s, seed=seed)


def device_of(path: Path) -> str:
    """The /proc/diskstats name of the block device holding `path` (a partition's own line)."""
    st = os.stat(path)
    major, minor = os.major(st.st_dev), os.minor(st.st_dev)
    for line in Path("/proc/diskstats").read_text().splitlines():
        f = line.split()
        if int(f[0]) == major and int(f[1]) == minor:
            return f[2]
    pytest.skip(f"{path} is not on a block device listed in /proc/diskstats ({major}:{minor})")


def diskstats(dev: str) -> tuple[int, int]:
    """(bytes read, bytes written) so far for `dev` (sectors are 512 bytes in diskstats)."""
    for line in Path("/proc/diskstats").read_text().splitlines():
        f = line.split()
        if f[2] == dev:
            return int(f[5]) * 512, int(f[9]) * 512
    raise KeyError(dev)


def net_bytes(iface: str = "lo") -> tuple[int, int]:
    base = Path("/sys/class/net") / iface / "statistics"
    return int((base / "rx_bytes").read_text()), int((base / "tx_bytes").read_text())


def proc_stat_cpu(cpu: int) -> tuple[int, int]:
    """(busy, total) jiffies of one CPU from /proc/stat."""
    for line in Path("/proc/stat").read_text().splitlines():
        if line.startswith(f"cpu{cpu} "):
            v = list(map(int, line.split()[1:]))
            idle = v[3] + v[4]
            total = sum(v[:8])
            return total - idle, total
    raise KeyError(cpu)


def worker_schedstat(pid: int) -> dict[int, tuple[int, int]]:
    """tid → (ns on CPU, ns waiting on a run queue) from /proc/<pid>/task/<tid>/schedstat."""
    return {tid: (on_cpu, wait) for tid, (on_cpu, wait, _) in thread_schedstat(pid).items()}


def thread_schedstat(pid: int) -> dict[int, tuple[int, int, int]]:
    """tid → (ns on CPU, ns waiting on a run queue, times it was put on a CPU): every thread of
    `pid`, from /proc/<pid>/task/<tid>/schedstat."""
    out = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            on_cpu, wait, runs = map(int, (task / "schedstat").read_text().split())
            out[int(task.name)] = (on_cpu, wait, runs)
        except (OSError, ValueError):
            pass
    return out


ROOT_CATALOG = Path(__file__).resolve().parent.parent / "stressors" / "catalog.toml"


def write_calibration(state_dir, doc) -> None:
    """Install a calibration document (e.g. the paced_calibration fixture) in an agent's state_dir."""
    from mimesys.calibration import write
    write(doc, Path(state_dir) / "calibration.json")
