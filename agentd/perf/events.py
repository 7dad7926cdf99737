"""perf_event_open through ctypes: one event, or a context-managed counter group.

    with CounterGroup([SW_CONTEXT_SWITCHES, SW_CPU_MIGRATIONS], cpu=0) as g:
        r = g.read()          # Reading(values=(ctx, mig), time_enabled, time_running, ids)

A failed syscall becomes a PerfEventError subclass whose message names the event and CPU,
says the kernel's errno string, and adds a hint about the likely cause (perf_event_paranoid,
a VM without a PMU, a CPU offline, too many open files).
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from mimesys.errors import MimesysError

from . import abi
from .readformat import Reading, parse_read, read_size

GROUP_READ_FORMAT = (abi.PERF_FORMAT_GROUP | abi.PERF_FORMAT_ID | abi.PERF_FORMAT_TOTAL_TIME_ENABLED
                     | abi.PERF_FORMAT_TOTAL_TIME_RUNNING)


@dataclass(frozen=True)
class EventSpec:
    """What to count: the (type, config...) pair the kernel understands, with a name for people."""

    name: str
    type: int
    config: int
    config1: int = 0
    config2: int = 0

    def attr(self, read_format: int, *, disabled: bool) -> abi.perf_event_attr:
        a = abi.perf_event_attr()
        a.type = self.type
        a.size = ctypes.sizeof(abi.perf_event_attr)
        a.config = self.config
        a.config1 = self.config1
        a.config2 = self.config2
        a.read_format = read_format
        a.flags = abi.ATTR_DISABLED if disabled else 0
        return a


SW_CONTEXT_SWITCHES = EventSpec("context-switches", abi.PERF_TYPE_SOFTWARE, abi.PERF_COUNT_SW_CONTEXT_SWITCHES)
SW_CPU_MIGRATIONS = EventSpec("cpu-migrations", abi.PERF_TYPE_SOFTWARE, abi.PERF_COUNT_SW_CPU_MIGRATIONS)
SW_PAGE_FAULTS = EventSpec("page-faults", abi.PERF_TYPE_SOFTWARE, abi.PERF_COUNT_SW_PAGE_FAULTS)
SW_CPU_CLOCK = EventSpec("cpu-clock", abi.PERF_TYPE_SOFTWARE, abi.PERF_COUNT_SW_CPU_CLOCK)
HW_CPU_CYCLES = EventSpec("cpu-cycles", abi.PERF_TYPE_HARDWARE, abi.PERF_COUNT_HW_CPU_CYCLES)
HW_INSTRUCTIONS = EventSpec("instructions", abi.PERF_TYPE_HARDWARE, abi.PERF_COUNT_HW_INSTRUCTIONS)
HW_CACHE_REFERENCES = EventSpec("cache-references", abi.PERF_TYPE_HARDWARE, abi.PERF_COUNT_HW_CACHE_REFERENCES)
HW_CACHE_MISSES = EventSpec("cache-misses", abi.PERF_TYPE_HARDWARE, abi.PERF_COUNT_HW_CACHE_MISSES)


# -- errors -------------------------------------------------------------------
class PerfEventError(MimesysError):
    """perf_event_open or a perf fd operation failed. .errno, .event, .cpu, .hint."""

    def __init__(self, err: int, event: str, cpu: int, hint: str = ""):
        self.errno, self.event, self.cpu, self.hint = err, event, cpu, hint
        self.strerror = os.strerror(err)
        where = f"perf_event_open({event}, cpu {cpu})" if cpu >= 0 else f"perf_event_open({event})"
        super().__init__(f"{where}: {self.strerror}" + (f" — {hint}" if hint else ""))


class PerfPermissionError(PerfEventError):
    """EACCES / EPERM: the kernel refused (paranoia level, capabilities, seccomp)."""


class PerfUnsupportedError(PerfEventError):
    """ENOENT / EOPNOTSUPP / ENODEV / EINVAL: this CPU, VM or kernel cannot count the event."""


def paranoid_level(proc: Path = Path("/proc")) -> str:
    try:
        return (proc / "sys/kernel/perf_event_paranoid").read_text().strip()
    except OSError:
        return "unknown"


def perf_error(err: int, event: str, cpu: int, proc: Path = Path("/proc")) -> PerfEventError:
    """errno -> the typed error with a hint about the likely cause."""
    if err in (errno.EACCES, errno.EPERM):
        hint = (f"kernel.perf_event_paranoid is {paranoid_level(proc)}; system-wide counting needs CAP_PERFMON "
                "(or CAP_SYS_ADMIN) or paranoid <= 0")
        if err == errno.EPERM:  # the kernel's own refusals are EACCES; EPERM is typically seccomp
            hint += ("; EPERM is also what a seccomp filter returns: systemd's SystemCallFilter= must allow "
                     "perf_event_open, which is in @debug")
        return PerfPermissionError(err, event, cpu, hint)
    if err in (errno.ENOENT, errno.EOPNOTSUPP):
        return PerfUnsupportedError(err, event, cpu, "the event is not supported by this CPU/VM "
                                    "(a VM often exposes no hardware PMU)")
    if err == errno.ENODEV:
        return PerfUnsupportedError(err, event, cpu, "no such PMU, or the CPU is offline")
    if err == errno.EINVAL:
        return PerfUnsupportedError(err, event, cpu, "the kernel rejected the event encoding or a flag")
    if err == errno.E2BIG:
        return PerfUnsupportedError(err, event, cpu, "perf_event_attr is larger than this kernel accepts")
    if err in (errno.EMFILE, errno.ENFILE):
        return PerfEventError(err, event, cpu, "out of file descriptors (one per event per CPU): raise LimitNOFILE")
    if err == errno.EBUSY:
        return PerfEventError(err, event, cpu, "the PMU is held exclusively by another user")
    if err == errno.ENOSPC:
        return PerfEventError(err, event, cpu, "no free hardware counter")
    if err == errno.ENOSYS:
        return PerfUnsupportedError(err, event, cpu, "this kernel has no perf_event support")
    return PerfEventError(err, event, cpu)


# -- the syscall --------------------------------------------------------------
_libc = ctypes.CDLL(None, use_errno=True)
_syscall = _libc.syscall
_syscall.restype = ctypes.c_long


def perf_event_open(attr: abi.perf_event_attr, pid: int, cpu: int, group_fd: int = -1,
                    flags: int = abi.PERF_FLAG_FD_CLOEXEC, *, event: str = "event") -> int:
    """The raw syscall; returns the fd or raises PerfEventError."""
    try:
        nr = abi.syscall_nr()
    except OSError as e:
        raise PerfUnsupportedError(errno.ENOSYS, event, cpu, str(e)) from None
    fd = _syscall(ctypes.c_long(nr), ctypes.byref(attr), ctypes.c_int(pid), ctypes.c_int(cpu),
                  ctypes.c_int(group_fd), ctypes.c_ulong(flags))
    if fd < 0:
        raise perf_error(ctypes.get_errno(), event, cpu)
    return int(fd)


def event_id(fd: int) -> int:
    buf = bytearray(8)
    fcntl.ioctl(fd, abi.PERF_EVENT_IOC_ID, buf)
    return struct.unpack("=Q", bytes(buf))[0]


def probe_event(spec: EventSpec, cpu: int = 0, pid: int = -1) -> None:
    """Open and close one event: raises the typed error if this host cannot count it."""
    os.close(perf_event_open(spec.attr(GROUP_READ_FORMAT & ~abi.PERF_FORMAT_GROUP, disabled=True), pid, cpu,
                             event=spec.name))


class CounterGroup:
    """Events counted together on one CPU (pid = -1: everything that runs there) or for one
    task; read atomically with one read(2) on the leader.

    All members are scheduled onto the PMU together, so their ratios (e.g. instructions per
    cycle) are consistent; time_enabled/time_running say how long the group actually counted
    when the PMU had to multiplex it.
    """

    def __init__(self, events: Sequence[EventSpec], cpu: int, pid: int = -1):
        if not events:
            raise ValueError("a counter group needs at least one event")
        self.events = tuple(events)
        self.cpu, self.pid = cpu, pid
        self.read_format = GROUP_READ_FORMAT
        self.fds: list[int] = []
        self.ids: tuple[int, ...] = ()
        self._size = read_size(self.read_format, len(self.events))

    def open(self) -> "CounterGroup":
        try:
            for i, ev in enumerate(self.events):
                leader = self.fds[0] if self.fds else -1
                self.fds.append(perf_event_open(ev.attr(self.read_format, disabled=(i == 0)), self.pid, self.cpu,
                                                leader, event=ev.name))
            self.ids = tuple(event_id(fd) for fd in self.fds)
            fcntl.ioctl(self.fds[0], abi.PERF_EVENT_IOC_RESET, abi.PERF_IOC_FLAG_GROUP)
            fcntl.ioctl(self.fds[0], abi.PERF_EVENT_IOC_ENABLE, abi.PERF_IOC_FLAG_GROUP)
        except BaseException:
            self.close()
            raise
        return self

    def read_bytes(self) -> bytes:
        return os.read(self.fds[0], self._size)

    def read(self) -> Reading:
        r = parse_read(self.read_bytes(), self.read_format)
        if r.ids and r.ids != self.ids:  # the kernel returns members in creation order; check
            raise PerfEventError(errno.EIO, "+".join(e.name for e in self.events), self.cpu,
                                 f"group read returned ids {r.ids}, expected {self.ids}")
        return r

    def close(self) -> None:
        while self.fds:
            fd = self.fds.pop()  # members first, leader last
            try:
                os.close(fd)
            except OSError:
                pass

    def __enter__(self) -> "CounterGroup":
        return self.open()

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):
        self.close()
