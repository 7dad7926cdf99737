"""The GPU sampler (agentd/samplers/gpu.py) through a stand-in NVML binding driven by a fixture
in the binding's return shapes (tests/fixtures/nvml/two_gpus.json: hand-written, no GPU was
available to record one), and its honest absence on a host without the binding, driver or GPU."""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from mimesys.hostpaths import HostPaths
from agentd.samplers import SamplerSet, SamplersConfig
from agentd.samplers import gpu as gpu_mod

FIX = Path(__file__).parent / "fixtures" / "nvml" / "two_gpus.json"


class FakeNVMLError(Exception):
    pass


def fake_nvml(devices, *, init_error=None):
    """A module-like stand-in for pynvml: each device answers its fixture reads in order."""
    state = {"init": 0, "shutdown": 0, "reads": [0] * len(devices)}

    def init():
        if init_error:
            raise FakeNVMLError(init_error)
        state["init"] += 1

    def util(h):
        r = devices[h]["reads"][min(state["reads"][h], len(devices[h]["reads"]) - 1)]
        return SimpleNamespace(gpu=r["gpu"], memory=r["memory"])

    def mem(h):
        r = devices[h]["reads"][min(state["reads"][h], len(devices[h]["reads"]) - 1)]
        state["reads"][h] += 1
        return SimpleNamespace(used=r["used"], total=r["total"], free=r["total"] - r["used"])

    mod = SimpleNamespace(NVMLError=FakeNVMLError, nvmlInit=init, nvmlShutdown=lambda: state.__setitem__(
        "shutdown", state["shutdown"] + 1), nvmlDeviceGetCount=lambda: len(devices),
        nvmlDeviceGetHandleByIndex=lambda i: i, nvmlDeviceGetUtilizationRates=util, nvmlDeviceGetMemoryInfo=mem,
        nvmlDeviceGetName=lambda h: devices[h]["name"])
    return mod, state


def _only_gpu(tmp_path):
    from agentd.samplers import sampler_names
    enabled = {n: (None if n == "gpu" else False) for n in sampler_names()}   # gpu on "auto"
    return SamplerSet.from_config(SamplersConfig(enabled=enabled), HostPaths(tmp_path / "proc", tmp_path / "sys"))


def test_two_gpus_from_the_fixture(monkeypatch, tmp_path):
    devices = json.loads(FIX.read_text())["devices"]
    mod, state = fake_nvml(devices)
    monkeypatch.setattr(gpu_mod, "import_nvml", lambda: mod)
    s = _only_gpu(tmp_path)
    names = [m.name for m in s.schema()]
    assert names == ["gpu0.util", "gpu0.mem_util", "gpu0.mem_used_B", "gpu1.util", "gpu1.mem_util", "gpu1.mem_used_B"]
    assert all(m.available for m in s.schema())
    r0, r1 = s.read(), s.read()
    v = dict(zip(names, s.derive(r0, r1)))
    assert v["gpu0.util"] == pytest.approx(0.97) and v["gpu0.mem_util"] == pytest.approx(0.41)
    assert v["gpu0.mem_used_B"] == pytest.approx(40802189312, rel=1e-6)
    assert v["gpu1.util"] == 0.0
    v2 = dict(zip(names, s.derive(r1, s.read())))
    assert v2["gpu0.util"] == 1.0 and v2["gpu1.util"] == pytest.approx(0.55)
    s.close()
    assert state["init"] == 1 and state["shutdown"] == 1


@pytest.mark.parametrize("case, reason", [("no_binding", "not installed"), ("no_driver", "cannot initialize"),
                                          ("no_device", "no NVIDIA GPU")])
def test_absent_gpu_is_nan_with_the_reason(monkeypatch, tmp_path, case, reason):
    if case == "no_binding":
        def missing():
            raise ImportError("No module named 'pynvml'")
        monkeypatch.setattr(gpu_mod, "import_nvml", missing)
    elif case == "no_driver":
        monkeypatch.setattr(gpu_mod, "import_nvml", lambda: fake_nvml([], init_error="Driver Not Loaded")[0])
    else:
        monkeypatch.setattr(gpu_mod, "import_nvml", lambda: fake_nvml([])[0])
    s = _only_gpu(tmp_path)
    specs = s.schema()
    assert [m.name for m in specs] == ["gpu.util", "gpu.mem_util"]
    assert all(not m.available and reason in m.reason for m in specs)
    vals = s.derive(s.read(), s.read())
    assert all(math.isnan(x) for x in np.asarray(vals))
    s.close()


def test_gpu_series_are_burst_resources():
    from mimesys.bursts import is_resource
    assert is_resource("gpu0.util") and is_resource("gpu1.mem_util") and not is_resource("gpu0.mem_used_B")


@pytest.mark.skipif(Path("/dev/nvidia0").exists(), reason="this host has an NVIDIA GPU")
def test_this_host_without_a_gpu_reports_why(tmp_path):
    """The real binding (when installed) on a host without an NVIDIA driver: NaN with NVML's reason."""
    s = _only_gpu(tmp_path)
    specs = s.schema()
    assert [m.name for m in specs] == ["gpu.util", "gpu.mem_util"]
    assert all(not m.available and m.reason for m in specs)
    s.close()
