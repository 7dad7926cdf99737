"""`mimesys-agent trace info|csv|plot FILE` and `mimesys-agent plan show|to-json|from-json`:
look at a trace or a plan without writing code, and write a plan by hand (agentd/planjson.py)."""

from __future__ import annotations

import datetime
import json
import sys
from pathlib import Path

import click
import numpy as np

from mimesys.cliopts import json_option
from mimesys.terminal import printable

from ._common import friendly_errors

EXISTING = click.Path(exists=True, dir_okay=False, path_type=Path)


@click.group("trace")
def trace():
    """Show, export or plot a trace file."""


def _when(unix_s) -> str:
    if unix_s is None:
        return "unknown (an older trace)"
    return datetime.datetime.fromtimestamp(unix_s, datetime.timezone.utc).isoformat(timespec="seconds")


@trace.command("info")
@click.argument("path", type=EXISTING)
@json_option
@friendly_errors
def trace_info(path, as_json):
    """Windows, start time, host, provenance and per-metric summary."""
    from mimesys.trace import Trace
    tr = Trace.read(path)
    metrics = []
    for j, m in enumerate(tr.metrics):
        col = tr.values[:, j]
        ok = col[~np.isnan(col)]
        metrics.append({"name": m.name, "unit": m.unit, "availability": str(getattr(m.availability, "value",
                                                                                 m.availability)),
                        "measured_windows": int(ok.size),
                        "mean": float(ok.mean()) if ok.size else None, "max": float(ok.max()) if ok.size else None})
    doc = {"path": str(path), "windows": tr.T, "window_s": tr.window_s, "duration_s": tr.T * tr.window_s,
           "started_unix_s": tr.started_unix_s, "simulated": tr.simulated, "provenance": tr.provenance,
           "metrics": metrics}
    if as_json:
        click.echo(json.dumps(doc, indent=1, default=str))
        return
    # Names, units and provenance are the file's: printable() before they reach the terminal.
    click.echo(f"{printable(path)}: {tr.T} windows x {tr.window_s:g} s = {tr.T * tr.window_s:g} s"
               + ("  [SIMULATED host]" if tr.simulated else ""))
    click.echo(f"started: {_when(tr.started_unix_s)}")
    kind = tr.provenance.get("kind") or tr.provenance.get("by") or "?"
    click.echo(f"kind: {printable(kind)}; {len(tr.metrics)} metrics")
    click.echo(f"  {'metric':34s} {'unit':10s} {'measured':>9s} {'mean':>12s} {'max':>12s}")
    for m in metrics:
        mean = "-" if m["mean"] is None else f"{m['mean']:.4g}"
        mx = "-" if m["max"] is None else f"{m['max']:.4g}"
        note = "" if m["availability"] in ("available", "Availability.AVAILABLE") else f"  ({m['availability']})"
        click.echo(f"  {printable(m['name']):34s} {printable(m['unit']):10s} {m['measured_windows']:9d} {mean:>12s} "
                   f"{mx:>12s}{printable(note)}")


@trace.command("csv")
@click.argument("path", type=EXISTING)
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="CSV file (default: stdout).")
@friendly_errors
def trace_csv(path, output):
    """One row per window: window, start_s, then every metric (empty = not measured)."""
    from mimesys.trace import Trace
    tr = Trace.read(path)
    if output is not None:
        tr.write_csv(output)
        click.echo(f"csv: {output}", err=True)
        return
    import csv
    w = csv.writer(sys.stdout)
    # The names are the file's: escaped on a terminal, written as they are into a pipe.
    w.writerow(["window", "start_s"] + ([printable(n) for n in tr.names] if sys.stdout.isatty() else tr.names))
    for t in range(tr.T):
        start = "" if tr.window_start_ns is None else f"{tr.window_start_ns[t] / 1e9:.6f}"
        w.writerow([t, start] + ["" if np.isnan(x) else f"{x:.6g}" for x in tr.values[t]])


