"""NVIDIA GPUs through NVML (the `nvidia-ml-py` binding, module `pynvml`; optional: `pip install
'mimesys[gpu]'`): Driple's own resources on a GPU host.

Metrics, per GPU i (NVML's index order):
- ``gpu<i>.util``: fraction of the driver's last sample period (1/6 s to 1 s, by product) in
  which a kernel ran (nvmlDeviceGetUtilizationRates().gpu / 100; nvidia-smi utilization.gpu);
- ``gpu<i>.mem_util``: fraction of that period in which device memory was read or written
  (.memory / 100; nvidia-smi utilization.memory — Driple's "GPU memory utilization");
- ``gpu<i>.mem_used_B``: device memory allocated (nvmlDeviceGetMemoryInfo().used).
These are gauges the driver keeps; each tick reads the current values (no deltas).

Where there is no GPU to read, the schema carries ``gpu.util`` and ``gpu.mem_util`` as
unsupported with the reason — the binding is not installed, NVML cannot initialize (no
driver), or NVML sees no device — and their columns are NaN, never 0.
"""

from __future__ import annotations

from mimesys.metrics import MetricSpec

from .base import Raw, Sampler
from .registry import register

ABSENT = (("gpu.util", "fraction"), ("gpu.mem_util", "fraction"))


def import_nvml():
    """The NVML binding (a module); tests substitute a fixture-driven stand-in here."""
    import pynvml
    return pynvml


class GpuSampler(Sampler):
    name = "gpu"

    def probe(self) -> list[MetricSpec]:
        self._nv = None
        self._handles = []
        try:
            nv = import_nvml()
        except ImportError as e:
            return self._absent(f"the NVML binding is not installed (pip install nvidia-ml-py): {e}")
        try:
            nv.nvmlInit()
        except Exception as e:  # pynvml.NVMLError and its per-code subclasses; OSError for a missing library
            return self._absent(f"NVML cannot initialize (no NVIDIA driver?): {e}")
        try:
            count = int(nv.nvmlDeviceGetCount())
            self._handles = [nv.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
        except Exception as e:
            nv.nvmlShutdown()
            return self._absent(f"NVML: cannot list devices: {e}")
        if not self._handles:
            nv.nvmlShutdown()
            return self._absent("NVML sees no NVIDIA GPU")
        self._nv = nv
        specs = []
        for i in range(len(self._handles)):
            specs += [self.spec(f"gpu{i}.util", "fraction"), self.spec(f"gpu{i}.mem_util", "fraction"),
                      self.spec(f"gpu{i}.mem_used_B", "B")]
        return specs

    def _absent(self, reason: str) -> list[MetricSpec]:
        return [self.unavailable(name, unit, reason) for name, unit in ABSENT]

    def read(self) -> Raw:
        raw = {}
        if self._nv is None:
            return raw
        for i, h in enumerate(self._handles):
            u = self._nv.nvmlDeviceGetUtilizationRates(h)
            m = self._nv.nvmlDeviceGetMemoryInfo(h)
            raw[f"gpu{i}"] = (int(u.gpu), int(u.memory), int(m.used), int(m.total))
        return raw

    @staticmethod
    def derive(prev: Raw, cur: Raw, elapsed_s: float) -> dict[str, float]:
        out = {}
        for key, v in cur.items():
            if not (isinstance(v, (list, tuple)) and len(v) == 4):
                continue
            gpu, mem, used, _total = v
            out[f"{key}.util"] = min(max(gpu / 100.0, 0.0), 1.0)
            out[f"{key}.mem_util"] = min(max(mem / 100.0, 0.0), 1.0)
            out[f"{key}.mem_used_B"] = float(used)
        return out

    def close(self) -> None:
        if getattr(self, "_nv", None) is not None:
            try:
                self._nv.nvmlShutdown()
            finally:
                self._nv = None


register(GpuSampler)
