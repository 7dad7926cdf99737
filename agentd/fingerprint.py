"""Host fingerprint: what this machine is, recorded in plans, traces and models so a result
can say where it was measured and a plan can be checked against the host it runs on.

    fp = host_fingerprint(hostpaths)               # plain JSON-able dict
    fp = with_calibration(fp, calibration_peaks)   # the agent merges agentd/calibration.py's peaks

Sections: cpu (vendor, model, family/model/stepping, sockets, cores, threads, NUMA nodes,
hypervisor flag), caches (per level, from cpu0's view, with how many CPUs share each),
memory, disks (physical block devices), nics (physical NICs; virtual ones only where there is
no physical one), kernel, pmu (PMUs in sysfs, perf_event_paranoid, whether hardware events
open, memory-bandwidth sources). Every path goes through HostPaths; a value this host does
not expose is None, never a guess. The hostname is deliberately not recorded: fingerprints
travel inside released workloads.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path

from .hostpaths import HostPaths, online_cpus, parse_cpu_list

FINGERPRINT_VERSION = 1


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None


def _int(path: Path) -> int | None:
    v = _read(path)
    try:
        return int(v) if v is not None else None
    except ValueError:
        return None


def parse_size(text: str | None) -> int | None:
    """sysfs cache sizes: '32K', '1024K', '32768K', '2M' -> bytes."""
    if not text:
        return None
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1].upper(), 1)
    try:
        return int(text.rstrip("KkMmGg")) * mult
    except ValueError:
        return None


def cpuinfo_fields(text: str) -> dict[str, str]:
    """The first processor block of /proc/cpuinfo (plus the trailing global block on arm)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if "processor" in out and ("model name" in out or "CPU implementer" in out):
                break
            continue
        k, _, v = line.partition(":")
        out.setdefault(k.strip(), v.strip())
    return out


