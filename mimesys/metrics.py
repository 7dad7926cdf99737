"""Metric schema: the ordered metrics a host can measure, with unit and availability.

A metric the host cannot measure stays in the schema as UNSUPPORTED or
PERMISSION_DENIED with the kernel's reason; its trace column is NaN, never 0. A proxy
gets its own name (e.g. `probe.mem_latency_ns`), never another metric's.

Naming (dot-separated, lower case): `cpu.util.core<i>`, `cpu.util`, `disk.read_Bps`,
`disk.<dev>.write_iops`, `net.tx_Bps`, `net.lo.rx_Bps`, `psi.io.some`, `mem.used_B`,
`perf.ctx_switches_per_s`, `llc.miss_per_s`, `mem.bw_Bps`, ...
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from enum import Enum


class Availability(str, Enum):
    AVAILABLE = "available"
    UNSUPPORTED = "unsupported"
    PERMISSION_DENIED = "permission_denied"


@dataclass(frozen=True)
class MetricSpec:
    name: str
    unit: str  # "fraction", "B/s", "1/s", "B", "ns", "percent" (PSI avg10 is a percent-of-time fraction)
    availability: Availability = Availability.AVAILABLE
    reason: str = ""  # why not available, in the kernel's words where there are any
    source: str = ""  # sampler that produces it

    @property
    def available(self) -> bool:
        return self.availability is Availability.AVAILABLE

    def to_dict(self) -> dict:
        d = asdict(self)
        d["availability"] = self.availability.value
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "MetricSpec":
        return cls(str(d["name"]), str(d.get("unit", "")), Availability(d.get("availability", "available")),
                   str(d.get("reason", "")), str(d.get("source", "")))


def is_duplicated_breakdown(name: str, names) -> bool:
    """True for a per-device or per-interface metric whose host-wide total is also in `names`
    (disk.vda.read_Bps next to disk.read_Bps, net.eth0.tx_Bps next to net.tx_Bps): the same
    quantity counted twice on a host with one such device. Loopback (net.lo.*) is never in
    the net.* totals, so it is not a duplicate."""
    parts = name.split(".")
    return (len(parts) == 3 and parts[0] in ("disk", "net") and parts[1] != "lo"
            and f"{parts[0]}.{parts[2]}" in set(names))
