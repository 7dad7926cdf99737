"""mimesys metric names -> Prometheus names in node_exporter's style, with base units.

node_exporter exposes counters (`node_disk_read_bytes_total`) and leaves rates to PromQL;
the agent measures per-window rates, so they are gauges named for their base unit
(`..._bytes_per_second`, `..._ratio`, `..._seconds`), per device/cpu as labels, under the
`mimesys_host_` prefix: they are the agent's measurements, not node_exporter's, and must
not be mistaken for them. Host-wide sums and means are left to PromQL (`sum`, `avg`,
`max`), as with node_exporter, so no series double-counts another.

One table of rules, tried in order; a metric no rule names gets a generic name from its
own name and unit, so a new sampler shows up without an edit here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# unit -> (name suffix, factor to the base unit)
UNITS: dict[str, tuple[str, float]] = {
    "fraction": ("ratio", 1.0),
    "percent": ("ratio", 0.01),
    "B/s": ("bytes_per_second", 1.0),
    "B": ("bytes", 1.0),
    "1/s": ("per_second", 1.0),
    "ns": ("seconds", 1e-9),
    "s": ("seconds", 1.0),
}

_DISK = {"read_Bps": "disk_read_bytes_per_second", "write_Bps": "disk_written_bytes_per_second",
         "read_iops": "disk_reads_completed_per_second", "write_iops": "disk_writes_completed_per_second",
         "busy": "disk_io_time_ratio"}
_NET = {"rx_Bps": "network_receive_bytes_per_second", "tx_Bps": "network_transmit_bytes_per_second",
        "rx_pps": "network_receive_packets_per_second", "tx_pps": "network_transmit_packets_per_second"}
_PSI_KIND = {"some": "waiting", "full": "stalled"}     # node_pressure_<res>_{waiting,stalled}_seconds_total
_SINGLE = {
    "mem.used_B": "memory_used_bytes", "mem.cache_B": "memory_cache_bytes",
    "mem.bw_Bps": "memory_bandwidth_bytes_per_second", "mem.bw_read_Bps": "memory_bandwidth_read_bytes_per_second",
    "mem.bw_write_Bps": "memory_bandwidth_write_bytes_per_second",
    "perf.cycles_per_s": "cpu_cycles_per_second", "perf.instructions_per_s": "cpu_instructions_per_second",
    "llc.ref_per_s": "llc_references_per_second", "llc.miss_per_s": "llc_misses_per_second",
    "perf.ctx_switches_per_s": "context_switches_per_second", "perf.migrations_per_s": "cpu_migrations_per_second",
    "perf.page_faults_per_s": "page_faults_per_second",
}
# Aggregates of per-device / per-cpu series: not exported (PromQL derives them).
_AGGREGATES = re.compile(r"^(cpu\.util|disk\.(read_Bps|write_Bps|read_iops|write_iops|busy)|"
                         r"net\.(rx_Bps|tx_Bps|rx_pps|tx_pps))$")


@dataclass(frozen=True)
class PromName:
    name: str            # full metric name, e.g. mimesys_host_disk_read_bytes_per_second
    labels: tuple[tuple[str, str], ...] = ()
    scale: float = 1.0   # multiply the mimesys value by this for the base unit


PREFIX = "mimesys_host_"


def prom_name(metric: str, unit: str) -> PromName | None:
    """The Prometheus series for one mimesys metric; None for host-wide aggregates."""
    if _AGGREGATES.match(metric):
        return None
    scale = UNITS.get(unit, ("", 1.0))[1]
    if m := re.fullmatch(r"cpu\.util\.core(\d+)", metric):
        return PromName(PREFIX + "cpu_busy_ratio", (("cpu", m[1]),), scale)
    if m := re.fullmatch(r"cpu\.idle_entries_per_s\.core(\d+)", metric):
        return PromName(PREFIX + "cpu_idle_entries_per_second", (("cpu", m[1]),), scale)
    if m := re.fullmatch(r"disk\.([^.]+)\.([a-z_A-Z]+)", metric):
        if m[2] in _DISK:
            return PromName(PREFIX + _DISK[m[2]], (("device", m[1]),), scale)
    if m := re.fullmatch(r"net\.([^.]+)\.([a-z_A-Z]+)", metric):
        if m[2] in _NET:
            return PromName(PREFIX + _NET[m[2]], (("device", m[1]),), scale)
    if m := re.fullmatch(r"psi\.(cpu|io|memory|irq)\.(some|full)", metric):
        return PromName(f"{PREFIX}pressure_{m[1]}_{_PSI_KIND[m[2]]}_ratio", (), scale)
    if metric in _SINGLE:
        return PromName(PREFIX + _SINGLE[metric], (), scale)
    return generic(metric, unit)


def generic(metric: str, unit: str) -> PromName:
    """`probe.mem_latency_ns` (ns) -> mimesys_host_probe_mem_latency_seconds."""
    suffix, scale = UNITS.get(unit, ("", 1.0))
    stem = re.sub(r"(_Bps|_B|_ns|_per_s|_pps|_iops)$", "", metric)
    stem = re.sub(r"[^a-zA-Z0-9_]", "_", stem).strip("_").lower()
    return PromName(PREFIX + stem + (f"_{suffix}" if suffix else ""), (), scale)
