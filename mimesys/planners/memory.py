"""Memory held: the resident footprint a plan keeps in each window, planned from its target.

A colocated service feels the memory an application holds before anything else (page cache
evicted, reclaim, pressure stalls), so a plan carries it beside its compositions
(`Plan.mem_held_B`, held by the runner: runner.c, "Memory held"). Every planner's plan gets it
the same way, behind the registry's guard (registry.guarded): it is a level to follow, not a
composition to search for.

    excess_t = target's mem.used_B in window t − the host's idle level
    held_t   = excess_t − the plan's stressor buffers   where excess_t is above the idle noise
               0                                        elsewhere (no memory the target did not hold)

A stressor's own buffers are held for the whole run from setup (runner.c) and count against
what the plan holds. Leaving out a stressor whose buffers outweigh what the target held is not
done here: measured, a knn plan interpolating 40 stressors held 5 GiB of buffers next to a target
holding at most 0.8 GiB, but dropping stressors after a planner chose them took the CPU work the
inverse planner's solve had put on them (its simulated-host test fell from 0.56x single's error
to beyond it); the planner that chooses must weigh the buffers itself (the inverse planner's
`allowed` does for stressors no metric observes).

capped at the memory an agent of the plan's host gives its runner by default (half of its
installed memory, agentd/runner.default_memory_budget) less those buffers. The idle level and
its noise are the forward model's (its solo profile measured them on this host), or the
target's own least used memory where that is lower (the host idles lower than when it was
profiled) or there is no forward model; the plan's provenance says which. An imported trace from a
bigger host has had its used memory scaled by installed memory (controller/mapping.py).
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


def run_buffers(plan, first=None) -> np.ndarray:
    """float64 [M]: bytes each stressor's buffers hold for the whole run, where the plan runs it
    at all (the runner allocates them at setup: once if shared, else per thread that runs it).
    From the plan's catalog where this build has it, else the forward model's footprints."""
    uses = (np.asarray(plan.compositions) > 0).any(axis=0)                     # [M, K]
    cat = _catalog(plan.catalog_hash)
    if cat is not None and cat.names == list(plan.catalog_names):
        sizes = [buffer_of(s.params) for s in cat.stressors]
        return np.array([size * (1 if shared else int(u.sum())) if u.any() else 0.0
                         for (size, shared), u in zip(sizes, uses)])
    if first is not None and first.footprint is not None and list(first.catalog_names) == list(plan.catalog_names):
        return np.where(uses.any(axis=1), np.asarray(first.footprint, np.float64), 0.0)
    return np.zeros(plan.M)


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


def held_for(values: np.ndarray, idle: float, noise: float, footprint: float, budget: float) -> np.ndarray:
    """float64 [T] bytes to hold for a target's used memory `values` [T] (NaN: not measured)."""
    excess = np.nan_to_num(np.asarray(values, np.float64) - idle, nan=0.0)
    held = np.where(excess > noise, excess - footprint, 0.0)
    return np.clip(held, 0.0, max(0.0, budget - footprint))


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
    footprint = float(run_buffers(plan, first).sum())
    budget = budget_of(plan.host_fingerprint)
    held = held_for(values, idle, noise, footprint, budget)
    prov = {**plan.provenance, "memory_held": {
        "idle_B": idle, "noise_B": noise, "idle_from": source, "stressor_buffers_B": footprint,
        "budget_B": None if not np.isfinite(budget) else budget, "windows_held": int((held > 0).sum()),
        "max_B": float(held.max())}}
    return replace(plan, mem_held_B=held, provenance=prov)
