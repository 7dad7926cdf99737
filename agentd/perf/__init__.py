"""A small ctypes binding of perf_event_open(2).

- abi.py: kernel ABI definitions (struct perf_event_attr, ioctl and syscall numbers).
- readformat.py: the pure parser of read(2) bytes and the multiplexing scale.
- events.py: the syscall, typed errors with hints, and the context-managed CounterGroup.
- pmu.py: dynamic (uncore) PMUs described in sysfs, resolved to EventSpecs.
"""

from .events import (CounterGroup, EventSpec, PerfEventError, PerfPermissionError, PerfUnsupportedError,
                     perf_event_open, probe_event)
from .readformat import Reading, ReadFormatError, parse_read, scaled_delta

__all__ = ["CounterGroup", "EventSpec", "PerfEventError", "PerfPermissionError", "PerfUnsupportedError",
           "ReadFormatError", "Reading", "parse_read", "perf_event_open", "probe_event", "scaled_delta"]
