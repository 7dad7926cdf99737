"""The calibrator: what each stressor achieves on this host, measured by running it. The file it
writes (format, reading, the capacity peaks) is the core's: mimesys/calibration.py.

`measure()` builds one plan in which every stressor runs alone for one window on one
thread (the other threads idle), followed by windows in which each bandwidth-class
stressor (memory, disk, network) runs on all threads at once, executes it with the real
runner, and turns the runner's own op and byte counts into rates. The file it writes is
shown by the agent's /v1/info and used by importers for capacity normalisation (the
`peaks`).

Reach is measured in pairs: the catalog's best variants for each metric run, then the
probes run, `reach_repeats` times over, and reach is the median over pairs of (the catalog's
best in that run / the probe's peak right after it). A shared host's disk moves by ±20 %
within a minute (three pairs on the 2-vCPU VM: 1.09, 1.23, 0.81 for the same two codes), so
comparing one side's best run with the other side's best run from minutes apart measures
the neighbours, not the catalog. Each side of a pair keeps the best of as many draws: the
probes keep the best of their confirmed shapes (two runs of the best memory shape), so the
catalog's candidates run twice in each pair (REACH_DRAWS; with one draw on the catalog's side,
memory bandwidth that moved 35-77 GB/s between seconds on the VM read as reach 0.68 for two
copies of the same streaming-store loop). The probes after the reach runs skip the screening
and run again the shapes the first probe confirmed (`--probe-shapes`): a device's figures move
between minutes, which shapes it likes best does not, and the screening of ~100 shapes was
three quarters of each probe (8.2 s against 2.4 s at 0.02 s a shape on the 2-vCPU VM). Paced
variants are measured like the others (at the rate their base's one-thread figure sets) and
never count towards `peaks` or `reach`.

Short segments (`segment`, disk stressors): the runner ends every segment on time, so an IO
stressor's queue fills only after its first IO's latency and drains before the deadline: a
short segment moves less than its share of the steady rate (5 ms of the 4-deep 1 MiB writer
0.48 of it, 5 ms of fdatasync'd writes 0.32: bench/results/io-segments-2026-11-27). Each disk
stressor runs 10 ms and 40 ms segments in alternate 250 ms windows (a warm-up pair first, then
SEGMENT_PAIRS pairs: the device's drift between seconds falls on both lengths alike), and the
runner's byte counts give bytes(t) = rate · (t − dead): `segment.dead_s`, which the forward
model takes off every planned segment of the stressor (mimesys/forward/firstorder.py). Where the
10 ms segments moved nothing (the 32-deep 1 MiB and 16-deep 4 MiB readers: nothing fits) the
figure is 10 ms, a lower bound; at 40 and 160 ms those readers still moved nothing in 40 ms once
and far less than their rate another time, so the line does not describe them, and the planner
runs them for at least one submission's time anyway (10-50 ms, planners/inverse/segments.quanta). The
windows leave the device idle between segments, as a replay's 1 s windows do: back to back
(50 ms windows) the dead time measured shorter (fdatasync'd writes 1.2 ms, against 3.4 ms in
250 ms windows and 3.7 ms in 1 s ones on the development VM).

`cpu_fraction` is worker CPU time / wall time while the stressor ran: ~1 for CPU work
(helper threads on the worker's CPU included: a futex ping-pong keeps its core busy),
lower for IO that waits on the device. A peak is the highest bytes/s any stressor of that
kind reached (all-threads figure where measured).
"""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import NamedTuple

import numpy as np

from mimesys.calibration import FORMAT, SCHEMA_VERSION
from mimesys.catalog import Catalog, load_catalog
from mimesys.plan import Plan

BANDWIDTH_CLASSES = ("memory", "disk", "network")
# Which kernels read or write the disk (peaks); fallocate moves metadata, not data.
DISK_READ_KERNELS = ("disk_seq_read", "disk_rand_read", "disk_readahead", "disk_qd_read")
DISK_WRITE_KERNELS = ("disk_seq_write", "disk_qd_write")
# sequential streaming kernels: the memory-bandwidth peak (random and hashed access reach less)
MEM_STREAM_KERNELS = ("stream_triad", "stream_read", "stream_copy")


