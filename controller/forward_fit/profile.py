"""The solo profile fitted: the first-order forward model (mimesys/forward/firstorder.py) read off
the windows in which each stressor ran alone on one thread, on a second thread and on every
thread (the layout: mimesys/solo_profile.py; recorded by `mimesys-agent calibrate` beside its
calibration, or by `run_profile` here through an agent's API).

The step on thread 1 says where a stressor's kernel-side work lands: a device's completions
run on the CPUs its interrupt is routed to, whichever thread asked for the IO (on the
development VM every virtio-blk interrupt lands on CPU 1), while a partner thread follows the
thread that feeds it. Two positions separate the two (`split_landing`).

The idle level is the median over the M + 1 idle windows spread through the run, so a burst
of other work on a shared host (or the writeback of the previous block) moves it little.
The executed trace is kept as an ordinary trace file with the plan's layout in its
provenance, so a profile can be fitted again later (`mimesys forward fit --profile`).
"""

from __future__ import annotations

import numpy as np

from mimesys.errors import ValidationError
from mimesys.forward.cores import core_index
from mimesys.forward.firstorder import FirstOrder
from mimesys.solo_profile import LAYOUT_ONE_THREAD, hold_of, profile_plan, provenance, windows_of
from mimesys.trace import Trace

COMPUTE_CLASSES = ("cpu", "cache", "memory")
PROFILE_SHARE_CLASSES = ("disk",)   # own-core share from the profile, not the runner (fit_first_order)


def split_landing(L0: np.ndarray, L1: np.ndarray, own: np.ndarray, c0: int, c1: int) -> tuple[np.ndarray, np.ndarray]:
    """Where a stressor's CPU beyond its thread lands, from its solo runs on two threads.

    L0, L1 [M, C]: busy fraction over idle on each core with m alone on thread 0 (core c0) and
    on thread 1 (core c1); own [M]: the thread's own share. Each core j gets a part fixed[m, j]
    from m on any thread (a device's interrupt CPUs) and each core other than the thread's a
    part other[m] that follows the thread (a partner, a sink):

        L0[c0] = own ∪ fixed[c0]      L1[c1] = own ∪ fixed[c1]      (∪: 1 − (1 − x)(1 − y))
        L0[c1] = fixed[c1] + other    L1[c0] = fixed[c0] + other    L0[j] = L1[j] = fixed[j] + other

    A thread that keeps its core busy hides what else lands there (own ∪ x ≈ 1 for any x), so
    for own > 0.5 the split comes from the two cross readings alone: what both show follows
    the thread (other = the smaller), the excess of one over the other is fixed.

    Returns (other [M], fixed [M, C]), clipped at 0 (a shared host's noise can make either side
    of a difference the larger)."""
    M, C = L0.shape
    fixed = np.zeros((M, C))
    rest = np.clip(1.0 - own, 1e-3, None)
    seen = own <= 0.5                                   # the own core's reading shows the rest
    fixed[:, c0] = np.where(seen, np.clip((L0[:, c0] - own) / rest, 0.0, 1.0), 0.0)
    fixed[:, c1] = np.where(seen, np.clip((L1[:, c1] - own) / rest, 0.0, 1.0), 0.0)
    other = np.clip(((L0[:, c1] - fixed[:, c1]) + (L1[:, c0] - fixed[:, c0])) / 2, 0.0, 1.0)
    cross = np.minimum(L0[:, c1], L1[:, c0])
    other = np.where(seen, other, np.clip(cross, 0.0, 1.0))
    fixed[:, c1] = np.where(seen, fixed[:, c1], np.clip(L0[:, c1] - cross, 0.0, 1.0))
    fixed[:, c0] = np.where(seen, fixed[:, c0], np.clip(L1[:, c0] - cross, 0.0, 1.0))
    for j in range(C):
        if j not in (c0, c1):
            fixed[:, j] = np.clip((L0[:, j] + L1[:, j]) / 2 - other, 0.0, 1.0)
    return other, fixed


