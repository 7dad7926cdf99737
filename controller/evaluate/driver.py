"""The evaluation driver: for each target trace and each method, generate a plan, replay it on
an agent, record what the host did, and score it against the target with normalized DTW.

    results = await evaluate(targets, methods, client, EvalOptions(outdir=Path("eval")))

`targets`: name -> Trace. A target whose layout differs from the agent's schema (an
imported trace from another machine) is first mapped onto the agent's host with
controller.mapping (core count, capacity, schema), and the mapping report is kept.
`methods`: name -> any object with `generate(trace, *, seed) -> Plan` (the Generator
protocol of mimesys/planners/base.py: whatever the planner registry built). A method that fails on one target is recorded with its error and
the evaluation moves on. Outputs under `outdir`: results.json, results.csv, summary.csv,
plans/<trace>__<method>.h5, executed/<trace>__<method>.h5 and <trace>.png overlays.
Every method is also scored on burst structure (mimesys/bursts.py: burst and idle durations and
burst consumption per resource, target vs executed; bursts.csv and a table in the overlay),
the same way for every method.

The controller often runs on the host it measures (the demo, a bench with a local agent), and its
own memory is then in every replay's `mem.used_B`. So nothing it would keep grows while replays
are still to come: the overlays (matplotlib and its figures, 100+ MiB that Python does not give
back) are drawn after the last replay, and the heap a plan's generation freed is returned to the
system before each replay (glibc's malloc_trim), leaving the controller at its import-time size.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import functools
import gc
import math
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from tqdm import tqdm

from mimesys import bursts
from mimesys.backend import RunOptions
from mimesys.errors import MimesysError
from mimesys.metrics import is_duplicated_breakdown
from mimesys.trace import Trace

from ..importers.base import ImportReport
from ..mapping import HostProfile, MappingOptions, map_trace
from .added_activity import added_activity, split_by_plan
from .own_scale import (attribute_to_plan, idle_window_additions, memory_added_by_plan, memory_range_score,
                        own_scale, own_scale_scores, resource_mean)
from .dtw import DEFAULT_BAND, compare
from .report import EvaluationResults, burst_table, load_level, overlay_png

# What the MIMESYS paper scores (§7.2): CPU (mean over cores), memory bandwidth, LLC traffic,
# disk IO (`--metric paper`). The default scores every metric the target carries and the host
# measures: a score that skips what a plan gets wrong is not a fidelity measure.
PAPER_METRICS = ("cpu.util", "mem.bw_Bps", "llc.miss_per_s", "llc.ref_per_s", "disk.read_Bps", "disk.write_Bps")
PRESETS = {"paper": PAPER_METRICS}


@dataclass(frozen=True)
class EvalOptions:
    outdir: Path
    band: int = DEFAULT_BAND
    seed: int = 0
    warmup_windows: int = 1
    metrics: tuple[str, ...] | None = None     # None = every metric the target has; or names / "paper"
    core_strategy: str = "preserve-total"
    source_peaks: dict = field(default_factory=dict)
    load_levels: dict = field(default_factory=dict)   # target name -> level, overriding the measured one
    plots: bool = True
    progress: bool = True
    scale: str = "own"      # each metric's full scale: "own" (the target's own peak) or "device" (the host's)


SCALES = ("own", "device")
NORMALIZATION = {
    "own": "per metric: x / full scale (1 for fractions, else the target's own peak, floored by the host's idle "
           "noise for disk and network traffic: traffic where the target had none counts in full), clipped to "
           "[0,1]; DTW (dtaidistance, Sakoe-Chiba band) divided by sqrt(path length)",
    "device": "per metric: x / full scale (1 for fractions, else the host's calibrated peak, else max over target "
              "and executed), clipped to [0,1]; DTW (dtaidistance, Sakoe-Chiba band) divided by sqrt(path length)"}


def score_peaks(target: Trace, metrics: list[str], host_peaks: dict, scale: str) -> dict:
    """metric -> the full scale `compare` divides by: the host's calibrated peaks ("device") or
    the target's own peak ("own", evaluate/own_scale.py: how a person reads the overlay)."""
    if scale == "device":
        return host_peaks
    if scale != "own":
        raise ValueError(f"scale {scale!r}: expected one of {', '.join(SCALES)}")
    units = {m.name: m.unit for m in target.metrics}
    return {name: own_scale(name, units.get(name, ""), target.column(name).astype(np.float64))
            for name in metrics if name in target.names}


def safe_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)[:80]


def fit_to_host(name: str, trace: Trace, host: HostProfile, options: EvalOptions) -> tuple[Trace, ImportReport | None]:
    """The target as the agent's host can replay it: unchanged when it already has the agent's
    schema, else mapped (controller/mapping.py)."""
    if host.schema is not None and trace.names == [m.name for m in host.schema]:
        return trace, None
    report = ImportReport(source_format="trace", source_path=name)
    mapped = map_trace(trace, host, MappingOptions(options.core_strategy, dict(options.source_peaks)), report)
    return mapped, report


