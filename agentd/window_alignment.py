"""Window t of the trace measures exactly window t of the plan.

The samplers are read at every window boundary the runner reports (WindowStarted), so
window t's values are derive(sample at start of t, sample at start of t+1), not a 1 Hz grid
that drifts against it. The last window ends with a sample taken when the runner reports
it done (the runner's threads finish a window at its boundary, idle time included). How
late each boundary sample was (our read time minus the runner's observed boundary, or the
planned end for the last window) is kept per run (`lags`) and shown in /v1/info
("alignment", `lag_stats`): typically < 1 ms here, tens of ms when the host is saturated.

Warm-up windows run before window 0 and are not reported by the runner (if it is asked to
report them, repetition -1, they are sampled but not yielded).
"""

from __future__ import annotations

import statistics
from typing import Callable, Iterator

import numpy as np

from mimesys.backend import ExecutedWindow


class WindowAligner:
    """One run's boundary samples paired with the runner's WindowDone events, in whichever
    order they arrive; `ready()` gives each window once it has both."""

    def __init__(self, last: tuple[int, int], window_ns: int, derive: Callable, lags: list[int]):
        self.last, self.window_ns, self.derive, self.lags = last, window_ns, derive, lags
        self.open_window = None     # (repetition, window, start_ns, start RawSample) of the window running now
        self.measured: dict[tuple[int, int], tuple[int, np.ndarray]] = {}   # values awaiting their WindowDone
        self.done: dict = {}                                                 # WindowDone awaiting values

    def boundary(self, ev, raw) -> None:
        """WindowStarted and the sample read for it: it ends the previous window and starts this one."""
        self.lags.append(raw.monotonic_ns - ev.start_ns)
        if self.open_window is not None:
            rep, win, start_ns, start_raw = self.open_window
            self.measured[(rep, win)] = (start_ns, self.derive(start_raw, raw))
        self.open_window = (ev.repetition, ev.window, ev.start_ns, raw)

    def ends_the_run(self, ev) -> bool:
        """True for the last window's WindowDone while it is open: nothing starts after it, so
        its end sample is to be read now (`end`)."""
        key = (ev.repetition, ev.window)
        return key == self.last and self.open_window is not None and self.open_window[:2] == key

    def end(self, ev, raw) -> None:
        # Against the window's planned end (end_ns is the last *work*, which
        # may be long before the boundary when the window ends idle).
        self.lags.append(raw.monotonic_ns - (ev.planned_start_ns + self.window_ns))
        rep, win, start_ns, start_raw = self.open_window
        self.measured[(rep, win)] = (start_ns, self.derive(start_raw, raw))
        self.open_window = None

    def window_done(self, ev) -> None:
        self.done[(ev.repetition, ev.window)] = ev

    def ready(self) -> Iterator[ExecutedWindow]:
        """The windows that have both their values and their WindowDone, in order (warm-up
        windows dropped)."""
        for key in sorted(set(self.measured) & set(self.done)):
            start_ns, values = self.measured.pop(key)
            d = self.done.pop(key)
            if key[0] < 0:
                continue  # warm-up window (only if the runner reports them): not part of the trace
            yield ExecutedWindow(repetition=key[0], window=key[1], start_ns=start_ns, values=values,
                                 ran_ns=np.asarray(d.ran_ns, np.int64), ops=np.asarray(d.ops, np.int64),
                                 planned_ns=np.asarray(d.planned_ns, np.int64),
                                 bytes=np.asarray(d.bytes, np.int64),
                                 thread_cpu_ns=np.asarray(d.thread_cpu_ns, np.int64))


def lag_stats(lags: list[int]) -> dict:
    """How late the boundary samples of a run were, after the runner's boundary ({} for none)."""
    if not lags:
        return {}
    lags = sorted(lags)
    return {"boundary_samples": len(lags), "lag_median_ms": round(statistics.median(lags) / 1e6, 3),
            "lag_p99_ms": round(lags[min(len(lags) - 1, int(0.99 * len(lags)))] / 1e6, 3),
            "lag_max_ms": round(lags[-1] / 1e6, 3)}
