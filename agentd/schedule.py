"""Plan → compiled schedule: the binary file mimesys-runner executes.

Compiling turns each window's fractions into integer nanosecond segments and fixes
their order. For every executed window and thread, the stressors with a non-zero share
run back to back in an order drawn from `numpy.random.default_rng(seed)`, then the thread
sleeps for the rest of the window (a held window, below, sleeps before its tail instead). Same
plan + seed + options → identical bytes.

Durations: d[m, k] = floor(a[m, k] * W_ns) in float64 (exact to the nanosecond); if the
float32 fractions of a thread sum a hair above 1 (Plan.SUM_TOLERANCE) the largest segment
is shortened by the excess, so a thread's segments never sum to more than W_ns.

The hold: a plan that names the busy fraction of each thread's core (Plan.core_busy_target)
gets it compiled into every thread-window that runs both compute (catalog class "cpu") and
something else: those compute segments go last (the tail, in a drawn order of their own), and
the runner sizes the tail so the core reaches the target — the CPU an IO or network stressor
costs depends on how fast the device answers that second, the target does not. The tail runs
last in the window, sized from a second reading just before it, so the CPU the IO costs the
core after the fact (completions, softirqs) is counted before the tail rather than after it. A thread-window
that runs something else but no compute gets a reserve: the catalog's first compute variant
(a plain ALU loop: no memory traffic, no extra thread) planned at 0 ns, which the runner grows
only if the window's IO leaves the core short of the target (a device that answers faster than
the planner expected would otherwise leave the core idle where the target was busy). Elsewhere
no hold, no tail: a thread-window of compute alone is exact as compiled. The runner also learns,
per thread, the CPU that lands on its core after the reading, and shortens a held window's later
IO when the IO so far cost the core so little that the tail would not fit (runner.c, "The hold",
"CPU first").

Repetitions are the runner's: the file stores `warmup_windows` copies of plan window 0
(tagged repetition -1, window 0..w-1) and the T plan windows once (repetition 0, window t),
and the runner executes the warm-up, then the T windows `repetitions` times (repetition r,
window t). So a schedule's size and compile time do not grow with repetitions (a 1-hour plan
on 8 threads repeated 100 times is 3600 stored windows, not 360 000). The stored order of
each window and thread is drawn here from the seed; the runner keeps it for the warm-up and
repetition 0 and draws every later repetition's order from (seed, executed window, thread),
so repetitions differ in order but not in durations.

Memory held: a plan's `mem_held_B` (bytes per window) is stored per window; the runner reserves
the largest at setup (so the agent's memory budget refuses it before the run starts) and holds
each window's share from that window's start, growing by touching pages and shrinking by giving
them back (runner.c, "Memory held"). The warm-up holds what plan window 0 holds.

Binary format, little-endian, version 4 (stressors/runner.c reads it)::

    header, 64 bytes
      char[8] magic     "MIMSCHD4"
      u32     version   4
      u32     M         stressors (the catalog, in plan order)
      u32     K         threads
      u32     T         plan windows
      u32     repetitions
      u32     warmup_windows
      u64     window_ns
      u64     seed
      u32     S         stored windows = warmup_windows + T (the runner executes
                        E = warmup_windows + repetitions * T)
      u32     reserved  0
      u64     held_max  the most memory any stored window holds (bytes)
    stressor table, M entries
      u16 len + UTF-8   name       e.g. "mem_stream_triad_256M"
      u16 len + UTF-8   kernel     e.g. "stream_triad"
      u16 len + UTF-8   params     "key=value" lines joined by "\n" (booleans as 1/0;
                                   host-relative sizes such as "llc" or "l2/2" are resolved
                                   by the runner from /sys/devices/system/cpu/cpu0/cache;
                                   a paced variant the plan uses gets "pace_Bps=N", the
                                   rate the agent resolved from the host's calibration)
    stored windows, S entries
      i32 repetition (-1 = warm-up, 0 = plan window)   i32 window index (warm-up: 0..w-1)
      u64 memory held in the window (bytes, ≤ held_max)
      K times: u16 nseg, u16 ntail, u32 hold (core busy fraction to hold, parts per
               million; 0xFFFFFFFF = none), then nseg × (u16 stressor index, u64 duration_ns)
               in run order, the last ntail of them the compute tail the hold sizes (a
               reserve: one tail segment of 0 ns)
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

from mimesys.catalog import Catalog, load_catalog
from mimesys.errors import PlanError
from mimesys.plan import Plan

MAGIC = b"MIMSCHD4"
VERSION = 4
HOLD_NONE = 0xFFFFFFFF
_HEADER = struct.Struct("<8sIIIIIIQQIIQ")
_SEG = np.dtype([("stressor", "<u2"), ("dur", "<u8")])
_SCHEDULER_KERNELS = {"cpu_contend", "futex_pingpong"}   # compute that brings threads of its own


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

    @property
    def S(self) -> int:
        """Windows stored in the file."""
        return self.warmup_windows + self.T

    @property
    def E(self) -> int:
        """Windows the runner executes."""
        return self.warmup_windows + self.repetitions * self.T

    def executed(self, i: int) -> tuple[int, int]:
        """(repetition, window) of executed window i, as the runner reports it."""
        w = self.warmup_windows
        return (-1, i) if i < w else ((i - w) // self.T, (i - w) % self.T)

    def write(self, path) -> None:
        from mimesys.fsutil import atomic_write_bytes
        atomic_write_bytes(path, self.data)


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
                 repetitions: int = 1, warmup_windows: int = 0,
                 pace_Bps: dict[str, float] | None = None) -> CompiledSchedule:
    """Validate `plan` against `catalog` and compile it. `seed` overrides plan.seed.
    `pace_Bps`: per-thread bytes/s of each paced variant on this host (from
    calibrator.pace_rates); a plan that runs a paced variant missing from it is refused."""
    catalog = catalog or load_catalog()
    plan.validate(catalog)
    if repetitions < 1:
        raise PlanError(f"repetitions={repetitions}: must be at least 1")
    if warmup_windows < 0:
        raise PlanError(f"warmup_windows={warmup_windows}: must be ≥ 0")
    seed = int(plan.seed if seed is None else seed)
    if seed < 0:
        raise PlanError(f"seed={seed}: must be ≥ 0")
    if seed >= 1 << 64:   # the header's u64: struct.error (a traceback in replay) otherwise
        raise PlanError(f"seed={seed}: must be < 2^64")
    paces = paces_for(plan, catalog, pace_Bps or {})
    T, M, K = plan.compositions.shape
    window_ns = int(round(float(plan.window_s) * 1e9))
    stored = [(-1, w) for w in range(warmup_windows)] + [(0, t) for t in range(T)]
    composition_of = [0] * warmup_windows + list(range(T))
    held = held_bytes(plan)

    out = [_HEADER.pack(MAGIC, VERSION, M, K, T, repetitions, warmup_windows, window_ns, seed, len(stored), 0,
                        int(held.max()))]
    for s in catalog.stressors:
        params = {**s.params, "pace_Bps": paces[s.name]} if s.name in paces else s.params
        out += [_str(s.name), _str(s.kernel), _str(_params_text(params))]

    durations = np.stack([durations_ns(plan.compositions[t], window_ns) for t in range(T)])  # [T, M, K]
    compute = np.array([s.resource_class == "cpu" for s in catalog.stressors])
    holds, reserve = hold_ppm(plan, durations, compute)                             # [T, K] each
    reserve_m = reserve_stressor(catalog) if reserve.any() else None
    rng = np.random.default_rng(seed)
    block = 4096
    for b0 in range(0, len(stored), block):
        keys = rng.random((min(block, len(stored) - b0), K, M))  # one random order per window, thread
        orders = np.argsort(keys, axis=2, kind="stable")
        for j, order in enumerate(orders):
            e = b0 + j
            rep, win = stored[e]
            out.append(struct.pack("<iiQ", rep, win, int(held[composition_of[e]])))
            d = durations[composition_of[e]]  # [M, K]
            hold, spare = holds[composition_of[e]], reserve[composition_of[e]]
            for k in range(K):
                idx = order[k][d[order[k], k] > 0]
                ntail = 0
                if spare[k]:
                    idx, ntail = np.append(idx, reserve_m), 1
                elif hold[k] != HOLD_NONE:
                    tail = compute[idx]
                    idx, ntail = np.concatenate([idx[~tail], idx[tail]]), int(tail.sum())
                segs = np.empty(len(idx), _SEG)
                segs["stressor"] = idx
                segs["dur"] = d[idx, k]        # the reserve's 0 ns: d is 0 where the plan runs nothing
                out.append(struct.pack("<HHI", len(idx), ntail, int(hold[k])) + segs.tobytes())
    return CompiledSchedule(b"".join(out), M, K, T, repetitions, warmup_windows, window_ns, seed)


def held_bytes(plan: Plan) -> np.ndarray:
    """uint64 [T]: the memory each plan window holds, whole pages' worth rounding left to the
    runner (0 where the plan holds none)."""
    if plan.mem_held_B is None:
        return np.zeros(plan.T, np.uint64)
    return np.floor(np.asarray(plan.mem_held_B, np.float64)).astype(np.uint64)


def hold_ppm(plan: Plan, durations: np.ndarray, compute: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(uint32 [T, K], bool [T, K]): the core busy fraction the runner holds in each
    thread-window (parts per million; HOLD_NONE where the plan names none, or the thread-window
    runs nothing or nothing but compute), and where the held thread-window has no compute of its
    own and gets the reserve."""
    T, _, K = durations.shape
    out = np.full((T, K), HOLD_NONE, np.uint32)
    target = plan.core_busy_target
    if target is None:
        return out, np.zeros((T, K), bool)
    runs = durations > 0                                                  # [T, M, K]
    other = runs[:, ~compute, :].any(axis=1)
    ok = other & np.isfinite(target)
    out[ok] = np.round(np.clip(target[ok].astype(np.float64), 0.0, 1.0) * 1e6).astype(np.uint32)
    return out, ok & ~runs[:, compute, :].any(axis=1)


