"""A plan on the wire: a map of plain fields, the arrays raw ({shape, dtype, bytes}), nothing to
interpret (mimesys/wire.py). Every map is from outside: each field is checked and bounded before
an array is built (the arrays' values are Plan.validate's)."""

from __future__ import annotations

import numpy as np

from .errors import PlanError, ValidationError
from .untrusted import array_from_wire, array_to_wire, metadata_maps

MAX_WINDOWS = 7 * 24 * 3600  # a week of 1 s windows: bounds what a request may ask the agent to hold
FIELDS = ("compositions", "catalog_names", "catalog_hash", "window_s", "seed", "provenance",
          "host_fingerprint", "core_busy_target", "mem_held_B")


def to_wire(plan) -> dict:
    """A Plan (mimesys/plan.py) as a wire map."""
    out = {"compositions": array_to_wire(plan.compositions, "<f4"), "catalog_names": list(plan.catalog_names),
           "catalog_hash": plan.catalog_hash, "window_s": float(plan.window_s), "seed": int(plan.seed),
           "provenance": plan.provenance, "host_fingerprint": plan.host_fingerprint}
    if plan.core_busy_target is not None:
        out["core_busy_target"] = array_to_wire(plan.core_busy_target, "<f4")
    if plan.mem_held_B is not None:
        out["mem_held_B"] = array_to_wire(plan.mem_held_B, "<f8")
    return out


def fields_from_wire(obj, where: str, *, max_threads: int | None, max_elements: int) -> dict:
    """Plan's constructor arguments from a wire map; PlanError naming the field otherwise."""
    if not isinstance(obj, dict):
        raise PlanError(f"{where}: expected a map, got {type(obj).__name__}")
    unknown = sorted(str(k) for k in obj if k not in FIELDS)
    if unknown:
        raise PlanError(f"{where}: unknown field(s) {unknown}; valid: {', '.join(FIELDS)}")
    for name in ("compositions", "catalog_names", "catalog_hash"):
        if name not in obj:
            raise PlanError(f"{where}: missing field {name!r}")
    shape = obj["compositions"].get("shape") if isinstance(obj["compositions"], dict) else None
    if max_threads and isinstance(shape, list) and len(shape) == 3 and isinstance(shape[2], int) \
            and shape[2] > max_threads:
        raise PlanError(f"{where}: {shape[2]} threads; this host runs at most {max_threads} (its CPU limit)")
    thread_limit = {2: max_threads} if max_threads else {}
    a = _array(obj["compositions"], f"{where}.compositions", 3, "<f4", max_elements, {0: MAX_WINDOWS} | thread_limit)
    busy = held = None
    if obj.get("core_busy_target") is not None:
        busy = _array(obj["core_busy_target"], f"{where}.core_busy_target", 2, "<f4", max_elements,
                      {0: MAX_WINDOWS} | ({1: max_threads} if max_threads else {}))
    if obj.get("mem_held_B") is not None:
        held = _array(obj["mem_held_B"], f"{where}.mem_held_B", 1, "<f8", max_elements, {0: MAX_WINDOWS})
    names, chash = obj["catalog_names"], obj["catalog_hash"]
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise PlanError(f"{where}.catalog_names: expected a list of names")
    if not isinstance(chash, str):
        raise PlanError(f"{where}.catalog_hash: expected a string")
    window_s, seed = obj.get("window_s", 1.0), obj.get("seed", 0)
    if isinstance(window_s, bool) or not isinstance(window_s, (int, float)) or not np.isfinite(window_s):
        raise PlanError(f"{where}.window_s: expected a finite number")
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 1 << 64:
        raise PlanError(f"{where}.seed: expected an integer in [0, 2^64)")
    prov, fp = metadata_maps(obj, where, PlanError)
    return dict(compositions=a, catalog_names=names, catalog_hash=chash, window_s=float(window_s), seed=seed,
                provenance=prov, host_fingerprint=fp, core_busy_target=busy, mem_held_B=held)


def _array(obj, where: str, ndim: int, dtype: str, max_elements: int, axis_limits: dict) -> np.ndarray:
    try:
        return array_from_wire(obj, where, ndim=ndim, dtype=dtype, max_elements=max_elements, axis_limits=axis_limits)
    except PlanError:
        raise
    except ValidationError as e:
        raise PlanError(str(e)) from None