@trace.command("plot")
@click.argument("path", type=EXISTING)
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="PNG file (default: <trace>.png).")
@click.option("--metric", "metrics", multiple=True, help="Metric to plot, one panel each (repeat).")
@click.option("--all", "every", is_flag=True, help="One panel per measured metric (per-core CPU as one panel) "
                                                   "instead of the overview.")
@friendly_errors
def trace_plot(path, output, metrics, every):
    """The overview (per-core CPU, disk, network, loopback, memory held, PSI; at most eight
    panels), or one panel per metric (--all, --metric). Needs matplotlib (python3-matplotlib)."""
    from mimesys.errors import ConfigError
    from mimesys.trace import Trace
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ConfigError("trace plot needs matplotlib (apt install python3-matplotlib, or pip install "
                          "matplotlib); `trace csv` works without it") from None
    tr = Trace.read(path)
    output = Path(output or path.with_suffix(".png"))
    if not metrics and not every:
        from mimesys.overview import overview_png
        overview_png(output, f"{path.name}, from {_when(tr.started_unix_s)}", tr)
        click.echo(f"plot: {printable(output)}")
        return
    names = list(metrics) or [n for j, n in enumerate(tr.names) if not np.isnan(tr.values[:, j]).all()]
    missing = [n for n in names if n not in tr.names]
    if missing:
        raise ConfigError(f"{path} has no metric(s) {missing}; it has: {', '.join(tr.names)}")
    cores = [n for n in names if n.startswith("cpu.util.core")]
    panels = ([("cpu.util.core*", cores)] if cores and not metrics else []) + \
             [(n, [n]) for n in names if n not in cores or metrics]
    if not panels:
        raise ConfigError(f"{path}: no measured metric to plot")
    t = np.arange(tr.T) * tr.window_s
    fig, axes = plt.subplots(len(panels), 1, figsize=(9, 1.6 * len(panels) + 0.8), sharex=True, squeeze=False)
    for ax, (title, cols) in zip(axes[:, 0], panels):
        for n in cols:
            ax.plot(t, tr.column(n), lw=0.8, label=n if len(cols) > 1 else None)
        unit = tr.metrics[tr.names.index(cols[0])].unit
        ax.set_ylabel(unit, fontsize=7)
        ax.set_title(title, fontsize=8, loc="left")
        ax.tick_params(labelsize=7)
    axes[-1, 0].set_xlabel(f"seconds since {_when(tr.started_unix_s)}")
    fig.suptitle(f"{path.name}{' (SIMULATED host)' if tr.simulated else ''}", fontsize=9)
    fig.tight_layout()
    from mimesys.fsutil import atomic_write_with
    # The temporary name has no suffix: the format is the output's (matplotlib's default png).
    atomic_write_with(output, lambda tmp: fig.savefig(tmp, dpi=90, format=output.suffix[1:].lower() or "png"))
    plt.close(fig)
    click.echo(f"plot: {printable(output)}")


@click.group("plan")
def plan():
    """Show a plan, or convert it to and from readable per-thread JSON."""