def reserve_stressor(catalog: Catalog) -> int:
    """The reserve's stressor: the catalog's first compute variant that does its work on the
    calling thread alone (not a scheduler kernel with helper threads)."""
    for m, s in enumerate(catalog.stressors):
        if s.resource_class == "cpu" and s.kernel not in _SCHEDULER_KERNELS:
            return m
    raise PlanError("the catalog has no compute variant to hold a core's busy fraction with")


def paces_for(plan: Plan, catalog: Catalog, pace_Bps: dict[str, float]) -> dict[str, int]:
    """The pace (integer bytes/s, ≥ 1) of every paced variant the plan runs; PlanError
    naming the variant and its base when the host has no rate for one."""
    used = (plan.compositions > 0).any(axis=(0, 2))
    out = {}
    for m in catalog.paced():
        if not used[m]:
            continue
        s = catalog.stressors[m]
        rate = pace_Bps.get(s.name)
        if rate is None or not np.isfinite(rate) or rate <= 0:
            raise PlanError(f"plan uses {s.name}, paced to {s.pace['fraction']:g} of {s.pace['base']}'s calibrated "
                            f"rate, but this host has no calibration of {s.pace['base']}: run "
                            f"`mimesys-agent calibrate` on the agent (or `--only {s.pace['base']}`), or "
                            f"regenerate the plan without paced variants")
        out[s.name] = max(1, int(round(rate)))
    return out


