"""The first-order model's file form: the `first_order` object of a forward model's manifest
(model.py), capacities unbounded written as null, optional parameters as null when absent."""

from __future__ import annotations

import numpy as np

from ..errors import ValidationError
from .firstorder import FirstOrder


def first_order_to_dict(first: FirstOrder) -> dict:
    cap = [None if not np.isfinite(c) else float(c) for c in first.capacity]
    return {"metric_names": first.metric_names, "units": first.units, "catalog_names": first.catalog_names,
            "thread_cores": first.thread_cores, "idle": first.idle.tolist(), "response": first.response.tolist(),
            "own": first.own.tolist(), "other": first.other.tolist(), "capacity": cap,
            "groups": {g: list(map(int, idx)) for g, idx in first.groups.items()},
            "usage": first.usage.tolist(), "classes": first.classes,
            "footprint_B": None if first.footprint is None else first.footprint.tolist(),
            "idle_noise": None if first.noise is None else first.noise.tolist(),
            "core_fixed": first.fixed.tolist() if first.fixed.any() else None,
            "segment_dead": first.dead.tolist() if first.dead.any() else None}


def first_order_from_dict(d: dict, where: str = "first-order model") -> FirstOrder:
    try:
        cap = np.array([np.inf if c is None else float(c) for c in d["capacity"]])
        M = len(d["catalog_names"])
        usage = np.asarray(d.get("usage"), np.float64).reshape(M, len(d.get("groups") or {})) \
            if d.get("usage") is not None else None
        return FirstOrder(list(d["metric_names"]), list(d["units"]), list(d["catalog_names"]),
                          [int(c) for c in d["thread_cores"]], np.asarray(d["idle"], np.float64),
                          np.asarray(d["response"], np.float64), np.asarray(d["own"], np.float64),
                          np.asarray(d["other"], np.float64), cap,
                          {str(g): [int(i) for i in idx] for g, idx in (d.get("groups") or {}).items()}, usage,
                          list(d["classes"]) if d.get("classes") else None,
                          np.asarray(d["footprint_B"], np.float64) if d.get("footprint_B") is not None else None,
                          np.asarray(d["idle_noise"], np.float64) if d.get("idle_noise") is not None else None,
                          np.asarray(d["core_fixed"], np.float64) if d.get("core_fixed") is not None else None,
                          np.asarray(d["segment_dead"], np.float64) if d.get("segment_dead") is not None else None)
    except (KeyError, TypeError, ValueError) as e:
        raise ValidationError(f"{where}: malformed ({type(e).__name__}: {e})") from None
