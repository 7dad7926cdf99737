"""Parse the bytes read(2) returns from a perf event fd, and scale for multiplexing.

Pure functions of (bytes, read_format): tested on recorded bytes, no file descriptors.

Layout (perf_event_open(2), "Reading results"), all u64 in host byte order:

    PERF_FORMAT_GROUP set:               not set:
      nr                                   value
      time_enabled   (TOTAL_TIME_ENABLED)  time_enabled  (TOTAL_TIME_ENABLED)
      time_running   (TOTAL_TIME_RUNNING)  time_running  (TOTAL_TIME_RUNNING)
      nr × { value                         id            (ID)
             id      (ID)                  lost          (LOST)
             lost    (LOST) }
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass

from .abi import (PERF_FORMAT_GROUP, PERF_FORMAT_ID, PERF_FORMAT_LOST, PERF_FORMAT_TOTAL_TIME_ENABLED,
                  PERF_FORMAT_TOTAL_TIME_RUNNING)


class ReadFormatError(ValueError):
    """The bytes do not match the read_format they were read with."""


@dataclass(frozen=True)
class Reading:
    """One read of an event or a group: counters in group order, times in nanoseconds.

    time_enabled / time_running are None when the read_format did not ask for them;
    ids / lost are empty tuples when not asked for.
    """

    values: tuple[int, ...]
    time_enabled: int | None = None
    time_running: int | None = None
    ids: tuple[int, ...] = ()
    lost: tuple[int, ...] = ()


def read_size(read_format: int, nr: int = 1) -> int:
    """Bytes one read returns for nr events (nr = 1 without PERF_FORMAT_GROUP)."""
    per = 1 + bool(read_format & PERF_FORMAT_ID) + bool(read_format & PERF_FORMAT_LOST)
    times = bool(read_format & PERF_FORMAT_TOTAL_TIME_ENABLED) + bool(read_format & PERF_FORMAT_TOTAL_TIME_RUNNING)
    if read_format & PERF_FORMAT_GROUP:
        return 8 * (1 + times + nr * per)
    return 8 * (times + per)


def parse_read(data: bytes, read_format: int) -> Reading:
    """Bytes from read(2) on a perf fd -> Reading. Raises ReadFormatError on a size mismatch."""
    if len(data) % 8 or not data:
        raise ReadFormatError(f"perf read returned {len(data)} bytes, not a whole number of u64")
    words = struct.unpack(f"={len(data) // 8}Q", data)
    has_id = bool(read_format & PERF_FORMAT_ID)
    has_lost = bool(read_format & PERF_FORMAT_LOST)
    pos = 0
    if read_format & PERF_FORMAT_GROUP:
        nr = words[0]
        pos = 1
        expected = read_size(read_format, nr) // 8
        if len(words) != expected:
            raise ReadFormatError(f"group read of {nr} events: expected {expected * 8} bytes, got {len(data)}")
    elif len(words) != read_size(read_format) // 8:
        raise ReadFormatError(f"single read: expected {read_size(read_format)} bytes, got {len(data)}")
    te = tr = None
    if read_format & PERF_FORMAT_GROUP:
        if read_format & PERF_FORMAT_TOTAL_TIME_ENABLED:
            te, pos = words[pos], pos + 1
        if read_format & PERF_FORMAT_TOTAL_TIME_RUNNING:
            tr, pos = words[pos], pos + 1
        values, ids, lost = [], [], []
        for _ in range(nr):
            values.append(words[pos])
            pos += 1
            if has_id:
                ids.append(words[pos])
                pos += 1
            if has_lost:
                lost.append(words[pos])
                pos += 1
        return Reading(tuple(values), te, tr, tuple(ids), tuple(lost))
    value, pos = words[0], 1
    if read_format & PERF_FORMAT_TOTAL_TIME_ENABLED:
        te, pos = words[pos], pos + 1
    if read_format & PERF_FORMAT_TOTAL_TIME_RUNNING:
        tr, pos = words[pos], pos + 1
    ids = (words[pos],) if has_id else ()
    pos += has_id
    lost = (words[pos],) if has_lost else ()
    return Reading((value,), te, tr, ids, lost)


def scaled_delta(prev_value: int, cur_value: int, prev_enabled: int, cur_enabled: int,
                 prev_running: int, cur_running: int) -> float:
    """The event count over a window, corrected for multiplexing.

    When more events are open than the PMU has counters, the kernel time-shares them and
    each counts only while running: count × (enabled / running) estimates the full-window
    count. Scaling the window's deltas (not the cumulative totals) keeps one window's
    schedule from leaking into the next. NaN when the event never ran in the window.
    """
    dv = cur_value - prev_value
    de = cur_enabled - prev_enabled
    dr = cur_running - prev_running
    if dv < 0 or de < 0 or dr < 0:
        return math.nan  # counter reset: no valid delta
    if dr == 0:
        return math.nan
    if dr >= de:
        return float(dv)
    return dv * (de / dr)