@dataclass(frozen=True)
class DecodedWindow:
    repetition: int
    window: int
    segments: tuple[tuple[tuple[int, int], ...], ...]  # per thread: ((stressor, duration_ns), ...)
    tails: tuple[int, ...] = ()                        # per thread: the compute tail's segment count
    holds: tuple[int | None, ...] = ()                 # per thread: core busy held, ppm (None: no hold)
    held_B: int = 0                                    # memory held in the window


def decode_schedule(data: bytes) -> tuple[dict, list[str], list[DecodedWindow]]:
    """Parse a compiled schedule (for tests and `run-plan --dry-run`): header, names and the
    stored windows (the runner repeats the plan windows; see the module's docstring)."""
    if len(data) < _HEADER.size or data[:8] != MAGIC:
        raise PlanError("not a mimesys compiled schedule (bad magic)")
    (_, version, M, K, T, reps, warmup, window_ns, seed, S, _, held_max) = _HEADER.unpack_from(data)
    header = dict(version=version, M=M, K=K, T=T, repetitions=reps, warmup_windows=warmup,
                  window_ns=window_ns, seed=seed, S=S, E=warmup + reps * T, held_max=held_max)
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
    for _ in range(S):
        rep, win, held_B = struct.unpack_from("<iiQ", data, pos)
        pos += 16
        threads, tails, holds = [], [], []
        for _ in range(K):
            (n, ntail, hold) = struct.unpack_from("<HHI", data, pos)
            pos += 8
            segs = np.frombuffer(data, _SEG, n, pos)
            pos += n * _SEG.itemsize
            threads.append(tuple((int(s), int(d)) for s, d in zip(segs["stressor"], segs["dur"])))
            tails.append(int(ntail))
            holds.append(None if hold == HOLD_NONE else int(hold))
        windows.append(DecodedWindow(rep, win, tuple(threads), tuple(tails), tuple(holds), int(held_B)))
    if pos != len(data):
        raise PlanError(f"compiled schedule has {len(data) - pos} trailing bytes")
    return header, names, windows