# the short-segment pass (module docstring)
SEGMENT_CLASSES = ("disk",)
SEGMENT_WINDOW_S = 0.25
SEGMENT_SECONDS = (0.01, 0.04)
SEGMENT_PAIRS = 4


@dataclass(frozen=True)
class CalibrationPlan:
    plan: Plan
    one_thread: dict[int, int]   # stressor index -> plan window (thread 0 alone)
    all_threads: dict[int, int]  # stressor index -> plan window (every thread)


def build_plan(catalog: Catalog, threads: int, window_s: float, *, all_threads: bool = True,
               only: list[str] | None = None) -> CalibrationPlan:
    names = only or catalog.names
    idx = [catalog.index(n) for n in names]
    bw = [m for m in idx if catalog.stressors[m].resource_class in BANDWIDTH_CLASSES] \
        if all_threads and threads > 1 else []
    T = len(idx) + len(bw)
    a = np.zeros((T, len(catalog), threads), np.float32)
    one, many = {}, {}
    for t, m in enumerate(idx):
        a[t, m, 0] = 1.0
        one[m] = t
    for j, m in enumerate(bw):
        a[len(idx) + j, m, :] = 1.0
        many[m] = len(idx) + j
    plan = Plan.from_catalog(a, catalog, window_s=window_s, seed=0, provenance={"by": "calibration"})
    return CalibrationPlan(plan, one, many)


@dataclass(frozen=True)
class SegmentPlan:
    plan: Plan
    short: dict[int, list[int]]   # stressor index -> plan windows with the short segment (warm-up left out)
    long: dict[int, list[int]]    # ... with the long one


def build_segment_plan(catalog: Catalog, threads: int, names: list[str], pairs: int = SEGMENT_PAIRS,
                       window_s: float = SEGMENT_WINDOW_S) -> SegmentPlan:
    """Per stressor: an idle window (the previous one's IO drains), then pairs + 1 pairs of a
    short and a long segment on thread 0; the first pair warms the kernel's latency estimate."""
    idx = [catalog.index(n) for n in names]
    per = 1 + 2 * (pairs + 1)
    a = np.zeros((per * len(idx), len(catalog), threads), np.float32)
    short, long = {}, {}
    for i, m in enumerate(idx):
        rows = [per * i + 1 + 2 * p for p in range(pairs + 1)]
        a[rows, m, 0] = SEGMENT_SECONDS[0] / window_s
        a[[r + 1 for r in rows], m, 0] = SEGMENT_SECONDS[1] / window_s
        short[m], long[m] = rows[1:], [r + 1 for r in rows[1:]]
    plan = Plan.from_catalog(a, catalog, window_s=window_s, seed=0, provenance={"by": "calibration-segments"})
    return SegmentPlan(plan, short, long)


def summarize_segments(catalog: Catalog, splan: SegmentPlan, windows: list) -> dict[str, dict]:
    """Runner results of a segment plan -> per stressor name: the median bytes and run time of
    each length, the rate between them and the dead time (None where the long segments moved
    no more than the short ones: a device that stalled, nothing to fit)."""
    by_window = {w.window: w for w in windows}

    def medians(m: int, rows: list[int]) -> tuple[float | None, float | None]:
        got = [(by_window[r].bytes[m, 0], by_window[r].ran_ns[m, 0]) for r in rows if r in by_window]
        if not got:
            return None, None
        b, t = np.median(np.asarray(got, np.float64), axis=0)
        return float(b), float(t) / 1e9

    out = {}
    for m in splan.short:
        (b_s, t_s), (b_l, t_l) = medians(m, splan.short[m]), medians(m, splan.long[m])
        if b_s is None or b_l is None:
            continue
        rate = (b_l - b_s) / (t_l - t_s) if t_l > t_s else 0.0
        dead = float(np.clip(t_s - b_s / rate, 0.0, t_s)) if rate > 0 else None
        out[catalog.stressors[m].name] = {
            "window_s": float(splan.plan.window_s), "short_s": round(t_s, 6), "long_s": round(t_l, 6),
            "short_bytes": b_s, "long_bytes": b_l, "bytes_per_s": float(rate) if rate > 0 else None,
            "dead_s": None if dead is None else round(dead, 6), "pairs": len(splan.short[m])}
    return out