def scored_metrics(target: Trace, options: EvalOptions) -> list[str]:
    """The metrics scored for a target: those asked for (names, or a preset such as "paper"), or
    by default every metric the target measured in ≥ 2 windows, less per-device breakdowns of a
    host-wide total that is also scored; metrics the executing host cannot measure are kept
    (they score NaN with the reason)."""
    if options.metrics:
        wanted = [m for name in options.metrics for m in PRESETS.get(name, (name,))]
    else:
        names = target.names
        wanted = [m.name for m in target.metrics if m.available and not is_duplicated_breakdown(m.name, names)]
    return [m for m in dict.fromkeys(wanted) if m in target.names and np.isfinite(target.column(m)).sum() >= 2]


async def evaluate(targets: dict[str, Trace], methods: dict, client, options: EvalOptions) -> EvaluationResults:
    info = await client.info()
    host = HostProfile.from_info(info, origin=getattr(client, "url", "agent"))
    results = EvaluationResults(meta={
        "agent": getattr(client, "url", ""), "backend": info.get("backend"), "simulated": bool(info.get("simulated")),
        "host_cpus": host.cpus, "band_windows": options.band, "seed": options.seed,
        "warmup_windows": options.warmup_windows, "peaks_used_for_scale": host.peaks,
        "scale": options.scale, "normalization": NORMALIZATION[options.scale],
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
    outdir = options.outdir
    pairs = [(t, m) for t in targets for m in methods]
    overlays = []    # drawn after the last replay (the module's docstring says why)
    bar = tqdm(total=len(pairs), desc="evaluate", unit="run", disable=not options.progress)
    for tname, raw_target in targets.items():
        target, mreport = fit_to_host(tname, raw_target, host, options)
        # the mix's load on its own host (before any core mapping squeezed it onto this one)
        level = options.load_levels.get(tname) or load_level(raw_target)
        metrics = scored_metrics(target, options)
        executed: dict[str, Trace] = {}
        for mname, gen in methods.items():
            key = f"{safe_name(tname)}__{safe_name(mname)}"
            entry = {"trace": tname, "method": mname, "load_level": level, "windows": target.T,
                     "mapping": mreport.to_dict() if mreport else None}
            t0 = time.monotonic()
            try:
                plan = await asyncio.to_thread(gen.generate, target, seed=options.seed)
                entry["generate_s"] = round(time.monotonic() - t0, 3)
                plan.write(outdir / "plans" / f"{key}.h5")
                release_heap()
                t1 = time.monotonic()
                res = await client.run_when_host_free(plan, RunOptions(
                    repetitions=1, warmup_windows=options.warmup_windows, record=False, seed=options.seed))
                entry["run_s"] = round(time.monotonic() - t1, 3)
                entry["run_id"] = res.run_id
                ex = res.trace
                ex.provenance = {**ex.provenance, "target": tname, "method": mname}
                ex.write(outdir / "executed" / f"{key}.h5")
                executed[mname] = ex
                scores = compare(target, ex, metrics, peaks=score_peaks(target, metrics, host.peaks, options.scale),
                                 band=options.band)
                results.add(tname, mname, level, scores)
                finite = [r.distance for r in scores.values() if math.isfinite(r.distance)]
                entry["mean_dtw"] = float(np.mean(finite)) if finite else None
                entry["added_activity"], entry["added_background"] = split_by_plan(
                    added_activity(target, ex, metrics, peaks=host.peaks), plan)
                own = own_scale_scores(target, ex, metrics, band=options.band)
                cpu, res = resource_mean(own)
                fin = [v for v in own.values() if math.isfinite(v)]
                entry["own_scale"] = {"mean": _finite(float(np.mean(fin)) if fin else math.nan),
                                      "per_core_cpu": _finite(cpu), "resource_mean": _finite(res),
                                      "per_metric": {k: _finite(v) for k, v in own.items()}}
                memory = memory_range_score(target, ex, band=options.band)
                if memory is not None:
                    entry["own_scale"]["memory"] = {**memory, "added_by_plan": memory_added_by_plan(target, plan)}
                entry["idle_windows_added"] = attribute_to_plan(idle_window_additions(target, ex), plan)
            except (MimesysError, OSError, ValueError) as e:
                entry["error"] = f"{type(e).__name__}: {e}"
            results.runs.append(entry)
            bar.update(1)
        table = score_bursts(results, tname, level, target, executed, host.peaks)
        for entry in results.runs:
            if entry["trace"] == tname and entry["method"] in executed:
                entry["burst_error"] = _finite(results.burst_errors.get((tname, entry["method"])))
        if options.plots and executed:
            overlays.append((tname, level, target, executed, metrics, table))
    bar.close()
    for tname, level, target, executed, metrics, table in overlays:
        overlay_png(outdir / f"{safe_name(tname)}.png", f"{tname} ({level} load): target vs executed",
                    target, executed, metrics or list(PAPER_METRICS), simulated=results.meta["simulated"],
                    table=table)
        overview(outdir, tname, level, target, executed, results.runs)
    results.meta["finished"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    results.write(outdir)
    return results


def release_heap() -> None:
    """Give the memory this process freed back to the system: a collection, then glibc's
    malloc_trim (absent elsewhere: nothing to do)."""
    gc.collect()
    libc = _libc()
    if libc is not None:
        libc.malloc_trim(0)


@functools.cache
def _libc():
    try:
        lib = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        lib.malloc_trim.argtypes = [ctypes.c_size_t]
        return lib
    except (OSError, AttributeError):
        return None


def overview(outdir: Path, tname: str, level: str, target: Trace, executed: dict, runs: list[dict]) -> Path:
    """<trace>.overview.png beside the strip: eight panels at most, each method's own-scale
    resource mean in its legend, the windows it added activity in shaded (mimesys/overview.py)."""
    from mimesys.overview import overview_png
    mine = [r for r in runs if r.get("trace") == tname and r.get("method") in executed]
    scores = {r["method"]: r["own_scale"]["resource_mean"] for r in mine
              if (r.get("own_scale") or {}).get("resource_mean") is not None}
    added = {r["method"]: {res: e.get("windows", []) for res, e in (r.get("idle_windows_added") or {}).items()}
             for r in mine}
    return overview_png(outdir / f"{safe_name(tname)}.overview.png", f"{tname} ({level} load): target vs executed",
                        target, executed, scores=scores, added=added, score_label="resource mean")


def _finite(v):
    return v if isinstance(v, float) and math.isfinite(v) else None


def score_bursts(results: EvaluationResults, tname: str, level: str, target: Trace, executed: dict[str, Trace],
                 peaks: dict) -> tuple[list[str], list[list[str]]] | None:
    """Burst statistics of the target and of each executed trace, thresholds from the host's
    peaks (else the max over target and executed, shared by all sides); recorded in `results`.
    Returns the overlay's table."""
    if not executed:
        return None
    fallback = bursts.comparison_peaks(target, list(executed.values()), peaks)
    names = bursts.resource_metrics(target)
    ref = bursts.trace_burst_stats(target, peaks=peaks, metrics=names, fallback_peaks=fallback)
    got = {}
    for mname, ex in executed.items():
        got[mname] = bursts.trace_burst_stats(ex, peaks=peaks, metrics=[n for n in names if n in ex.names],
                                              fallback_peaks=fallback)
        results.add_bursts(tname, mname, level, ref, got[mname], float(target.window_s))
    return burst_table(ref, got, {m: results.burst_errors[(tname, m)] for m in executed})


def rescore(targets: dict[str, Trace], outdir: Path, options: EvalOptions) -> EvaluationResults:
    """Score again what an earlier `evaluate` run left in `outdir` (executed/<trace>__<method>.h5)
    with other metrics or another band, without replaying anything. The host's peaks come from
    that run's results.json; its schema from the executed traces."""
    import json

    prev = json.loads((outdir / "results.json").read_text())
    meta = dict(prev.get("meta", {}))
    peaks = {k: float(v) for k, v in (meta.get("peaks_used_for_scale") or {}).items()}
    results = EvaluationResults(meta={**meta, "rescored": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                                      "band_windows": options.band, "scale": options.scale,
                                      "normalization": NORMALIZATION[options.scale]})
    results.runs = [r for r in prev.get("runs", []) if r.get("trace") in targets]
    for tname, raw in targets.items():
        prefix = f"{safe_name(tname)}__"
        files = sorted((outdir / "executed").glob(f"{prefix}*.h5"))
        executed = {f.stem[len(prefix):]: Trace.read(f) for f in files}
        if not executed:
            continue
        first = next(iter(executed.values()))
        cores = sum(m.name.startswith("cpu.util.core") for m in first.metrics)
        host = HostProfile(cores, peaks, tuple(first.metrics), first.host_fingerprint, "rescore", bool(first.simulated))
        target, _ = fit_to_host(tname, raw, host, options)
        level = options.load_levels.get(tname) or load_level(raw)
        metrics = scored_metrics(target, options)
        for mname, ex in executed.items():
            results.add(tname, mname, level, compare(target, ex, metrics, band=options.band,
                                                     peaks=score_peaks(target, metrics, peaks, options.scale)))
        table = score_bursts(results, tname, level, target, executed, peaks)
        for r in results.runs:
            if r.get("trace") == tname and r.get("method") in executed:
                r["load_level"] = level
                r["burst_error"] = _finite(results.burst_errors.get((tname, r["method"])))
        if options.plots:
            overlay_png(outdir / f"{safe_name(tname)}.png", f"{tname} ({level} load): target vs executed",
                        target, executed, metrics, simulated=bool(meta.get("simulated")), table=table)
            overview(outdir, tname, level, target, executed, results.runs)
    results.write(outdir)
    return results