def fit_first_order(trace: Trace, catalog_names: list[str], thread_cores: list[int], *,
                    host_peaks: dict | None = None, metric_names: list[str] | None = None,
                    classes: list[str] | None = None, cpu_fraction: dict | None = None,
                    footprint: list[float] | None = None, segment_dead_s: dict | None = None) -> FirstOrder:
    """An executed profile trace (rows as `profile_plan`) -> the first-order parameters on
    `metric_names` (default: every metric the trace measured). segment_dead_s: per stressor name,
    the seconds each segment moves nothing (the agent's calibration; FirstOrder.dead)."""
    M = len(catalog_names)
    rows = windows_of(M, (trace.provenance or {}).get("layout") or LAYOUT_ONE_THREAD, hold_of(trace.provenance))
    if trace.T < rows["all"][-1] + 1:
        raise ValidationError(f"profile trace has {trace.T} windows; a {M}-stressor profile has "
                              f"{rows['all'][-1] + 1}")
    names = metric_names or [m.name for m in trace.metrics if m.available and np.isfinite(trace.column(m.name)).any()]
    units = {m.name: m.unit for m in trace.metrics}
    v = trace.select(names).astype(np.float64)                       # [T, N]
    idle = np.nanmedian(v[rows["idle"]], axis=0)
    idle = np.nan_to_num(idle, nan=0.0)
    noise = np.clip(np.nan_to_num(np.nanpercentile(v[rows["idle"]], 90, axis=0), nan=0.0) - idle, 0.0, None)
    solo = np.nan_to_num(v[rows["solo"]], nan=0.0)                   # [M, N]
    solo1 = np.nan_to_num(v[rows["solo1"]], nan=0.0) if rows["solo1"] and len(thread_cores) >= 2 else None
    full = np.nan_to_num(v[rows["all"]], nan=0.0)
    # host-wide metrics: one thread of m wherever it runs (two readings where there are two)
    response = np.clip((solo if solo1 is None else (solo + solo1) / 2) - idle, 0.0, None)
    cores = [(n, core_index(name)) for n, name in enumerate(names) if core_index(name) is not None]
    own_core = thread_cores[0]
    own = np.zeros(M)
    others = []
    for n, j in cores:
        if j == own_core:
            own = np.clip(solo[:, n] - idle[n], 0.0, 1.0)
        else:
            others.append(np.clip(solo[:, n] - idle[n], 0.0, 1.0))
    other = np.mean(others, axis=0) if others else np.zeros(M)
    # On a host shared with other work, a core's reading moves with everything else that runs, so
    # a thread's own busy share comes from the runner's own accounting where the agent has it
    # (calibration: the worker thread's CPU time / the time it ran); and a compute kernel (cpu,
    # cache, memory classes: one pinned thread that never blocks) puts nothing on other cores.
    # Not for disk stressors: a thread that sleeps on every IO is charged more CPU time than its
    # core's reading showed (the synchronous 4 KiB reader: 0.30-0.43 by the runner in three
    # calibrations, 0.27 on its core in the profile, ~0.24 in replayed mixes), and the core's
    # reading is what a target is measured in (bench/results/fidelity/main-2026-11-26). Those
    # readings were the tick-sampled busy fields, which miss short bursts between waits; the cpu
    # sampler now counts wall time less idle (agentd/samplers/cpu.py), closer to the runner's.
    cpu_fraction = cpu_fraction or {}
    for m, name in enumerate(catalog_names):
        f = cpu_fraction.get(name)
        cls = (classes or [None] * M)[m]
        if isinstance(f, (int, float)) and 0 < f <= 1 and cls not in PROFILE_SHARE_CLASSES:
            own[m] = float(f)
        if cls in COMPUTE_CLASSES:
            other[m] = 0.0
            if not isinstance(f, (int, float)):
                own[m] = 1.0
    fixed = None
    core_of = {j: n for n, j in cores}
    if solo1 is not None and thread_cores[0] in core_of and thread_cores[1] in core_of:
        ids = sorted(core_of)
        cols = [core_of[j] for j in ids]
        L0 = np.clip(solo[:, cols] - idle[cols], 0.0, 1.0)
        L1 = np.clip(solo1[:, cols] - idle[cols], 0.0, 1.0)
        other, f = split_landing(L0, L1, own, ids.index(thread_cores[0]), ids.index(thread_cores[1]))
        fixed = np.zeros((M, len(names)))
        fixed[:, cols] = f
        compute = np.array([c in COMPUTE_CLASSES for c in (classes or [None] * M)])
        other[compute], fixed[compute] = 0.0, 0.0
    capacity = np.maximum.reduce([idle, solo.max(axis=0), full.max(axis=0)] + ([solo1.max(axis=0)] if solo1 is not None else []))
    for n, name in enumerate(names):
        peak = (host_peaks or {}).get(name)
        if isinstance(peak, (int, float)) and peak > 0:
            capacity[n] = max(capacity[n], float(peak))
    unit_list = [units.get(n, "") for n in names]
    capacity = np.where(np.array(unit_list) == "fraction", 1.0, capacity)
    return FirstOrder(names, unit_list, list(catalog_names), list(thread_cores), idle, response, own, other, capacity,
                      classes=list(classes) if classes else None,
                      footprint=np.asarray(footprint, np.float64) if footprint is not None else None, noise=noise,
                      fixed=fixed, dead=segment_dead(catalog_names, segment_dead_s, float(trace.window_s)))