def _rates(done, m: int, threads: list[int]) -> dict:
    ran = float(done.ran_ns[m, threads].sum())
    if ran <= 0:
        return {"ops_per_s": 0.0, "bytes_per_s": 0.0, "ran_s": 0.0, "cpu_fraction": 0.0}
    # per-thread rates summed: aggregate throughput while all ran concurrently
    ops = sum(done.ops[m, k] / done.ran_ns[m, k] * 1e9 for k in threads if done.ran_ns[m, k] > 0)
    nbytes = sum(done.bytes[m, k] / done.ran_ns[m, k] * 1e9 for k in threads if done.ran_ns[m, k] > 0)
    cpu = float(done.thread_cpu_ns[threads].sum()) / ran
    return {"ops_per_s": float(ops), "bytes_per_s": float(nbytes), "ran_s": ran / len(threads) / 1e9,
            "cpu_fraction": round(min(cpu, 1.0), 4)}


def summarize(catalog: Catalog, cplan: CalibrationPlan, windows: list, notes: dict, cpus: list[int]) -> dict:
    """Runner results (WindowDone per plan window) → the calibration document."""
    by_window = {w.window: w for w in windows}
    K = cplan.plan.K
    stressors = {}
    for m, t in cplan.one_thread.items():
        s = catalog.stressors[m]
        entry = {"class": s.resource_class, "kernel": s.kernel, "one_thread": _rates(by_window[t], m, [0]),
                 "all_threads": None}
        if m in cplan.all_threads:
            entry["all_threads"] = {**_rates(by_window[cplan.all_threads[m]], m, list(range(K))), "threads": K}
        if s.name in notes:
            entry["note"] = notes[s.name]
        stressors[s.name] = entry

    def peak(pred) -> float | None:
        vals = []
        for name, e in stressors.items():
            s = catalog.stressors[catalog.index(name)]
            if pred(s) and s.pace is None:
                best = e["all_threads"] or e["one_thread"]
                vals.append(max(best["bytes_per_s"], e["one_thread"]["bytes_per_s"]))
        return max(vals) if vals else None

    peaks = {
        "mem.bw_Bps": peak(lambda s: s.resource_class == "memory" and s.kernel in MEM_STREAM_KERNELS)
        or peak(lambda s: s.resource_class == "memory"),
        "cache.bw_Bps": peak(lambda s: s.resource_class == "cache"),
        "disk.read_Bps": peak(lambda s: s.kernel in DISK_READ_KERNELS),
        "disk.write_Bps": peak(lambda s: s.kernel in DISK_WRITE_KERNELS),
        "net.tx_Bps": peak(lambda s: s.resource_class == "network"),
    }
    # The stressors send only, but links are symmetric: the receive side's full scale is the
    # send side's. Without it a near-idle net.rx_Bps had no scale but its own noise.
    peaks["net.rx_Bps"] = peaks["net.tx_Bps"]
    return {
        "format": FORMAT, "schema_version": SCHEMA_VERSION,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "catalog_hash": catalog.hash, "window_s": cplan.plan.window_s, "cpus": list(cpus),
        "host": {"kernel": platform.release(), "machine": platform.machine(), "cpu_count": os.cpu_count()},
        "stressors": stressors,
        "peaks": {k: v for k, v in peaks.items() if v is not None},
        "notes": dict(notes),
    }


async def _run_pass(catalog: Catalog, config, names: list[str], window_s: float, all_threads: bool,
                    progress, unavailable: dict[str, str], build=None):
    """One calibration plan over `names` (build_plan's, or `build(names)`'s); a variant the runner
    refuses is moved to `unavailable` and the plan rebuilt without it. Returns (plan, windows, notes)."""
    from mimesys.errors import RunnerError
    from .runner import RunnerExit, WindowDone, start_runner

    names = list(names)
    while True:
        if not names:
            return None, [], {}
        cplan = build(names) if build else \
            build_plan(catalog, len(config.cpus), window_s, all_threads=all_threads, only=names)
        try:
            handle = await start_runner(cplan.plan, config, catalog=catalog)
            break
        except RunnerError as e:
            # A variant this host cannot run (no AVX2, no punch-hole support under the scratch
            # directory, ...) is recorded as unavailable; the rest is still measured.
            culprit = next((n for n in names if f" {n}: " in f" {e}"), None)
            if culprit is None:
                raise
            unavailable[culprit] = str(e).split(f"{culprit}: ", 1)[1]
            names.remove(culprit)
    windows = []
    try:
        async for ev in handle.events():
            if isinstance(ev, WindowDone):
                windows.append(ev)
                if progress:
                    progress(ev)
            elif isinstance(ev, RunnerExit) and not ev.ok:
                raise RunnerError(f"calibration run failed: {ev.status} {ev.detail}")
    finally:
        if handle.exit is None:
            await handle.stop()
    return cplan, windows, handle.notes


