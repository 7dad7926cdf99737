"""Pressure stall information from /proc/pressure/{cpu,io,memory}.

Metrics: ``psi.cpu.some``, ``psi.io.some``, ``psi.io.full``, ``psi.memory.some``,
``psi.memory.full`` — the fraction (0..1) of the window in which some (resp. all non-idle)
tasks were stalled on that resource. Derived from the cumulative ``total=`` microseconds,
(Δtotal / window), which is exact for the window; the kernel's avg10 is an exponentially
decaying average over ~10 s and would smear a 1 s window into its neighbours.
(System-wide cpu "full" is not reported: the kernel defines it for cgroups only.)

A kernel without CONFIG_PSI has no /proc/pressure; one booted with psi=0 fails the read
with EOPNOTSUPP. Both are reported as unsupported with that reason.
"""

from __future__ import annotations

from .base import ProcFile, Raw, Sampler, availability_of, os_reason
from .registry import register

METRICS = (("cpu", "some"), ("io", "some"), ("io", "full"), ("memory", "some"), ("memory", "full"))


def parse_pressure(text: str) -> dict[str, int]:
    """'some avg10=… total=123' lines -> {'some': 123, 'full': …} (total stall µs)."""
    out = {}
    for line in text.splitlines():
        kind, _, rest = line.partition(" ")
        i = rest.rfind("total=")
        if i >= 0:
            out[kind] = int(rest[i + 6:].split()[0])
    return out


class PsiSampler(Sampler):
    name = "psi"

    def probe(self):
        self._files: dict[str, ProcFile] = {}
        specs = []
        for res, kind in METRICS:
            name = f"psi.{res}.{kind}"
            path = self.hp.p(f"pressure/{res}")
            try:
                if res not in self._files:
                    f = ProcFile(path, 256)
                    parse_pressure(f.read_text())  # psi=0 kernels fail here, not at open
                    self._files[res] = f
                if kind not in parse_pressure(self._files[res].read_text()):
                    specs.append(self.unavailable(name, "fraction", f"{path}: no '{kind}' line"))
                    continue
            except OSError as e:
                specs.append(self.unavailable(name, "fraction", os_reason(e, str(path)), availability_of(e)))
                continue
            specs.append(self.spec(name, "fraction"))
        return specs

    def read(self) -> Raw:
        raw = {}
        for res, f in self._files.items():
            for kind, total in parse_pressure(f.read_text()).items():
                raw[f"{res}.{kind}"] = total
        return raw

    @staticmethod
    def derive(prev: Raw, cur: Raw, elapsed_s: float) -> dict[str, float]:
        out = {}
        for key, c in cur.items():
            p = prev.get(key)
            if p is None or c < p:
                continue
            out[f"psi.{key}"] = min((c - p) / (elapsed_s * 1e6), 1.0)
        return out

    def close(self):
        for f in getattr(self, "_files", {}).values():
            f.close()


register(PsiSampler)
