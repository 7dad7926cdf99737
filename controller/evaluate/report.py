"""Evaluation results: one row per (trace, method, metric), grouped by load level, written as
JSON and CSV (results_out.py) and PNGs.

Burst structure (mimesys/bursts.py): per (trace, method, resource, statistic) the target's and
the executed trace's value and their capped relative error (`burst_rows`, bursts.csv), and per
(trace, method) the burst-structure error, their mean (`runs[...]["burst_error"]`, summarized
per method and level in `burst_summary`, shown beside the DTW by `render`).

Load level of a target trace (the MIMESYS paper's three classes, §7.2): from its mean CPU
utilization over all cores and windows, u = mean(cpu.util): low u < 0.30, mid 0.30 <= u <
0.60, high u >= 0.60, taken on the host the trace was recorded on. (The paper classifies by the CPU cores allocated to the mix; a trace
imported from elsewhere carries no allocation, so the measured mean stands in for it, and
`load_level` can be given explicitly per target.)
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from mimesys.fsutil import atomic_write_with
from mimesys.trace import Trace

LEVELS = ((0.30, "low"), (0.60, "mid"), (math.inf, "high"))


def load_level(trace: Trace) -> str:
    """low / mid / high from mean cpu.util (or the mean of the per-core columns); unknown without CPU
    data. A trace mapped from another host (controller/mapping.py) is classified by its load on
    that host (provenance `source_cpu_util_mean`), not by how full it made this one."""
    src = (trace.provenance or {}).get("source_cpu_util_mean")
    if isinstance(src, (int, float)) and math.isfinite(src):
        return next(name for bound, name in LEVELS if src < bound)
    if "cpu.util" in trace.names:
        u = trace.column("cpu.util")
    else:
        cores = [n for n in trace.names if n.startswith("cpu.util.core")]
        u = trace.select(cores) if cores else np.full(1, np.nan)
    if not np.isfinite(u).any():
        return "unknown"
    m = float(np.nanmean(u))
    return next(name for bound, name in LEVELS if m < bound)


@dataclass
class Row:
    trace: str
    method: str
    load_level: str
    metric: str
    distance: float          # normalized DTW, [0, 1]; NaN = not evaluated
    scale: float
    scale_from: str
    reason: str = ""


@dataclass
class EvaluationResults:
    rows: list[Row] = field(default_factory=list)
    meta: dict = field(default_factory=dict)      # host, band, simulated, what ran
    runs: list[dict] = field(default_factory=list)  # per (trace, method): plan and run ids, timings, errors
    burst_rows: list[dict] = field(default_factory=list)  # per (trace, method, resource, statistic)
    burst_errors: dict = field(default_factory=dict)      # (trace, method) -> burst-structure error

    def add_bursts(self, trace: str, method: str, level: str, target: dict, executed: dict, dt: float) -> float:
        """Record the burst statistics of one executed trace against its target (name ->
        BurstStats each) and return the burst-structure error."""
        from mimesys import bursts as B

        for name, ts in target.items():
            es = executed.get(name)
            errs = B.relative_errors(ts, es, dt)
            for stat in B.STATS:
                self.burst_rows.append({"trace": trace, "method": method, "load_level": level, "resource": name,
                                        "statistic": stat, "target": _none(getattr(ts, stat)),
                                        "executed": _none(getattr(es, stat)) if es is not None else None,
                                        "error": _none(errs[stat])})
        err = B.structure_error(target, executed, dt)
        self.burst_errors[(trace, method)] = err
        return err

    def burst_summary(self) -> dict:
        """method -> level ("all" included) -> mean burst-structure error over traces."""
        acc: dict = defaultdict(lambda: defaultdict(list))
        for (trace, method), e in self.burst_errors.items():
            if math.isfinite(e):
                level = next((r.load_level for r in self.rows if r.trace == trace and r.method == method), "unknown")
                for lv in (level, "all"):
                    acc[method][lv].append(e)
        return {m: {lv: float(np.mean(v)) for lv, v in levels.items()} for m, levels in acc.items()}

    def add(self, trace: str, method: str, level: str, results: dict) -> None:
        for metric, r in results.items():
            self.rows.append(Row(trace, method, level, metric, r.distance, r.scale, r.scale_from, r.reason))

    def methods(self) -> list[str]:
        return list(dict.fromkeys(r.method for r in self.rows))

    def summary(self) -> dict:
        """method -> level ("all" included) -> metric ("MEAN" included) -> mean distance over traces.
        MEAN is the mean over the metrics evaluated for that method and level."""
        acc: dict = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
        for r in self.rows:
            if math.isfinite(r.distance):
                for level in (r.load_level, "all"):
                    acc[r.method][level][r.metric].append(r.distance)
        out: dict = {}
        for method, levels in acc.items():
            out[method] = {}
            for level, metrics in levels.items():
                means = {m: float(np.mean(v)) for m, v in metrics.items()}
                means["MEAN"] = float(np.mean(list(means.values())))
                out[method][level] = means
        return out

    # -- what the results become (controller/evaluate/results_out.py) --------------------
    def write(self, outdir: Path) -> dict[str, Path]:
        """results.json, results.csv, summary.csv and bursts.csv in outdir; their paths."""
        from . import results_out
        return results_out.write(self, outdir)

    def render(self) -> str:
        """A plain table: methods as rows, metrics (+ MEAN) as columns, over all levels."""
        from . import results_out
        return results_out.render(self)

    def own_scale_summary(self) -> dict:
        """method -> {"resource_mean": mean over runs of the CPU/disk/loopback score on the
        target's own scale, "added_windows": windows with activity added where the target was
        idle, summed over runs and resources} (evaluate/own_scale.py)."""
        acc: dict = defaultdict(lambda: {"scores": [], "added_windows": 0})
        for run in self.runs:
            own = run.get("own_scale") or {}
            if own.get("resource_mean") is not None:
                acc[run["method"]]["scores"].append(own["resource_mean"])
            for e in (run.get("idle_windows_added") or {}).values():
                acc[run["method"]]["added_windows"] += int(e["added_windows"])
        return {m: {"resource_mean": float(np.mean(v["scores"])) if v["scores"] else None,
                    "added_windows": v["added_windows"]} for m, v in acc.items()}


def _none(v):
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else v


def burst_table(target: dict, executed: dict[str, dict], errors: dict[str, float]) -> tuple[list[str], list[list[str]]]:
    """(column labels, rows) of the burst statistics: one row per (resource, statistic) that the
    target or some method defines, target first then each method; last row the burst-structure error."""
    from mimesys import bursts as B

    cols = ["resource", "statistic", "target"] + list(executed)
    rows = []
    for name, ts in target.items():
        for stat in B.STATS:
            vals = [getattr(ts, stat)] + [getattr(ex[name], stat) if name in ex else math.nan
                                           for ex in executed.values()]
            if all(math.isnan(v) for v in vals):
                continue
            rows.append([name, stat] + ["-" if math.isnan(v) else f"{v:.3g}" for v in vals])
    rows.append(["burst-structure error", "", ""] + [f"{errors.get(m, math.nan):.3f}" for m in executed])
    return cols, rows


def overlay_png(path: Path, title: str, target: Trace, executed: dict[str, Trace], metrics: list[str],
                *, simulated: bool = False, table: tuple[list[str], list[list[str]]] | None = None) -> Path:
    """One panel per metric: the target (black) and each method's executed trace; below, the
    burst statistics table when given (burst_table)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metrics = [m for m in metrics if m in target.names]
    n_table = len(table[1]) if table else 0
    table_h = 0.17 * (n_table + 1) + 0.3 if table else 0.0
    fig = plt.figure(figsize=(10, 1.9 * len(metrics) + 0.6 + table_h))
    grid = fig.add_gridspec(len(metrics) + (1 if table else 0), 1,
                            height_ratios=[1.9] * len(metrics) + ([table_h] if table else []))
    axes = np.empty((len(metrics), 1), dtype=object)
    for i in range(len(metrics)):
        axes[i, 0] = fig.add_subplot(grid[i, 0], sharex=axes[0, 0] if i else None)
    if table:
        tax = fig.add_subplot(grid[-1, 0])
        tax.axis("off")
        tab = tax.table(cellText=table[1], colLabels=table[0], loc="upper center", cellLoc="right")
        tab.auto_set_font_size(False)
        tab.set_fontsize(6)
        tab.scale(1, 0.9)
    for ax, m in zip(axes[:, 0], metrics):
        t = np.arange(target.T) * target.window_s
        ax.plot(t, target.column(m), color="black", lw=1.6, label="target")
        for name, tr in executed.items():
            if m in tr.names:
                ax.plot(np.arange(tr.T) * tr.window_s, tr.column(m), lw=1.0, label=name)
        unit = next((s.unit for s in target.metrics if s.name == m), "")
        ax.set_ylabel(f"{m}\n[{unit}]", fontsize=8)
        ax.grid(alpha=0.3)
    axes[0, 0].legend(fontsize=7, ncol=min(5, 1 + len(executed)), loc="upper right")
    axes[-1, 0].set_xlabel("time [s]")
    fig.suptitle(title + ("  (SIMULATED host)" if simulated else ""), fontsize=10)
    fig.tight_layout()
    atomic_write_with(path, lambda tmp: fig.savefig(tmp, dpi=90, format="png"))
    plt.close(fig)
    return path