def pace_rates(catalog: Catalog, doc: dict) -> dict[str, float]:
    """Per-thread bytes/s of every paced variant whose base this calibration measured:
    the variant's fraction of the base's one-thread rate (what the runner is told to hold)."""
    out = {}
    for m in catalog.paced():
        s = catalog.stressors[m]
        one = ((doc.get("stressors") or {}).get(s.pace["base"]) or {}).get("one_thread") or {}
        rate = one.get("bytes_per_s")
        if isinstance(rate, (int, float)) and rate > 0:
            out[s.name] = float(s.pace["fraction"] * rate)
    return out


async def measure(config=None, *, window_s: float = 0.5, all_threads: bool = True,
                  only: list[str] | None = None, catalog: Catalog | None = None, progress=None,
                  probe_seconds: float = 0.0, reach_repeats: int = 3, segments: bool = True,
                  segment_pairs: int = SEGMENT_PAIRS, solo=None) -> dict:
    """Run every stressor (or `only` these) on this host; return the calibration document.
    `progress(done_windows, total_windows)` is called as windows complete. probe_seconds > 0:
    also measure the host's own peaks (probe_host_peaks, that long per probe shape, before the
    stressors and after each reach run; the highest kept as the capacity) and the reach: the
    catalog's two best variants for each reach metric run REACH_DRAWS times, then the probes,
    `reach_repeats` times over, and reach is the median over these pairs of (catalog best /
    probe peak) (`reach_runs`, `reach_pairs` in the file).

    Paced variants run in a second pass, one thread each, at the rate resolved from the
    first pass (their base must be measured in it, or already in `config.pace_Bps`): what
    they record is what they achieved, not the fraction assumed. With `segments`, the disk
    stressors then run short and long segments (module docstring; `segment_pairs` pairs each).
    `solo`: what measures each stressor alone (solo_pass's signature; default solo_pass: this
    runner's own plan; agentd/profile_recorder.ProfilePass: the host's solo profile, read once for
    both the calibration and the profile)."""
    from mimesys.hostpaths import online_cpus
    from .runner import RunnerConfig

    catalog = catalog or load_catalog()
    config = config or RunnerConfig()
    cpus = list(config.cpus or online_cpus())
    config = replace(config, cpus=tuple(cpus))
    names = list(only or catalog.names)
    paced = [n for n in names if catalog.stressors[catalog.index(n)].pace is not None]
    plain = [n for n in names if n not in paced]
    n_bw = sum(1 for n in plain if catalog.stressors[catalog.index(n)].resource_class in BANDWIDTH_CLASSES)
    seg_names = [n for n in names if catalog.stressors[catalog.index(n)].resource_class in SEGMENT_CLASSES] \
        if segments else []
    tick = _Ticks(len(plain) + (n_bw if all_threads and len(cpus) > 1 else 0) + len(paced) +
                  len(seg_names) * (1 + 2 * (segment_pairs + 1)), progress)

    unavailable: dict[str, str] = {}
    # the host's peaks are probed before and after the stressors and the higher figure kept:
    # on a shared host one burst of someone else's work must not pass for the host's capacity
    probes = [await probe_host_peaks(config, seconds=probe_seconds)] if probe_seconds else []
    solo = solo or solo_pass
    doc = await solo(catalog, config, plain, paced, window_s, all_threads, tick, unavailable, cpus)
    seg_names = [n for n in seg_names if n not in unavailable]
    if seg_names:
        await _segment_pass(catalog, config, doc, seg_names, tick, unavailable, cpus, segment_pairs)
    for name, reason in unavailable.items():
        s = catalog.stressors[catalog.index(name)]
        doc["stressors"][name] = {"class": s.resource_class, "kernel": s.kernel, "unavailable": reason,
                                  "one_thread": None, "all_threads": None}
    if probe_seconds:
        await _reach_and_peaks(catalog, config, doc, probes, window_s, all_threads, len(cpus), tick,
                               probe_seconds, reach_repeats)
    return doc