@plan.command("show")
@click.argument("path", type=EXISTING)
@json_option
@friendly_errors
def plan_show(path, as_json):
    """Windows, threads, the stressors used and their mean share per thread."""
    from mimesys.plan import Plan
    p = Plan.read(path)
    a = np.asarray(p.compositions, np.float64)
    used = [m for m in range(p.M) if a[:, m, :].any()]
    doc = {"path": str(path), "windows": p.T, "threads": p.K, "window_s": p.window_s, "seed": p.seed,
           "catalog_hash": p.catalog_hash, "busy_share_per_thread": [float(x) for x in a.sum(axis=1).mean(axis=0)],
           "stressors": {p.catalog_names[m]: [float(x) for x in a[:, m, :].mean(axis=0)] for m in used},
           "provenance": p.provenance, "host": _host_line(p.host_fingerprint),
           "memory_held_B": None if p.mem_held_B is None else {
               "mean": float(p.mem_held_B.mean()), "max": p.held_max_B, "windows": int((p.mem_held_B > 0).sum())}}
    if as_json:
        click.echo(json.dumps(doc, indent=1, default=str))
        return
    # Names, hash, host and provenance are the file's: printable() before they reach the terminal.
    click.echo(f"{printable(path)}: {p.T} windows x {p.window_s:g} s, {p.K} thread(s), seed {printable(p.seed)}, "
               f"catalog {printable(p.catalog_hash)}")
    click.echo(f"made for: {printable(doc['host'])}")
    click.echo(f"by: {printable(_by_line(p.provenance))}")
    click.echo("mean share of each window, per thread:")
    click.echo(f"  {'stressor':28s} " + " ".join(f"{'t' + str(k):>6s}" for k in range(p.K)))
    for name, shares in doc["stressors"].items():
        click.echo(f"  {printable(name):28s} " + " ".join(f"{s:6.3f}" for s in shares))
    click.echo(f"  {'(busy)':28s} " + " ".join(f"{s:6.3f}" for s in doc["busy_share_per_thread"]))
    held = doc["memory_held_B"]
    if held:
        click.echo(f"memory held: {held['windows']} of {p.T} windows, mean {held['mean'] / 2**20:.0f} MiB, "
                   f"most {held['max'] / 2**20:.0f} MiB")


def _by_line(prov: dict) -> str:
    """Who made the plan: `plan from-json`, a run, or a planner (generate, the controller) and its model."""
    by = prov.get("by") or prov.get("kind") or prov.get("planner")
    if by:
        return str(by)
    if prov.get("generator"):
        model = [f"{k} {str(prov[key])[:19] if key == 'model_sha256' else str(prov[key])[:8]}"
                 for k, key in (("model", "model_sha256"), ("revision", "model_git_revision")) if prov.get(key)]
        return f"{prov['generator']} planner" + (f" ({', '.join(model)})" if model else "")
    return "?"


def _host_line(fp: dict) -> str:
    if not fp:
        return "no host recorded"
    cpu = fp.get("cpu") if isinstance(fp.get("cpu"), dict) else {}
    model = cpu.get("model") or fp.get("cpu_model") or "?"
    n = cpu.get("logical_cpus") or fp.get("cores") or "?"
    return f"{model}, {n} CPUs" + (" (simulated)" if fp.get("simulated") else "")


@plan.command("to-json")
@click.argument("path", type=EXISTING)
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="JSON file (default: stdout).")
@friendly_errors
def plan_to_json(path, output):
    """The plan as per-thread phases (agentd/planjson.py), editable by hand."""
    from mimesys.plan import Plan
    from ..planjson import dumps, to_json
    text = dumps(to_json(Plan.read(path)))
    if output is None:
        click.echo(text, nl=False)
    else:
        from mimesys.fsutil import atomic_write_text
        atomic_write_text(output, text)
        click.echo(f"json: {output}", err=True)


@plan.command("from-json")
@click.argument("path", type=EXISTING)
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="Plan file to write (HDF5).")
@click.option("--catalog", "catalog_path", type=EXISTING, default=None,
              help="Stressor catalog the names refer to (default: the shipped one).")
@friendly_errors
def plan_from_json(path, output, catalog_path):
    """Build a plan from per-thread phases written by hand (or by `plan to-json`)."""
    from mimesys.catalog import load_catalog
    from mimesys.errors import PlanError
    from ..planjson import from_json
    if path.stat().st_size > 256 << 20:
        raise PlanError(f"{path}: larger than 256 MiB; not a hand-written plan")
    try:
        doc = json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError) as e:
        raise PlanError(f"{path}: not JSON: {e}") from None
    p = from_json(doc, load_catalog(catalog_path), where=str(path))
    p.write(output)
    click.echo(f"plan: {output} ({p.T} windows x {p.window_s:g} s, {p.K} thread(s))")
