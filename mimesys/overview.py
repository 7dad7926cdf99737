"""The overview a person reads: a trace (and what replays of it measured) in at most eight panels.

A trace carries thirty-odd metrics; the strip of one panel per metric (controller/evaluate/
report.py `overlay_png`, `trace plot --all`) is for looking something up. The overview answers
"does the replay feel like the target?" at a glance: per-core CPU, disk read, disk write, the
NIC, loopback, memory held and pressure stall (PSI), in that order, each panel only where some
trace measured it. The target is black; each method has its colour, its score in the legend;
windows where a method added activity the target did not have (the activity rule's check on
what was measured) are shaded in that method's colour on the resource's panel.

Needs matplotlib (`python3-matplotlib`); callers say so when it is missing.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .fsutil import atomic_write_with
from .trace import Trace

MAX_PANELS = 8


@dataclass(frozen=True)
class Panel:
    title: str
    metrics: tuple[str, ...]        # exact names; "cpu.util.core*" = every per-core column
    resource: str | None = None     # mimesys/activity.py resource_of: where added windows are shaded


PANELS = (
    Panel("CPU per core", ("cpu.util.core*",)),
    Panel("disk read", ("disk.read_Bps",), "disk.read"),
    Panel("disk write", ("disk.write_Bps",), "disk.write"),
    Panel("network (NIC, rx + tx)", ("net.rx_Bps", "net.tx_Bps"), "net.nic"),
    Panel("loopback", ("net.lo.tx_Bps",), "net.lo"),
    Panel("memory held", ("mem.used_B",)),
    Panel("pressure stall (PSI some)", ("psi.cpu.some", "psi.io.some", "psi.memory.some")),
)


def _columns(trace: Trace, panel: Panel) -> list[str]:
    if panel.metrics == ("cpu.util.core*",):
        return sorted((n for n in trace.names if n.startswith("cpu.util.core")),
                      key=lambda n: int(n.rsplit("core", 1)[1]) if n.rsplit("core", 1)[1].isdigit() else 0)
    return [n for n in panel.metrics if n in trace.names]


def _measured(trace: Trace, names: list[str]) -> bool:
    return any(np.isfinite(trace.column(n)).any() and np.nanmax(np.abs(trace.column(n))) > 0 for n in names)


def panels_for(traces: list[Trace]) -> list[Panel]:
    """The panels some trace measured (non-zero somewhere), at most MAX_PANELS, in PANELS order."""
    return [p for p in PANELS if any(_measured(t, _columns(t, p)) for t in traces)][:MAX_PANELS]


def overview_png(path: Path | str, title: str, target: Trace, executed: dict[str, Trace] | None = None, *,
                 scores: dict[str, float] | None = None, added: dict[str, dict[str, list[int]]] | None = None,
                 score_label: str = "score") -> Path:
    """Write the overview of `target` (and each method's executed trace) to `path`.
    scores: method -> one figure for its legend entry; added: method -> resource -> the windows
    where it added activity (controller/evaluate/own_scale.py idle_window_additions' "windows")."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    executed = dict(executed or {})
    panels = panels_for([target, *executed.values()])
    if not panels:
        panels = [PANELS[0]]
    fig, axes = plt.subplots(len(panels), 1, figsize=(10, 1.55 * len(panels) + 0.9), sharex=True, squeeze=False)
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    series = [("target", target, "black", 1.5)] + [
        (m, tr, colours[i % len(colours)], 1.0) for i, (m, tr) in enumerate(executed.items())]
    for ax, panel in zip(axes[:, 0], panels):
        for label, tr, colour, lw in series:
            cols = _columns(tr, panel)
            if not cols:
                continue
            t = np.arange(tr.T) * tr.window_s
            if panel.metrics == ("cpu.util.core*",) and len(cols) > 2:
                v = np.stack([tr.column(n) for n in cols], axis=1)
                ax.plot(t, np.nanmean(v, axis=1), color=colour, lw=lw)
                ax.fill_between(t, np.nanmin(v, axis=1), np.nanmax(v, axis=1), color=colour, alpha=0.15, lw=0)
            elif panel.metrics == ("cpu.util.core*",):
                for k, n in enumerate(cols):
                    ax.plot(t, tr.column(n), color=colour, lw=lw, ls="-" if k == 0 else "--")
            else:
                ax.plot(t, np.nansum(np.stack([tr.column(n) for n in cols], axis=1), axis=1), color=colour, lw=lw)
            for w in (added or {}).get(label, {}).get(panel.resource, []) if panel.resource else []:
                ax.axvspan(w * tr.window_s, (w + 1) * tr.window_s, color=colour, alpha=0.18, lw=0)
        unit = next((m.unit for m in target.metrics if m.name in _columns(target, panel)), "")
        note = " (core 0 solid, core 1 dashed)" if panel.metrics == ("cpu.util.core*",) and \
            len(_columns(target, panel)) == 2 else (" (mean, band: min-max over cores)"
                                                    if panel.metrics == ("cpu.util.core*",) else "")
        ax.set_title(panel.title + note, fontsize=8, loc="left")
        ax.set_ylabel(unit, fontsize=7)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
    handles = [plt.Line2D([], [], color=c, lw=lw) for _, _, c, lw in series]
    labels = [label if label == "target" or scores is None or label not in scores
              else f"{label} ({score_label} {scores[label]:.3f})" for label, *_ in series]
    if any(added.get(m) for m in executed) if added else False:
        handles.append(plt.Rectangle((0, 0), 1, 1, color="grey", alpha=0.25))
        labels.append("added where the target was idle")
    axes[0, 0].legend(handles, labels, fontsize=7, ncol=min(4, len(labels)), loc="upper right")
    axes[-1, 0].set_xlabel("time [s]")
    fig.suptitle(title + ("  (SIMULATED host)" if target.simulated else ""), fontsize=10)
    fig.tight_layout()
    path = Path(path)
    atomic_write_with(path, lambda tmp: fig.savefig(tmp, dpi=90, format="png"))
    plt.close(fig)
    return path