async def solo_pass(catalog: Catalog, config, plain: list[str], paced: list[str], window_s: float,
                    all_threads: bool, tick, unavailable: dict[str, str], cpus: list[int]) -> dict:
    """Each plain stressor alone for one window (one thread; every thread for the bandwidth
    classes), then the paced variants at their bases' rates: the calibration document."""
    from mimesys.errors import RunnerError

    cplan, windows, notes = await _run_pass(catalog, config, plain, window_s, all_threads, tick, unavailable)
    if cplan is None and not paced:
        raise RunnerError(f"no stressor can run on this host: {unavailable}")
    doc = summarize(catalog, cplan, windows, notes, cpus) if cplan else summarize_empty(catalog, cpus, window_s)
    if paced:
        await _paced_pass(catalog, config, doc, paced, window_s, tick, unavailable, cpus)
    return doc


class _Ticks:
    """measure's progress: windows done out of those expected (a count the reach runs add to)."""

    def __init__(self, total: int, progress):
        self.total, self.done, self.progress = total, 0, progress

    def __call__(self, _ev) -> None:
        self.done += 1
        if self.progress:
            self.progress(self.done, self.total)


async def _paced_pass(catalog: Catalog, config, doc: dict, paced: list[str], window_s: float, tick: _Ticks,
                      unavailable: dict[str, str], cpus: list[int]) -> None:
    """The paced variants, one thread each, at the rate of their base as the first pass measured
    it (or config.pace_Bps): their entries into doc. One whose base was not calibrated is
    unavailable."""
    rates = {**(config.pace_Bps or {}), **pace_rates(catalog, doc)}
    for n in list(paced):
        if n not in rates:
            base = catalog.stressors[catalog.index(n)].pace["base"]
            unavailable[n] = f"its base {base} was not calibrated on this host (calibrate it with --only {base})"
            paced.remove(n)
    pplan, pwins, pnotes = await _run_pass(catalog, replace(config, pace_Bps=rates), paced, window_s, False,
                                           tick, unavailable)
    if pplan is not None:
        pdoc = summarize(catalog, pplan, pwins, pnotes, cpus)
        for n, e in pdoc["stressors"].items():
            doc["stressors"][n] = {**e, "pace_Bps": rates[n]}
        doc["notes"].update(pdoc["notes"])


async def _segment_pass(catalog: Catalog, config, doc: dict, seg_names: list[str], tick: _Ticks,
                        unavailable: dict[str, str], cpus: list[int], pairs: int = SEGMENT_PAIRS) -> None:
    """The disk stressors in short and long segments: each one's "segment" entry in doc."""
    rates = {**(config.pace_Bps or {}), **pace_rates(catalog, doc)}
    splan, swins, _ = await _run_pass(catalog, replace(config, pace_Bps=rates), seg_names, SEGMENT_WINDOW_S,
                                      False, tick, unavailable,
                                      build=lambda ns: build_segment_plan(catalog, len(cpus), ns, pairs))
    if splan is not None:
        for n, seg in summarize_segments(catalog, splan, swins).items():
            doc["stressors"][n]["segment"] = seg