def cpu_section(hp: HostPaths) -> dict:
    info = cpuinfo_fields(_read(hp.p("cpuinfo")) or "")
    cpus = online_cpus(hp)
    packages, cores = set(), set()
    for c in cpus:
        topo = hp.s(f"devices/system/cpu/cpu{c}/topology")
        pkg, core = _int(topo / "physical_package_id"), _int(topo / "core_id")
        if pkg is not None and core is not None:
            packages.add(pkg)
            cores.add((pkg, core))
    node_list = _read(hp.s("devices/system/node/online"))
    flags = set(info.get("flags", info.get("Features", "")).split())
    model = info.get("model name") or info.get("Model") or info.get("cpu") or None
    if model is None and "CPU implementer" in info:
        model = f"implementer {info['CPU implementer']} part {info.get('CPU part', '?')}"
    return {
        "arch": platform.machine(),
        "vendor": info.get("vendor_id") or info.get("CPU implementer"),
        "model": model,
        "family": info.get("cpu family"),
        "model_id": info.get("model"),
        "stepping": info.get("stepping"),
        "logical_cpus": len(cpus),
        "online_cpus": cpus,
        "sockets": len(packages) or None,
        "physical_cores": len(cores) or None,
        "threads_per_core": (len(cpus) // len(cores)) if cores else None,
        "numa_nodes": len(parse_cpu_list(node_list)) if node_list else None,
        "hypervisor": "hypervisor" in flags,
        "isa": sorted(f for f in flags if f in ("avx2", "avx512f", "sve", "sve2", "amx_tile", "rdt_a", "cqm_mbm_total")),
    }


def cache_section(hp: HostPaths) -> list[dict]:
    base = hp.s("devices/system/cpu/cpu0/cache")
    out = []
    try:
        indexes = sorted(base.glob("index*"), key=lambda p: int(p.name[5:]))
    except (OSError, ValueError):
        return out
    for idx in indexes:
        shared = _read(idx / "shared_cpu_list")
        out.append({
            "level": _int(idx / "level"),
            "type": _read(idx / "type"),
            "size_B": parse_size(_read(idx / "size")),
            "line_B": _int(idx / "coherency_line_size"),
            "shared_by_cpus": len(parse_cpu_list(shared)) if shared else None,
        })
    return out


def memory_section(hp: HostPaths) -> dict:
    total = None
    for line in (_read(hp.p("meminfo")) or "").splitlines():
        if line.startswith("MemTotal:"):
            total = int(line.split()[1]) * 1024
            break
    return {"total_B": total}


def disk_section(hp: HostPaths) -> list[dict]:
    out = []
    block = hp.s("block")
    try:
        devs = sorted(p.name for p in block.iterdir())
    except OSError:
        return out
    for d in devs:
        if not hp.is_physical("block", d):
            continue  # virtual (loop, zram, dm, md): see agentd/samplers/disk.py
        sectors = _int(block / d / "size")
        rot = _int(block / d / "queue/rotational")
        out.append({"name": d, "size_B": sectors * 512 if sectors is not None else None,
                    "rotational": None if rot is None else bool(rot),
                    "model": _read(block / d / "device/model")})
    return out


def nic_section(hp: HostPaths) -> list[dict]:
    out = []
    net = hp.s("class/net")
    try:
        names = sorted(p.name for p in net.iterdir())
    except OSError:
        return out
    for n in names:
        if not hp.is_physical("class/net", n):
            continue
        speed = _int(net / n / "speed")  # EINVAL while the link is down; -1 for virtio
        drv = None
        try:
            drv = os.path.basename(os.readlink(net / n / "device/driver"))
        except OSError:
            pass
        out.append({"name": n, "speed_Mbps": speed if speed and speed > 0 else None, "mtu": _int(net / n / "mtu"),
                    "driver": drv})
    return out


def kernel_section(hp: HostPaths) -> dict:
    return {"release": _read(hp.p("sys/kernel/osrelease")), "system": platform.system()}


def pmu_section(hp: HostPaths, *, probe: bool = True) -> dict:
    devices = hp.s("bus/event_source/devices")
    try:
        names = sorted(p.name for p in devices.iterdir())
    except OSError:
        names = []
    hardware: str | None = None
    if probe:
        from .perf.events import HW_CPU_CYCLES, PerfEventError, probe_event
        try:
            probe_event(HW_CPU_CYCLES, cpu=online_cpus(hp)[0])
            hardware = "available"
        except PerfEventError as e:
            hardware = str(e)
    return {
        "devices": names,
        "perf_event_paranoid": _read(hp.p("sys/kernel/perf_event_paranoid")),
        "hardware_events": hardware,  # "available", the kernel's reason, or None (not probed)
        "uncore_imc": sum(n.startswith("uncore_imc") for n in names),
        "amd_umc": sum(n.startswith("amd_umc") for n in names),
        "resctrl_mbm": any(hp.s("fs/resctrl/mon_data").glob("mon_L3_*/mbm_total_bytes"))
        if hp.s("fs/resctrl/mon_data").is_dir() else False,
    }


def host_fingerprint(hp: HostPaths | None = None, *, probe_pmu: bool = True) -> dict:
    """The fingerprint of the host under hp (default: this one). probe_pmu opens one
    hardware event to learn whether the PMU works (off for fixture trees)."""
    hp = hp or HostPaths.from_env()
    caches = cache_section(hp)
    llc = max((c for c in caches if c["type"] in ("Unified", "Data") and c["size_B"]),
              key=lambda c: c["level"] or 0, default=None)
    return {
        "fingerprint_version": FINGERPRINT_VERSION,
        "cpu": cpu_section(hp),
        "caches": caches,
        "llc_B": llc["size_B"] if llc else None,
        "memory": memory_section(hp),
        "disks": disk_section(hp),
        "nics": nic_section(hp),
        "kernel": kernel_section(hp),
        "pmu": pmu_section(hp, probe=probe_pmu),
    }


def with_calibration(fp: dict, peaks: dict) -> dict:
    """A copy of fp with calibrated peaks (e.g. {"mem.bw_Bps": 1.2e10, ...}) merged in."""
    return {**fp, "calibrated_peaks": dict(peaks)}


def summary(fp: dict) -> str:
    """One line for logs and `mimesys-agent info`."""
    c = fp.get("cpu", {})
    mem = (fp.get("memory") or {}).get("total_B")
    hw = (fp.get("pmu") or {}).get("hardware_events")
    parts = [
        c.get("model") or "unknown CPU",
        f"{c.get('sockets') or '?'} socket(s) / {c.get('physical_cores') or '?'} cores / "
        f"{c.get('logical_cpus')} CPUs" + (" (VM)" if c.get("hypervisor") else ""),
        f"{mem / 2**30:.0f} GiB" if mem else "? GiB",
        f"{len(fp.get('disks', []))} disk(s)",
        f"{len(fp.get('nics', []))} NIC(s)",
        f"Linux {(fp.get('kernel') or {}).get('release')}",
        "hardware PMU: " + ("yes" if hw == "available" else "no" if hw else "not probed"),
    ]
    return ", ".join(parts)
