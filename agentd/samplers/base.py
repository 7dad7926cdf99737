"""What every sampler is: probe once, read raw counters each tick, derive rates purely.

A sampler's life:
- ``probe()`` runs once at start-up and returns its MetricSpecs. Availability is decided
  here (unsupported / permission_denied carry the kernel's reason) and never changes; the
  metric list is fixed for the agent's lifetime.
- ``read()`` returns a ``Raw`` mapping of counters exactly as the kernel gave them
  (cumulative where the kernel is cumulative). It raises ``NoData`` for "nothing this
  tick" (logged quietly); any other exception marks the sampler failing for that tick and
  the other samplers keep going.
- ``derive(prev, cur, elapsed_s)`` is a static, pure function from two raw readings to
  metric values. Live sampling, recording and replay all call it, so they cannot disagree.
  It returns only what it can compute; whatever it leaves out is NaN.
"""

from __future__ import annotations

import abc
import errno
import os
from dataclasses import dataclass
from typing import ClassVar, Mapping, Union

from mimesys.metrics import Availability, MetricSpec

from mimesys.hostpaths import HostPaths

# Raw counters of one sampler for one tick: name -> number, or a tuple of numbers (e.g. all
# fields of one /proc/stat cpu line). Plain msgpack/JSON types so raw samples can be recorded.
RawValue = Union[int, float, tuple, list]
Raw = Mapping[str, RawValue]


class NoData(Exception):
    """Nothing to report this tick (e.g. a source that updates less often than 1 Hz)."""


@dataclass(frozen=True)
class NoOptions:
    """A sampler without options."""


class Sampler(abc.ABC):
    """One source of host metrics. Subclasses live one per file and call registry.register."""

    name: ClassVar[str]
    default_enabled: ClassVar[bool] = True
    Options: ClassVar[type] = NoOptions

    def __init__(self, hostpaths: HostPaths, options=None):
        self.hp = hostpaths
        self.options = options if options is not None else self.Options()

    @abc.abstractmethod
    def probe(self) -> list[MetricSpec]:
        """Decide, once, which metrics this host provides; never raises for a missing source."""

    def serving_on(self, ports) -> None:
        """The agent now listens on these TCP ports (a sampler that would count its own
        traffic leaves it out)."""

    @abc.abstractmethod
    def read(self) -> Raw:
        """Raw counters as read now. Raises NoData, or anything else when failing."""

    @staticmethod
    @abc.abstractmethod
    def derive(prev: Raw, cur: Raw, elapsed_s: float) -> dict[str, float]:
        """Pure: metric name -> value from two raw readings elapsed_s apart."""

    def close(self) -> None:
        """Release file descriptors and sockets."""

    # -- helpers for subclasses ---------------------------------------------
    def spec(self, name: str, unit: str) -> MetricSpec:
        return MetricSpec(name, unit, Availability.AVAILABLE, "", self.name)

    def unavailable(self, name: str, unit: str, reason: str,
                    availability: Availability = Availability.UNSUPPORTED) -> MetricSpec:
        return MetricSpec(name, unit, availability, reason, self.name)


def availability_of(err: OSError) -> Availability:
    """EACCES/EPERM mean the source exists but we may not read it; anything else: unsupported."""
    if err.errno in (errno.EACCES, errno.EPERM):
        return Availability.PERMISSION_DENIED
    return Availability.UNSUPPORTED


def os_reason(err: OSError, what: str) -> str:
    """'<what>: <strerror>' in the kernel's words, without Python's '[Errno n]' prefix."""
    msg = (err.strerror or os.strerror(err.errno)) if err.errno else str(err)
    return f"{what}: {msg}"


class ProcFile:
    """A /proc or /sys file kept open across ticks and re-read from offset 0 with pread.

    Opening a file costs a path walk and a descriptor; at 1 Hz for several files that is a
    measurable part of the sampler budget, and seq_file-backed files regenerate their content
    on every read from offset 0 anyway.
    """

    def __init__(self, path: os.PathLike | str, bufsize: int = 4096, max_bytes: int = 1 << 20):
        self.path = str(path)
        self.fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        self.bufsize = bufsize
        self.max_bytes = max_bytes

    def read_bytes(self) -> bytes:
        while True:
            data = os.pread(self.fd, self.bufsize, 0)
            if len(data) < self.bufsize:
                return data
            if self.bufsize >= self.max_bytes:   # a bounded buffer: the sampler says the file is unusable
                raise OSError(errno.EFBIG, f"{self.path}: longer than {self.max_bytes} bytes")
            self.bufsize = min(2 * self.bufsize, self.max_bytes)  # a full read may be truncated: grow, retry

    def read_text(self) -> str:
        return self.read_bytes().decode("ascii", "replace")

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __del__(self):  # a sampler dropped without close() must not leak its descriptors
        try:
            self.close()
        except Exception:
            pass