def segment_dead(names: list[str], seconds: dict | None, window_s: float) -> np.ndarray | None:
    """[M] each stressor's dead time as a share of the window (None: none measured)."""
    if not seconds:
        return None
    return np.array([min(float(seconds.get(n) or 0.0) / window_s, 1.0) for n in names])


BUSY_IDLE = 0.25   # a core busier than this with nothing of ours running: the host was not idle


def busy_host_warnings(first: FirstOrder) -> list[str]:
    """What the profile's idle windows say about other work on the host. The first order is
    idle + what each stressor adds; a profile taken while something else kept the cores busy
    has an idle level near 1 and responses near 0, and every plan made from it under-drives
    CPU. Said, not refused: on a host that is always this busy it is the truth."""
    busy = [(name, float(first.idle[n])) for n, name in enumerate(first.metric_names)
            if core_index(name) is not None and first.idle[n] > BUSY_IDLE]
    if not busy:
        return []
    cores = ", ".join(f"{name} {v:.2f}" for name, v in busy)
    return [f"the solo profile's idle windows show busy cores ({cores}): other work was running while it was "
            f"recorded, so CPU responses are underestimated; record it again on a quiet host "
            f"(`mimesys forward profile`) and refit"]


def metric_scales(first: FirstOrder) -> np.ndarray:
    """Full scale per metric: 1 for fractions, else the host's capacity on it."""
    s = np.where(first.fraction, 1.0, first.capacity)
    fallback = first.idle + first.response.max(axis=0) * first.K
    s = np.where(np.isfinite(s) & (s > 0), s, fallback)
    return np.where(s > 0, s, 1.0)


async def run_profile(client, out_path, *, progress=None, hold: int | None = None) -> Trace:
    """Run the solo profile on an agent (controller/fleet.AgentClient) and write its trace
    (`hold`: windows per step, mimesys/solo_profile.py's default when None)."""
    from mimesys.backend import RunOptions
    from mimesys.solo_profile import HOLD

    info = await client.info()
    catalog = info.get("catalog") or {}
    entries = list(catalog.get("stressors", []))
    names = [s["name"] for s in entries]
    if not names:
        raise ValidationError(f"agent {getattr(client, 'url', '')}: /v1/info has no catalog")
    fp = info.get("fingerprint") or {}
    threads = int(info.get("max_threads") or len(fp.get("agent_cpus") or []) or 1)
    cores = [int(c) for c in (fp.get("agent_cpus") or range(threads))][:threads]
    plan = profile_plan(names, catalog["hash"], threads, hold=hold or HOLD)
    # Another process's plan on this host (a replay, a second agent) is waited for, not an error.
    res = await client.run_when_host_free(plan, RunOptions(repetitions=1, warmup_windows=1, record=False, seed=0),
                                          on_window=(lambda w: progress(w.window + 1, plan.T)) if progress else None)
    trace = res.trace
    trace.provenance = provenance(entries, catalog["hash"], cores, info.get("calibration") or {},
                                  layout=plan.provenance["layout"], hold=plan.provenance["hold"],
                                  recorded_by=getattr(client, "url", ""))
    trace.write(out_path)
    return trace
