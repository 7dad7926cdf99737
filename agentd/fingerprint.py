"""Host fingerprint: what this machine is, recorded in plans, traces and models so a result
can say where it was measured and a plan can be checked against the host it runs on.

    fp = host_fingerprint(hostpaths)               # plain JSON-able dict
    fp = with_calibration(fp, calibration_peaks)   # the agent merges agentd/calibrator.py's peaks

Sections: cpu (vendor, model, family/model/stepping, sockets, cores, threads, NUMA nodes,
hypervisor flag), caches (per level, from cpu0's view, with how many CPUs share each),
memory, disks (physical block devices), nics (physical NICs; virtual ones only where there is
no physical one), kernel, pmu (PMUs in sysfs, perf_event_paranoid, whether hardware events
open, memory-bandwidth sources), limits (the kernel controls the agent runs under: its
cgroup's CPU quota and block-device throttles, v1 or v2 — a constrained profile of a machine
is a different host, and its fingerprint says so). Every path goes through HostPaths; a value this host does
not expose is None, never a guess. The hostname is deliberately not recorded: fingerprints
travel inside released workloads.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path

from mimesys.hostpaths import HostPaths, online_cpus, parse_cpu_list

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


def _cgroup_paths(hp: HostPaths) -> dict[str, str]:
    """controller (v1) or "" (v2) -> this process's cgroup path, from /proc/self/cgroup."""
    out = {}
    for line in (_read(hp.p("self/cgroup")) or "").splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3:
            for ctrl in parts[1].split(",") if parts[1] else [""]:
                out[ctrl] = parts[2]
    return out


def _ancestors(root: Path, path: str) -> list[Path]:
    """The cgroup directory of `path` and every parent up to the hierarchy's root (all limit it)."""
    parts = [p for p in path.strip("/").split("/") if p]
    return [root.joinpath(*parts[:i]) for i in range(len(parts), -1, -1)]


def _throttles_v1(lines: str | None) -> dict[str, int]:
    out = {}
    for line in (lines or "").splitlines():
        dev, _, val = line.partition(" ")
        if val.strip().isdigit():
            out[dev] = int(val)
    return out


def limits_section(hp: HostPaths) -> dict:
    """The CPU quota (in CPUs: quota / period, the tightest over the cgroup's ancestors) and the
    block-device throttles (device "major:minor" -> read_Bps / write_Bps / read_iops /
    write_iops) this process runs under; None / {} where none is set or readable."""
    paths = _cgroup_paths(hp)
    quota, throttles, version = None, {}, None
    if "cpu" in paths:   # cgroup v1
        version = "v1"
        for d in _ancestors(hp.s("fs/cgroup/cpu"), paths["cpu"]):
            q, per = _int(d / "cpu.cfs_quota_us"), _int(d / "cpu.cfs_period_us")
            if q is not None and per and q > 0:
                quota = min(quota or float("inf"), q / per)
    if "blkio" in paths:
        for d in _ancestors(hp.s("fs/cgroup/blkio"), paths["blkio"]):
            for key, fname in (("read_Bps", "read_bps_device"), ("write_Bps", "write_bps_device"),
                               ("read_iops", "read_iops_device"), ("write_iops", "write_iops_device")):
                for dev, v in _throttles_v1(_read(d / f"blkio.throttle.{fname}")).items():
                    cur = throttles.setdefault(dev, {}).get(key)
                    throttles[dev][key] = v if cur is None else min(cur, v)
    if "" in paths and version is None:  # cgroup v2 only
        root = hp.s("fs/cgroup")
        if (root / "cgroup.controllers").exists():
            version = "v2"
            for d in _ancestors(root, paths[""]):
                q, _, per = (_read(d / "cpu.max") or "max").partition(" ")
                if q.isdigit() and per.strip().isdigit() and int(per) > 0:
                    quota = min(quota or float("inf"), int(q) / int(per))
                for line in (_read(d / "io.max") or "").splitlines():
                    dev, *kvs = line.split()
                    for kv in kvs:
                        k, _, v = kv.partition("=")
                        key = {"rbps": "read_Bps", "wbps": "write_Bps", "riops": "read_iops", "wiops": "write_iops"}.get(k)
                        if key and v.isdigit():
                            cur = throttles.setdefault(dev, {}).get(key)
                            throttles[dev][key] = int(v) if cur is None else min(cur, int(v))
    return {"cgroup": version, "cpu_quota_cpus": round(quota, 4) if quota else None, "block_throttles": throttles}


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
        "limits": limits_section(hp),
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
    lim = fp.get("limits") or {}
    if lim.get("cpu_quota_cpus") or lim.get("block_throttles"):
        parts.append("limited: " + ", ".join(
            ([f"CPU quota {lim['cpu_quota_cpus']:g} CPUs"] if lim.get("cpu_quota_cpus") else [])
            + [f"{dev} {k} {v:g}" for dev, t in (lim.get("block_throttles") or {}).items() for k, v in t.items()]))
    return ", ".join(parts)


# What makes two hosts different hardware for a plan: CPU model and counts, memory size, PMU.
# Kernel, disks' fill level, calibration and online CPUs change without the hardware changing.
_HARDWARE_KEYS = (("cpu", "vendor"), ("cpu", "model"), ("cpu", "logical_cpus"), ("cpu", "physical_cores"),
                  ("cpu", "sockets"), ("memory", "total_B"), ("pmu", "hardware_events"),
                  ("cpu_model",), ("cores",), ("memory_B",), ("simulated",))


def hardware_differences(planned: dict, here: dict) -> list[str]:
    """'cpu.model: <plan's> (plan) vs <this host's> (here)' for each hardware key both name
    and that differ; memory within 5% counts as equal (firmware reservations move it)."""
    def get(fp, path):
        for p in path:
            if not isinstance(fp, dict) or p not in fp:
                return None
            fp = fp[p]
        return fp
    out = []
    for path in _HARDWARE_KEYS:
        a, b = get(planned or {}, path), get(here or {}, path)
        if path == ("pmu", "hardware_events"):
            # A refusal (EACCES/EPERM) says who probed, not what the hardware is: the same host
            # reads "Permission denied" for a user and "available" or "not supported" for root
            # or the agent (CAP_PERFMON); a plan released there must not be "other hardware".
            a, b = _pmu_hardware(a), _pmu_hardware(b)
        if a is None or b is None or a == b:
            continue
        if path[-1] in ("total_B", "memory_B") and isinstance(a, (int, float)) and isinstance(b, (int, float)) \
                and abs(a - b) <= 0.05 * max(a, b):
            continue
        out.append(f"{'.'.join(path)}: {a} (plan) vs {b} (here)")
    return out


def _pmu_hardware(value):
    """pmu.hardware_events as a hardware fact: None where the probe was refused permission."""
    import errno
    if isinstance(value, str) and any(f": {os.strerror(e)}" in value for e in (errno.EACCES, errno.EPERM)):
        return None
    return value
