"""The solo profile's layout: which stressor runs where in each window, and which windows are read.

The profile is the host's one solo measurement: `mimesys-agent calibrate` records it beside the
calibration (agentd/profile_recorder.py), the agent serves it (GET /v1/profile), `mimesys collect`
keeps a copy in its campaign and takes round 0's samples from it, and the first-order forward
model is read from it (controller/forward_fit/profile.py). The agent and the controller both need
the layout, so it lives here.

Plan (`hold` windows per step; only the last window of each step is read):

    for each stressor m: idle × 1, m on thread 0 × hold, m on thread 1 × hold (hosts with
    two plan threads or more), m on every thread × hold;  idle × 1

With hold 2 the window read comes a window after each switch, so the previous step's
after-effects have settled (≈ 7 × M + 1 windows: 337 for the 48-stressor catalog, ~6 min at
W = 1 s); with hold 1 (≈ 4 × M + 1 windows, ~3.2 min) the window read is the first after the
switch and the idle window before each stressor is the only settling time. Both are 1-s
windows of the plan's own window length, so every consecutive pair is also a training sample.
"""

from __future__ import annotations

import numpy as np

from .plan import Plan

FORMAT = "mimesys.solo-profile"
HOLD = 2                             # the default: windows per step
LAYOUT = "interleaved-idle-t1"       # solo on thread 0 and on thread 1 (two plan threads or more)
LAYOUT_ONE_THREAD = "interleaved-idle"   # one plan thread, and every profile before the thread-1 step
LAYOUTS = (LAYOUT, LAYOUT_ONE_THREAD)


def layout_for(threads: int) -> str:
    return LAYOUT if threads >= 2 else LAYOUT_ONE_THREAD


def _steps(layout: str) -> int:
    return 3 if layout == LAYOUT else 2


def hold_of(provenance: dict | None) -> int:
    """The profile's windows per step (profiles written before it was recorded used 2)."""
    hold = (provenance or {}).get("hold", HOLD)
    if isinstance(hold, bool) or not isinstance(hold, int) or not 1 <= hold <= 16:
        from .errors import ValidationError
        raise ValidationError(f"solo profile: hold {hold!r} is not a window count in [1, 16]")
    return hold


def profile_plan(catalog_names: list[str], catalog_hash: str, threads: int, window_s: float = 1.0,
                 hold: int = HOLD) -> Plan:
    layout = layout_for(threads)
    a = profile_compositions(len(catalog_names), threads, layout, hold)
    return Plan(a, list(catalog_names), catalog_hash, window_s=window_s, seed=0,
                provenance={"by": FORMAT, "layout": layout, "hold": hold})


def profile_compositions(M: int, threads: int, layout: str, hold: int) -> np.ndarray:
    """The profile's compositions [block × M + 1, M, threads] for a layout and hold (a profile's
    provenance names both: a campaign's round 0 rebuilds the executed windows from them)."""
    from .errors import ValidationError
    if layout not in LAYOUTS:
        raise ValidationError(f"profile layout {layout!r}; known: {', '.join(LAYOUTS)}")
    if hold < 1:
        raise ValidationError(f"profile hold {hold}: at least one window per step")
    if layout == LAYOUT and threads < 2:
        raise ValidationError(f"profile layout {layout!r} needs two plan threads, got {threads}")
    block = 1 + _steps(layout) * hold
    a = np.zeros((block * M + 1, M, threads), np.float32)
    for m in range(M):
        t = block * m + 1
        a[t:t + hold, m, 0] = 1.0
        if layout == LAYOUT:
            t += hold
            a[t:t + hold, m, 1] = 1.0
        a[t + hold:t + 2 * hold, m, :] = 1.0
    return a


def windows_of(M: int, layout: str = LAYOUT_ONE_THREAD, hold: int = HOLD) -> dict:
    """Which trace rows to read: idle rows, and per stressor its solo row (thread 0), its row
    on thread 1 (None in a one-thread layout) and its all-thread row."""
    steps = _steps(layout)
    block = 1 + steps * hold
    idle = [block * m for m in range(M + 1)]
    solo = [block * m + hold for m in range(M)]
    solo1 = [block * m + 2 * hold for m in range(M)] if steps == 3 else None
    full = [block * m + steps * hold for m in range(M)]
    return {"idle": idle, "solo": solo, "solo1": solo1, "all": full}


def memory_footprint(entries: list[dict], threads: int) -> list[float]:
    """Bytes each catalog entry's buffers hold once a plan runs it on `threads` threads
    (mimesys/catalog.buffer_of: once if shared, for the whole run; else per thread, in the
    windows that run it)."""
    from .catalog import buffer_of
    out = []
    for e in entries:
        b = buffer_of(e.get("params") or {})
        out.append(b.bytes * (1 if b.shared else threads))
    return out


def provenance(entries: list[dict], catalog_hash: str, thread_cores: list[int], calibration: dict, *,
               layout: str, hold: int, recorded_by: str) -> dict:
    """What a profile trace carries so it can be fitted later without the agent: the catalog
    (names, classes, footprints), the cores, and the calibration's figures the fit reads."""
    from .calibration import segment_dead_s
    cal = calibration or {}
    fractions = {name: ((e or {}).get("one_thread") or {}).get("cpu_fraction")
                 for name, e in (cal.get("stressors") or {}).items()}
    host_peaks = dict(cal.get("host_peaks") or {})
    peaks = host_peaks | {k: v for k, v in (cal.get("peaks") or {}).items() if k not in host_peaks}
    return {"by": FORMAT, "catalog_names": [e["name"] for e in entries],
            "catalog_classes": [str(e.get("class", "")) for e in entries],
            "catalog_footprint_B": memory_footprint(entries, len(thread_cores)),
            "catalog_hash": catalog_hash, "thread_cores": [int(c) for c in thread_cores],
            "host_peaks": peaks, "cpu_fraction": {k: v for k, v in fractions.items() if v},
            "segment_dead_s": segment_dead_s(cal), "agent": recorded_by, "layout": layout, "hold": int(hold)}