async def _reach_and_peaks(catalog: Catalog, config, doc: dict, probes: list, window_s: float, all_threads: bool,
                           n_cpus: int, tick: _Ticks, probe_seconds: float, reach_repeats: int) -> None:
    """The reach runs, each followed by a probe of the host's peaks (of the shapes the first
    probe confirmed); then into doc the highest peaks of all probes (`probes`: those before the
    stressors so far), the reach, and the pairs it is the median over."""
    best_names = reach_candidates(catalog, doc)
    multi = all_threads and n_cpus > 1
    tick.total += REACH_DRAWS * reach_repeats * sum(1 + (multi and catalog.stressors[catalog.index(n)].resource_class
                                                         in BANDWIDTH_CLASSES) for n in best_names)
    doc["reach_runs"], paired = {}, []
    screened = probes[0].shapes if probes else None
    for _ in range(reach_repeats if best_names else 0):
        draws = []
        for _ in range(REACH_DRAWS):
            run = await _reach_run(catalog, config, best_names, window_s, all_threads, tick)
            if run is None:
                break
            draws += list(run.items())
        if not draws:
            break
        probes.append(await probe_host_peaks(config, seconds=probe_seconds, shapes=screened))
        for name, entry in draws:
            doc["reach_runs"].setdefault(name, []).append(entry)
        paired.append((draws, probes[-1].peaks))
    if not paired:
        probes.append(await probe_host_peaks(config, seconds=probe_seconds))
    peaks, method = {}, {}
    for got, how, _ in probes:
        for metric, text in how.items():
            if metric in got and got[metric] > peaks.get(metric, 0):
                peaks[metric], method[metric] = got[metric], text
            method.setdefault(metric, text)
    doc["host_peaks"], doc["host_peaks_method"] = peaks, method
    doc["reach"], doc["catalog_best"] = reach(catalog, doc, peaks)
    if paired:
        doc["reach_pairs"] = reach_pairs(catalog, paired)
        # the pairs' precision: a coarser median could fall outside the pairs it summarizes
        doc["reach"].update({m: round(float(np.median(r)), 4) for m, r in doc["reach_pairs"].items()})


def summarize_empty(catalog: Catalog, cpus: list[int], window_s: float) -> dict:
    return {"format": FORMAT, "schema_version": SCHEMA_VERSION,
            "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "catalog_hash": catalog.hash, "window_s": window_s, "cpus": list(cpus),
            "host": {"kernel": platform.release(), "machine": platform.machine(), "cpu_count": os.cpu_count()},
            "stressors": {}, "peaks": {}, "notes": {}}


# What each host peak is compared with: the catalog's best figure of the same quantity,
# from the kernels whose counted unit is that quantity (one op = one device IO for the IOPS).
REACH_SOURCES = {
    "disk.read_Bps": ("bytes_per_s", DISK_READ_KERNELS),
    "disk.write_Bps": ("bytes_per_s", DISK_WRITE_KERNELS),
    "disk.read_iops": ("ops_per_s", ("disk_seq_read", "disk_rand_read", "disk_qd_read")),
    "disk.write_iops": ("ops_per_s", ("disk_qd_write",)),
    "net.lo_Bps": ("bytes_per_s", ("tcp_loopback", "udp_sink")),
    "mem.bw_Bps": ("bytes_per_s", MEM_STREAM_KERNELS),
}


class HostProbe(NamedTuple):
    """One `mimesys-runner --probe all`: {metric: peak}, {metric: how it was measured, or why
    not}, {metric: the shapes it ran again, as --probe-shapes takes them}."""
    peaks: dict
    detail: dict
    shapes: dict


async def probe_host_peaks(config=None, *, seconds: float = 1.0, shapes: dict | None = None) -> HostProbe:
    """Each resource's peak by `mimesys-runner --probe all` (code that is not a catalog kernel).
    `shapes` ({metric: "I,J,..."}, an earlier probe's HostProbe.shapes): run just those shapes of
    those metrics, without screening them all again."""
    import asyncio

    from mimesys.errors import RunnerError
    from .runner import DEFAULT_SCRATCH_DIR, RunnerConfig, find_runner

    config = config or RunnerConfig()
    runner = Path(config.binary) if config.binary else find_runner()
    args = [str(runner), "--probe", "all", "--probe-seconds", f"{seconds:g}",
            "--scratch-dir", str(config.scratch_dir or DEFAULT_SCRATCH_DIR),
            "--scratch-budget", str(int(config.scratch_budget_bytes))]
    if shapes:
        args += ["--probe-shapes", ";".join(f"{m}={ids}" for m, ids in sorted(shapes.items()))]
    proc = await asyncio.create_subprocess_exec(*args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    # ~30 shapes of `seconds` each, but a shape ends only when its IOs in flight come back: on a
    # throttled device (60 MB/s, 128 MiB in flight) each overran by seconds and 60 + 10 s was
    # not enough (bench/bursts_real.py's host B). A bound that stops a wedged probe, not a pace.
    limit = 300 + 60 * seconds
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout=limit)
    except asyncio.TimeoutError:
        proc.kill()
        await proc.wait()
        raise RunnerError(f"{runner} --probe all did not finish within {limit:.0f} s (a very slow or throttled "
                          f"scratch device? `--probe-seconds` shortens every shape)") from None
    if proc.returncode != 0:
        raise RunnerError(f"{runner} --probe all failed (exit {proc.returncode}): {err.decode(errors='replace').strip()}")
    peaks, detail, ran = {}, {}, {}
    for line in out.decode().splitlines():
        parts = line.split(" ", 3)
        if len(parts) == 3 and parts[0] == "shapes":
            ran[parts[1]] = parts[2]
        if len(parts) < 3 or parts[0] != "peak":
            continue
        value = float(parts[2])
        detail[parts[1]] = parts[3] if len(parts) > 3 else ""
        if np.isfinite(value) and value > 0:
            peaks[parts[1]] = value
    return HostProbe(peaks, detail, ran)


