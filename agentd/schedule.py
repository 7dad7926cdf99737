"""Plan → compiled schedule: the binary file mimesys-runner executes.

Compiling turns each window's fractions into integer nanosecond segments and fixes
their order. For every executed window and thread, the stressors with a non-zero share
run back to back in an order drawn from `numpy.random.default_rng(seed)`, then the thread
sleeps for the rest of the window. Same plan + seed + options → identical bytes.

Durations: d[m, k] = floor(a[m, k] * W_ns) in float64 (exact to the nanosecond); if the
float32 fractions of a thread sum a hair above 1 (Plan.SUM_TOLERANCE) the largest segment
is shortened by the excess, so a thread's segments never sum to more than W_ns.

Repetitions and warm-up are compiled in (the runner only sees a flat list of executed
windows): `warmup_windows` copies of plan window 0 (tagged repetition -1, window 0..w-1),
then the T plan windows `repetitions` times (repetition r, window t). Each executed window
draws its own order, so repetitions differ in order but not in durations.

Binary format, little-endian, version 1 (stressors/runner.c reads it)::

    header, 56 bytes
      char[8] magic     "MIMSCHD1"
      u32     version   1
      u32     M         stressors (the catalog, in plan order)
      u32     K         threads
      u32     T         plan windows
      u32     repetitions
      u32     warmup_windows
      u64     window_ns
      u64     seed
      u32     E         executed windows = warmup_windows + repetitions * T
      u32     reserved  0
    stressor table, M entries
      u16 len + UTF-8   name       e.g. "mem_stream_triad_256M"
      u16 len + UTF-8   kernel     e.g. "stream_triad"
      u16 len + UTF-8   params     "key=value" lines joined by "\n" (booleans as 1/0;
                                   host-relative sizes such as "llc" or "l2/2" are resolved
                                   by the runner from /sys/devices/system/cpu/cpu0/cache)
    executed windows, E entries
      i32 repetition (-1 = warm-up)   i32 plan window index
      K times: u16 nseg, then nseg × (u16 stressor index, u64 duration_ns), in run order
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

from .catalog import Catalog, load_catalog
from .errors import PlanError
from .plan import Plan

MAGIC = b"MIMSCHD1"
VERSION = 1
_HEADER = struct.Struct("<8sIIIIIIQQII")
_SEG = np.dtype([("stressor", "<u2"), ("dur", "<u8")])


@dataclass(frozen=True)
class CompiledSchedule:
    data: bytes                      # the file's bytes
    M: int
    K: int
    T: int
    repetitions: int
    warmup_windows: int
    window_ns: int
    seed: int
    executed: tuple[tuple[int, int], ...]  # (repetition, plan window) per executed window

    @property
    def E(self) -> int:
        return len(self.executed)

    def write(self, path) -> None:
        with open(path, "wb") as f:
            f.write(self.data)


def durations_ns(window: np.ndarray, window_ns: int) -> np.ndarray:
    """[M, K] fractions of one window → int64 [M, K] nanoseconds, each column ≤ window_ns."""
    d = np.floor(window.astype(np.float64) * window_ns).astype(np.int64)
    d = np.clip(d, 0, window_ns)
    excess = d.sum(axis=0) - window_ns  # [K]
    for k in np.nonzero(excess > 0)[0]:
        m = int(np.argmax(d[:, k]))
        d[m, k] -= excess[k]
    return d


def _params_text(params: dict) -> str:
    lines = []
    for key, value in params.items():
        if isinstance(value, bool):
            value = int(value)
        text = f"{key}={value}"
        if "\n" in text:
            raise PlanError(f"catalog parameter {key!r} contains a newline")
        lines.append(text)
    return "\n".join(lines)


def _str(text: str) -> bytes:
    raw = text.encode()
    if len(raw) > 0xFFFF:
        raise PlanError(f"catalog string too long for the schedule: {text[:40]!r}...")
    return struct.pack("<H", len(raw)) + raw


def compile_plan(plan: Plan, catalog: Catalog | None = None, *, seed: int | None = None,
                 repetitions: int = 1, warmup_windows: int = 0) -> CompiledSchedule:
    """Validate `plan` against `catalog` and compile it. `seed` overrides plan.seed."""
    catalog = catalog or load_catalog()
    plan.validate(catalog)
    if repetitions < 1:
        raise PlanError(f"repetitions={repetitions}: must be at least 1")
    if warmup_windows < 0:
        raise PlanError(f"warmup_windows={warmup_windows}: must be ≥ 0")
    seed = int(plan.seed if seed is None else seed)
    if seed < 0:
        raise PlanError(f"seed={seed}: must be ≥ 0")
    T, M, K = plan.compositions.shape
    window_ns = int(round(float(plan.window_s) * 1e9))
    executed = [(-1, w) for w in range(warmup_windows)] + [(r, t) for r in range(repetitions) for t in range(T)]
    composition_of = [0] * warmup_windows + [t for _ in range(repetitions) for t in range(T)]

    out = [_HEADER.pack(MAGIC, VERSION, M, K, T, repetitions, warmup_windows, window_ns, seed, len(executed), 0)]
    for s in catalog.stressors:
        out += [_str(s.name), _str(s.kernel), _str(_params_text(s.params))]

    durations = np.stack([durations_ns(plan.compositions[t], window_ns) for t in range(T)])  # [T, M, K]
    rng = np.random.default_rng(seed)
    block = 4096
    for b0 in range(0, len(executed), block):
        keys = rng.random((min(block, len(executed) - b0), K, M))  # one random order per window, thread
        orders = np.argsort(keys, axis=2, kind="stable")
        for j, order in enumerate(orders):
            e = b0 + j
            rep, win = executed[e]
            out.append(struct.pack("<ii", rep, win))
            d = durations[composition_of[e]]  # [M, K]
            for k in range(K):
                idx = order[k][d[order[k], k] > 0]
                segs = np.empty(len(idx), _SEG)
                segs["stressor"] = idx
                segs["dur"] = d[idx, k]
                out.append(struct.pack("<H", len(idx)) + segs.tobytes())
    return CompiledSchedule(b"".join(out), M, K, T, repetitions, warmup_windows, window_ns, seed, tuple(executed))


@dataclass(frozen=True)
class DecodedWindow:
    repetition: int
    window: int
    segments: tuple[tuple[tuple[int, int], ...], ...]  # per thread: ((stressor, duration_ns), ...)


def decode_schedule(data: bytes) -> tuple[dict, list[str], list[DecodedWindow]]:
    """Parse a compiled schedule (for tests and `run-plan --dry-run`): header, names, windows."""
    if len(data) < _HEADER.size or data[:8] != MAGIC:
        raise PlanError("not a mimesys compiled schedule (bad magic)")
    (_, version, M, K, T, reps, warmup, window_ns, seed, E, _) = _HEADER.unpack_from(data)
    header = dict(version=version, M=M, K=K, T=T, repetitions=reps, warmup_windows=warmup,
                  window_ns=window_ns, seed=seed, E=E)
    pos = _HEADER.size
    names = []

    def rd_str():
        nonlocal pos
        (n,) = struct.unpack_from("<H", data, pos)
        s = data[pos + 2:pos + 2 + n].decode()
        pos += 2 + n
        return s

    for _ in range(M):
        names.append(rd_str())
        rd_str()
        rd_str()
    windows = []
    for _ in range(E):
        rep, win = struct.unpack_from("<ii", data, pos)
        pos += 8
        threads = []
        for _ in range(K):
            (n,) = struct.unpack_from("<H", data, pos)
            pos += 2
            segs = np.frombuffer(data, _SEG, n, pos)
            pos += n * _SEG.itemsize
            threads.append(tuple((int(s), int(d)) for s, d in zip(segs["stressor"], segs["dur"])))
        windows.append(DecodedWindow(rep, win, tuple(threads)))
    if pos != len(data):
        raise PlanError(f"compiled schedule has {len(data) - pos} trailing bytes")
    return header, names, windows
