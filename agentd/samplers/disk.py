"""Disk throughput, IOPS and busy fraction per physical block device and in total, from
/proc/diskstats.

Which devices: a whole disk is a directory /sys/block/<dev>; partitions only appear below it
(/sys/block/<dev>/<part>) and are skipped, so bytes are never counted twice. Of the whole
disks, only those backed by hardware count — they have a /sys/block/<dev>/device link.
Virtual block devices (loop, ram, zram, dm-*, md*, nbd) have none and are skipped by
default: dm and md re-issue their IO to the physical disks below them (counting them would
double the totals), and loop/zram are files or memory. ``include_virtual = true`` adds them
to the per-device metrics (still not to the totals); ``devices = [...]`` picks an explicit
list. The device list is fixed at probe time; a device removed later reads NaN.

Metrics, per device and total: ``disk[.<dev>].read_Bps``, ``write_Bps`` (sectors × 512:
diskstats counts 512-byte sectors whatever the device's block size), ``read_iops``,
``write_iops`` (completed requests), ``busy`` (fraction of the window with IO in flight, from
io_ticks; like iostat's %util it saturates at 1 on devices that serve many requests in
parallel, e.g. NVMe, before their throughput does). ``disk.busy`` is the MAX over the
physical devices — the busiest disk is the bottleneck a workload feels; a mean would dilute
one saturated disk among idle ones.
"""

from __future__ import annotations

from dataclasses import dataclass

from mimesys.metrics import Availability

from .base import ProcFile, Raw, Sampler, availability_of, os_reason
from .registry import register

SECTOR_B = 512
PHYSICAL_KEY = "/physical"  # raw key listing the devices in the totals ("/" is never in a device name)
# /proc/diskstats fields after "major minor name" (Documentation/admin-guide/iostats.rst)
_READS, _READ_SECTORS, _WRITES, _WRITE_SECTORS, _IO_TICKS_MS = 0, 2, 4, 6, 9
_KINDS = (("read_Bps", "B/s"), ("write_Bps", "B/s"), ("read_iops", "1/s"), ("write_iops", "1/s"),
          ("busy", "fraction"))


@dataclass(frozen=True)
class DiskOptions:
    include_virtual: bool = False       # also report loop/zram/dm/md devices (never in totals)
    devices: tuple[str, ...] | None = None  # explicit device names; None = every physical disk


def parse_diskstats(text: str, wanted: frozenset[str] | None = None) -> dict[str, tuple[int, ...]]:
    """device name -> its counters (the fields after the name), optionally only `wanted` ones."""
    out = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 14:
            continue
        name = parts[2]
        if wanted is None or name in wanted:
            out[name] = tuple(int(x) for x in parts[3:])
    return out


def device_rates(p, c, elapsed_s: float) -> tuple[float, float, float, float, float] | None:
    """(read_Bps, write_Bps, read_iops, write_iops, busy) from two counter tuples; None on reset."""
    d = [c[i] - p[i] for i in (_READ_SECTORS, _WRITE_SECTORS, _READS, _WRITES, _IO_TICKS_MS)]
    if min(d) < 0:
        return None  # counter wrapped or the device was re-created: no valid delta
    return (d[0] * SECTOR_B / elapsed_s, d[1] * SECTOR_B / elapsed_s, d[2] / elapsed_s, d[3] / elapsed_s,
            min(d[4] / (elapsed_s * 1000.0), 1.0))


class DiskSampler(Sampler):
    name = "disk"
    Options = DiskOptions

    def probe(self):
        path = self.hp.p("diskstats")
        try:
            self._file = ProcFile(path, 16384)
            present = parse_diskstats(self._file.read_text())
        except OSError as e:
            return [self.unavailable(f"disk.{k}", u, os_reason(e, str(path)), availability_of(e)) for k, u in _KINDS]
        block = self.hp.s("block")
        physical = [d for d in present if self.hp.is_physical("block", d)]
        missing: list[str] = []
        if self.options.devices is not None:
            missing = [d for d in self.options.devices if d not in present]
            chosen = [d for d in self.options.devices if d in present]
        else:
            virtual = [d for d in present if (block / d).is_dir() and d not in physical]
            chosen = physical + (virtual if self.options.include_virtual else [])
        self._physical = frozenset(d for d in chosen if d in physical)
        self._devices = frozenset(chosen)
        specs = []
        if self._physical:
            specs += [self.spec(f"disk.{k}", u) for k, u in _KINDS]
        else:
            reason = f"no physical block device (with a {block}/<dev>/device link) in {path}"
            specs += [self.unavailable(f"disk.{k}", u, reason, Availability.UNSUPPORTED) for k, u in _KINDS]
        for d in sorted(self._devices):
            specs += [self.spec(f"disk.{d}.{k}", u) for k, u in _KINDS]
        for d in missing:
            specs += [self.unavailable(f"disk.{d}.{k}", u, f"no device {d!r} in {path}") for k, u in _KINDS]
        return specs

    def read(self) -> Raw:
        raw = parse_diskstats(self._file.read_text(), self._devices)
        # Which devices enter the totals travels with the raw sample, so replay needs nothing else.
        raw[PHYSICAL_KEY] = tuple(sorted(self._physical))
        return raw

    @staticmethod
    def derive(prev: Raw, cur: Raw, elapsed_s: float) -> dict[str, float]:
        out: dict[str, float] = {}
        physical = set(cur.get(PHYSICAL_KEY, ()))
        totals = [0.0, 0.0, 0.0, 0.0]
        busiest = None
        for dev, c in cur.items():
            p = prev.get(dev)
            if dev == PHYSICAL_KEY or p is None:
                continue
            r = device_rates(p, c, elapsed_s)
            if r is None:
                continue
            for (k, _), v in zip(_KINDS, r):
                out[f"disk.{dev}.{k}"] = v
            if dev in physical:
                for i in range(4):
                    totals[i] += r[i]
                busiest = r[4] if busiest is None else max(busiest, r[4])
        if busiest is not None:
            for (k, _), v in zip(_KINDS, totals):
                out[f"disk.{k}"] = v
            out["disk.busy"] = busiest
        return out

    def close(self):
        if getattr(self, "_file", None):
            self._file.close()


register(DiskSampler)