REACH_DRAWS = 2   # runs of the catalog's candidates per reach pair (the probe keeps its best of 2 or more)


def reach_candidates(catalog: Catalog, doc: dict, per_metric: int = 2) -> list[str]:
    """The catalog's `per_metric` best plain variants for each reach metric in `doc`'s main pass:
    the ones run again (a close second may be the better one on a quieter second)."""
    ranked = _ranked_per_metric(catalog, list(doc["stressors"].items()))
    return sorted({r["stressor"] for runs in ranked.values() for r in runs[:per_metric]})


async def _reach_run(catalog: Catalog, config, names: list[str], window_s: float, all_threads: bool,
                     tick) -> dict[str, dict] | None:
    """{stressor: calibration entry}: one more run of `names` (reach_candidates); None when
    none of them can run."""
    cplan, windows, notes = await _run_pass(catalog, config, names, window_s, all_threads, tick, {})
    if cplan is None:
        return None
    return {name: {k: e[k] for k in ("one_thread", "all_threads")}
            for name, e in summarize(catalog, cplan, windows, notes, list(config.cpus))["stressors"].items()}


def reach(catalog: Catalog, doc: dict, host_peaks: dict) -> tuple[dict, dict]:
    """({metric: best the catalog achieves / host peak}, {metric: {value, stressor, threads}}),
    over the main pass and the repeated runs of the best variants (`reach_runs`). (measure()
    then replaces the ratio by the median of the paired runs where it has them.)"""
    entries = list(doc["stressors"].items())
    entries += [(name, e) for name, runs in (doc.get("reach_runs") or {}).items() for e in runs]
    best = {m: runs[0] for m, runs in _ranked_per_metric(catalog, entries).items()}
    out = {m: round(best[m]["value"] / host_peaks[m], 4) for m in host_peaks if m in best}
    return out, best


def _ranked_per_metric(catalog: Catalog, entries: list[tuple[str, dict]]) -> dict[str, list[dict]]:
    """{reach metric: [{value, stressor, threads}, ...] best first}: each plain (not paced)
    variant's best figure (one thread or all threads) over `entries`, if it reached anything."""
    best: dict[str, dict[str, dict]] = {}
    for name, e in entries:
        s = catalog.stressors[catalog.index(name)]
        if s.pace is not None:
            continue
        for metric, (field_, kernels) in REACH_SOURCES.items():
            if s.kernel not in kernels:
                continue
            for where in ("one_thread", "all_threads"):
                r = e.get(where)
                if r and r.get(field_, 0) > best.get(metric, {}).get(name, {}).get("value", 0):
                    best.setdefault(metric, {})[name] = {"value": float(r[field_]), "stressor": name,
                                                         "threads": r.get("threads", 1)}
    return {m: sorted(per.values(), key=lambda b: -b["value"]) for m, per in best.items()}


def reach_pairs(catalog: Catalog, paired: list[tuple[list, dict]]) -> dict[str, list[float]]:
    """{metric: [catalog best in pair i / probe peak right after it, ...]} over the pairs
    ([(stressor, calibration entry)] of one pair's REACH_DRAWS runs, probe peaks measured right
    after them)."""
    out: dict[str, list[float]] = {}
    for entries, peaks in paired:
        for metric, runs in _ranked_per_metric(catalog, list(entries)).items():
            if peaks.get(metric):
                out.setdefault(metric, []).append(round(runs[0]["value"] / peaks[metric], 4))
    return out
