"""Calibration: what each stressor achieves on this host, measured by running it.

`measure()` builds one plan in which every stressor runs alone for one window on one
thread (the other threads idle), followed by windows in which each bandwidth-class
stressor (memory, disk, network) runs on all threads at once, executes it with the real
runner, and turns the runner's own op and byte counts into rates. The file it writes is
shown by the agent's /v1/info and used by importers for capacity normalisation (the
`peaks`).

File (JSON)::

    {"format": "mimesys.calibration", "schema_version": 1, "created": ISO-8601,
     "catalog_hash": ..., "window_s": ..., "cpus": [...], "host": {...},
     "stressors": {name: {"class": ..., "one_thread": {"ops_per_s", "bytes_per_s", "ran_s",
                          "cpu_fraction"}, "all_threads": {... , "threads"} | null,
                          "note": "...", "unavailable": "why (this host cannot run it)"}},
     "peaks": {"mem.bw_Bps", "cache.bw_Bps", "disk.read_Bps", "disk.write_Bps", "net.tx_Bps", "net.rx_Bps"},
     "notes": {name: text}}

`cpu_fraction` is worker CPU time / wall time while the stressor ran: ~1 for CPU work,
lower for IO that waits on the device. A peak is the highest bytes/s any stressor of that
kind reached (all-threads figure where measured).
"""

from __future__ import annotations

import json
import os
import platform
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from .catalog import Catalog, load_catalog
from .errors import ValidationError
from .plan import Plan

FORMAT = "mimesys.calibration"
SCHEMA_VERSION = 1
BANDWIDTH_CLASSES = ("memory", "disk", "network")
# Which kernels read or write the disk (peaks); fallocate moves metadata, not data.
DISK_READ_KERNELS = ("disk_seq_read", "disk_rand_read", "disk_readahead")
DISK_WRITE_KERNELS = ("disk_seq_write",)


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
            if pred(s):
                best = e["all_threads"] or e["one_thread"]
                vals.append(max(best["bytes_per_s"], e["one_thread"]["bytes_per_s"]))
        return max(vals) if vals else None

    peaks = {
        "mem.bw_Bps": peak(lambda s: s.resource_class == "memory" and s.kernel == "stream_triad")
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


async def measure(config=None, *, window_s: float = 0.5, all_threads: bool = True,
                  only: list[str] | None = None, catalog: Catalog | None = None, progress=None) -> dict:
    """Run every stressor (or `only` these) on this host; return the calibration document.
    `progress(done_windows, total_windows)` is called as windows complete."""
    from .hostpaths import online_cpus
    from .runner import RunnerExit, RunnerConfig, WindowDone, start_runner
    from .errors import RunnerError

    catalog = catalog or load_catalog()
    config = config or RunnerConfig()
    cpus = list(config.cpus or online_cpus())
    names = list(only or catalog.names)
    unavailable: dict[str, str] = {}
    while True:
        if not names:
            raise RunnerError(f"no stressor can run on this host: {unavailable}")
        cplan = build_plan(catalog, len(cpus), window_s, all_threads=all_threads, only=names)
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
                    progress(len(windows), cplan.plan.T)
            elif isinstance(ev, RunnerExit) and not ev.ok:
                raise RunnerError(f"calibration run failed: {ev.status} {ev.detail}")
    finally:
        if handle.exit is None:
            await handle.stop()
    doc = summarize(catalog, cplan, windows, handle.notes, cpus)
    for name, reason in unavailable.items():
        s = catalog.stressors[catalog.index(name)]
        doc["stressors"][name] = {"class": s.resource_class, "kernel": s.kernel, "unavailable": reason,
                                  "one_thread": None, "all_threads": None}
    return doc


def write(doc: dict, path: Path | str) -> None:
    """Atomic write (temporary file + rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, path)


def read(path: Path | str) -> dict:
    path = Path(path)
    try:
        doc = json.loads(path.read_text())
    except OSError as e:
        raise ValidationError(f"{path}: cannot read calibration: {e}") from e
    except ValueError as e:
        raise ValidationError(f"{path}: not JSON: {e}") from e
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ValidationError(f"{path}: not a mimesys calibration file (format={doc.get('format') if isinstance(doc, dict) else None!r})")
    version = doc.get("schema_version")
    if not isinstance(version, int) or not 1 <= version <= SCHEMA_VERSION:
        raise ValidationError(f"{path}: calibration schema_version {version!r} not supported (1..{SCHEMA_VERSION})")
    for key in ("stressors", "peaks"):
        if not isinstance(doc.get(key), dict):
            raise ValidationError(f"{path}: missing or malformed {key!r}")
    return doc
