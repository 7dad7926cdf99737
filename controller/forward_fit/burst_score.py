"""How well a forward model predicts a plan's burst structure, on real runs it did not see:
Driple's measure, the mean absolute percentage error (MAPE) per statistic and resource.

A run is a (plan, measured trace) pair: the plan a planner made and the trace the host
recorded running it — what `mimesys evaluate` leaves in its output directory
(plans/<trace>__<method>.h5 and executed/<trace>__<method>.h5). The forward model never saw
these windows (it was fitted on campaign samples), so they are held out.

Per run: the burst statistics (mimesys/bursts.py) of the predicted trace and of the measured
one, thresholds relative to the model's full scales for both. Per (resource, statistic):
MAPE = mean over runs of |predicted − measured| / |measured|, in percent, over the runs where
both are defined; `undefined_on_one_side` counts the runs where one side had bursts and the
other none (MAPE cannot score them; the capped burst-structure error does, as 1).
"""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path

import numpy as np

from mimesys import bursts
from mimesys.errors import ValidationError
from mimesys.forward.prediction import check_plan, model_peaks, predicted_trace
from mimesys.plan import Plan
from mimesys.trace import Trace


def eval_runs(eval_dir: Path | str) -> list[tuple[str, Path, Path]]:
    """(name, plan, executed trace) for every run `mimesys evaluate` left in eval_dir."""
    d = Path(eval_dir)
    if not (d / "executed").is_dir() or not (d / "plans").is_dir():
        raise ValidationError(f"{d}: not an evaluation directory (needs plans/ and executed/, as `mimesys evaluate` "
                              f"writes)")
    out = [(f.stem, d / "plans" / f.name, f) for f in sorted((d / "executed").glob("*.h5"))
           if (d / "plans" / f.name).is_file()]
    if not out:
        raise ValidationError(f"{d}: no run with both plans/<name>.h5 and executed/<name>.h5")
    return out


def score_runs(fm, runs: list[tuple[str, Path, Path]], *, first_order_only: bool = False) -> dict:
    """-> {"runs": n, "mape": {resource: {statistic: percent}}, "mape_by_statistic": {statistic:
    percent over resources}, "mape_mean": percent, "structure_error_mean": capped error,
    "undefined_on_one_side": {resource: {statistic: n}}, "per_run": [...]}"""
    peaks = model_peaks(fm)
    pairs: dict = defaultdict(lambda: defaultdict(list))
    one_side: dict = defaultdict(lambda: defaultdict(int))
    per_run = []
    skipped = []
    for name, plan_path, trace_path in runs:
        plan = Plan.read(plan_path)
        try:
            check_plan(fm, plan, str(plan_path))
        except ValidationError as e:
            skipped.append({"run": name, "reason": str(e)})
            continue
        measured = Trace.read(trace_path)
        if abs(measured.window_s - plan.window_s) > 1e-9 or measured.T != plan.T:
            skipped.append({"run": name, "reason": f"{trace_path}: {measured.T} windows of {measured.window_s} s, the "
                                                   f"plan has {plan.T} of {plan.window_s} s"})
            continue
        pred = predicted_trace(fm, plan, first_order_only=first_order_only)
        names = [n for n in bursts.resource_metrics(measured) if n in fm.metric_names]
        ms = bursts.trace_burst_stats(measured, peaks=peaks, metrics=names)
        ps = bursts.trace_burst_stats(pred, peaks=peaks, metrics=[n for n in names if n in ms])
        for res, m in ms.items():
            p = ps.get(res)
            for stat in bursts.STATS:
                a, b = getattr(m, stat), getattr(p, stat) if p is not None else math.nan
                if math.isnan(a) != math.isnan(b):
                    one_side[res][stat] += 1
                pairs[res][stat].append((a, b))
        per_run.append({"run": name, "structure_error": _none(bursts.structure_error(ms, ps, plan.window_s))})
    mape = {res: {stat: _none(bursts.mape(v)) for stat, v in stats.items()} for res, stats in pairs.items()}
    by_stat = {stat: _none(bursts.mape([pv for res in pairs for pv in pairs[res][stat]])) for stat in bursts.STATS}
    cells = [v for r in mape.values() for v in r.values() if v is not None]
    se = [r["structure_error"] for r in per_run if r["structure_error"] is not None]
    return {"runs": len(per_run), "skipped": skipped, "first_order_only": bool(first_order_only),
            "mape": mape, "mape_by_statistic": by_stat, "mape_mean": float(np.mean(cells)) if cells else None,
            "structure_error_mean": float(np.mean(se)) if se else None,
            "undefined_on_one_side": {r: dict(v) for r, v in one_side.items()}, "per_run": per_run,
            "simulated": bool(fm.simulated)}


def _none(v):
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else v


def render(doc: dict) -> str:
    stats = bursts.STATS
    lines = [f"burst statistics predicted from the plan vs measured, {doc['runs']} held-out runs: MAPE [%]"
             + ("  (first order)" if doc.get("first_order_only") else "") + ("  (SIMULATED)" if doc["simulated"] else ""),
             f"{'resource':22s}" + "".join(f"{s:>18s}" for s in stats)]
    for res, row in doc["mape"].items():
        lines.append(f"{res:22s}" + "".join(f"{row[s]:>18.1f}" if row.get(s) is not None else f"{'-':>18s}"
                                            for s in stats))
    by = doc["mape_by_statistic"]
    lines.append(f"{'all resources':22s}" + "".join(f"{by[s]:>18.1f}" if by.get(s) is not None else f"{'-':>18s}"
                                                    for s in stats))
    if doc.get("structure_error_mean") is not None:
        lines.append(f"mean burst-structure error (capped, one-sided = 1): {doc['structure_error_mean']:.3f}")
    return "\n".join(lines)
