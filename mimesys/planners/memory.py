"""Memory held: the resident footprint a plan keeps in each window, planned from its target.

A colocated service feels the memory an application holds before anything else (page cache
evicted, reclaim, pressure stalls), so a plan carries it beside its compositions
(`Plan.mem_held_B`, held by the runner: runner.c, "Memory held"). Every planner's plan gets it
the same way, behind the registry's guard (registry.guarded): it is a level to follow, not a
composition to search for.

    excess_t = target's mem.used_B in window t − the host's idle level
    held_t   = excess_t − the plan's stressor buffers in window t   where excess_t is above the idle noise
               0                                                    elsewhere (no memory the target did not hold)

A stressor's own buffers count against what the plan holds: a working set for the whole run
from setup, a thread's IO buffers and churned region in the windows that thread runs it
(runner.c releases them in the others: window_residency). Leaving out a stressor whose
buffers outweigh what the target held is not done here: measured, a knn plan interpolating 40
stressors held 5 GiB of buffers next to a target holding at most 0.8 GiB, but dropping
stressors after a planner chose them took the CPU work the inverse planner's solve had put on
them (its simulated-host test fell from 0.56x single's error to beyond it); the planner that
chooses must weigh the buffers itself (the inverse planner's `allowed` does).

What a plan holds is capped at the memory an agent of the plan's host gives its runner by
default (half of its installed memory, agentd/runner.default_memory_budget) less those buffers.
The idle level and its noise are the forward model's (its solo profile measured them on this
host), or the target's own least used memory where that is lower (the host idles lower than
when it was profiled) or there is no forward model; the plan's provenance says which. An
imported trace from a bigger host has had its used memory scaled by installed memory
(controller/mapping.py).
"""

from __future__ import annotations

import functools
from dataclasses import replace

import numpy as np

from ..catalog import buffer_of

METRIC = "mem.used_B"
# Below this a window's used memory counts as the host's idle level whatever the profile says:
# the host's own background (page tables, slab, the agent) moves by tens of MiB.
NOISE_FLOOR_B = 32.0 * 2**20


@functools.lru_cache(maxsize=4)
def _catalog(hash_: str):
    """This build's catalog when it is the one a plan names (its stressors' params), else None."""
    from ..catalog import load_catalog
    from ..errors import ValidationError
    try:
        cat = load_catalog()
    except (ValidationError, OSError):
        return None
    return cat if cat.hash == hash_ else None


def window_buffers(plan, first=None) -> np.ndarray:
    """float64 [T]: bytes the plan's stressors hold in their buffers in each window: a working
    set in every window once the plan runs its stressor anywhere (set up for the whole run: once
    if shared, else per thread that runs it), IO buffers and churned regions in the windows where
    a thread runs their stressor, once per such thread (stressors/runner.c, window_residency).
    From the plan's catalog where this build has it; else from the forward model's footprints,
    every one for the whole run (which are held only in their windows is the catalog's to say)."""
    runs = np.asarray(plan.compositions) > 0                                   # [T, M, K]
    cat = _catalog(plan.catalog_hash)
    if cat is not None and cat.names == list(plan.catalog_names):
        buffers = [buffer_of(s.params) for s in cat.stressors]
        size = np.array([b.bytes for b in buffers])
        shared = np.array([b.shared for b in buffers])
        windowed = np.array([b.windowed for b in buffers])
        threads = runs.any(axis=0).sum(axis=1)                                   # [M] threads that run m
        run_long = np.where(windowed, 0.0, size * np.where(shared, np.minimum(threads, 1), threads)).sum()
        return float(run_long) + runs.sum(axis=2) @ np.where(windowed, size, 0.0)
    if first is not None and first.footprint is not None and list(first.catalog_names) == list(plan.catalog_names):
        return np.full(plan.T, float((np.asarray(first.footprint, np.float64) * runs.any(axis=(0, 2))).sum()))
    return np.zeros(plan.T)


def window_scoped(catalog_hash: str, names) -> np.ndarray | None:
    """bool [M]: stressors whose buffers are held only in the windows that run them
    (catalog.buffer_of; the rest are held for the whole run), from this build's catalog
    when it is the one named; None where this build does not have it."""
    cat = _catalog(catalog_hash)
    if cat is None or cat.names != list(names):
        return None
    return np.array([buffer_of(s.params).windowed for s in cat.stressors])


def least_of(values: np.ndarray) -> float:
    """A used-memory series' least, its 2nd percentile (a window's dip is not the host's level);
    0 where it has no value."""
    finite = values[np.isfinite(values)]
    return float(np.percentile(finite, 2)) if finite.size else 0.0


def idle_level(values: np.ndarray, first) -> tuple[float, float, str]:
    """(idle used memory, its noise, where it came from) for a target's used memory `values`.
    A target that used less than the profile's idle level shows the host idling lower than when
    it was profiled (other software came and went): its least is the idle level then."""
    least = least_of(values)
    if first is not None and METRIC in first.metric_names:
        n = first.metric_names.index(METRIC)
        noise = float(first.noise[n]) if first.noise is not None and np.isfinite(first.noise[n]) else 0.0
        if least < float(first.idle[n]):
            return least, max(noise, NOISE_FLOOR_B), "the target's least (under the forward model's idle level)"
        return float(first.idle[n]), max(noise, NOISE_FLOOR_B), "the forward model's idle profile"
    return least, NOISE_FLOOR_B, "the target's least"


def budget_of(fingerprint: dict) -> float:
    """What an agent on a host with this fingerprint lets its runner hold by default (half its
    memory); inf where the fingerprint does not say."""
    total = (fingerprint.get("memory") or {}).get("total_B") if isinstance(fingerprint, dict) else None
    return float(total) / 2 if isinstance(total, (int, float)) and total > 0 else float("inf")


def held_for(values: np.ndarray, idle: float, noise: float, buffers, budget: float) -> np.ndarray:
    """float64 [T] bytes to hold for a target's used memory `values` [T] (NaN: not measured)
    beside the stressors' buffers (bytes, per window [T] or one figure for all)."""
    excess = np.nan_to_num(np.asarray(values, np.float64) - idle, nan=0.0)
    buffers = np.broadcast_to(np.asarray(buffers, np.float64), excess.shape)
    held = np.where(excess > noise, excess - buffers, 0.0)
    return np.clip(held, 0.0, np.maximum(0.0, budget - buffers))


def plan_memory(plan, trace, *, first=None):
    """`plan` with mem_held_B set from `trace`'s used memory (unchanged when the trace has none)."""
    if METRIC not in trace.names:
        return plan
    T = min(plan.T, trace.T)
    values = np.full(plan.T, np.nan)
    values[:T] = trace.column(METRIC).astype(np.float64)[:T]
    if not np.isfinite(values).any():
        return plan
    idle, noise, source = idle_level(values, first)
    buffers = window_buffers(plan, first)
    budget = budget_of(plan.host_fingerprint)
    held = held_for(values, idle, noise, buffers, budget)
    prov = {**plan.provenance, "memory_held": {
        "idle_B": idle, "noise_B": noise, "idle_from": source, "stressor_buffers_B": float(buffers.max(initial=0.0)),
        "budget_B": None if not np.isfinite(budget) else budget, "windows_held": int((held > 0).sum()),
        "max_B": float(held.max())}}
    return replace(plan, mem_held_B=held, provenance=prov)
