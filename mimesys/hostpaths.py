"""Every host path goes through one object, so tests run on recorded fixture trees: the agent's
samplers and fingerprint, and the core's reading of the kernel's writeback settings."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class HostPaths:
    proc: Path = Path("/proc")
    sys: Path = Path("/sys")

    @classmethod
    def from_env(cls) -> "HostPaths":
        """MIMESYS_PROC / MIMESYS_SYS override the roots (fixtures, containers)."""
        return cls(Path(os.environ.get("MIMESYS_PROC", "/proc")), Path(os.environ.get("MIMESYS_SYS", "/sys")))

    def p(self, rel: str) -> Path:
        """A path under /proc, e.g. hp.p("stat")."""
        return self.proc / rel

    def s(self, rel: str) -> Path:
        """A path under /sys, e.g. hp.s("devices/system/cpu/online")."""
        return self.sys / rel

    def is_physical(self, sysfs_class_dir: str, name: str) -> bool:
        """A block device or NIC backed by hardware (or a virtio device) has a `device` link
        under its sysfs directory; loop, zram, dm, md, bridges, veths and tunnels do not.
        The samplers' totals and the host fingerprint use this one rule, so they agree.
        hp.is_physical("block", "vda"), hp.is_physical("class/net", "eth0")."""
        return (self.sys / sysfs_class_dir / name / "device").exists()


def parse_cpu_list(text: str) -> list[int]:
    """'0-3,8,10-11' -> [0, 1, 2, 3, 8, 10, 11] (the kernel's cpulist format)."""
    cpus: list[int] = []
    for part in text.strip().split(","):
        if not part:
            continue
        if "-" in part:
            lo, hi = part.split("-")
            cpus.extend(range(int(lo), int(hi) + 1))
        else:
            cpus.append(int(part))
    return cpus


def online_cpus(hp: HostPaths | None = None) -> list[int]:
    hp = hp or HostPaths.from_env()
    try:
        return parse_cpu_list(hp.s("devices/system/cpu/online").read_text())
    except OSError:
        return list(range(os.cpu_count() or 1))
