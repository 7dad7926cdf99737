"""Real-host fidelity: do generated plans reproduce real application mixes better than stressors
at fixed levels? Everything here is measured on this machine; nothing is simulated.

    python bench/fidelity_real.py --out bench-out/fidelity --campaign DIR [--max-round R] [--label demo]

Steps (each reused from --out when already there, so an interrupted run resumes):
  1. a local agent on 127.0.0.1 (host backend), calibrated (`mimesys-agent calibrate`)
  2. targets: every real mix of bench/workloads/mixes.py (or those --mixes names, held-out
     kinds included) recorded by the agent
     (`mimesys-agent record`) for --mix-seconds, then run and recorded once more: the noise
     floor is the DTW between the two recordings of the same mix
  3. the host's solo profile (`mimesys forward profile`); with --collect-rounds R, the campaign
     is first collected on this agent up to R novelty rounds (`mimesys collect --rounds R`,
     resumed where it stopped; a new one gets the demo's settings): --max-round then picks
     its demo-sized part
  4. the campaign's samples (`mimesys dataset build`; rounds ≤ --max-round only, to stand for
     a shorter campaign), a small diffusion model trained and exported as the demo does, the
     forward model fitted (`mimesys forward fit`) and scored on held-out samples
  4b. for the diffusion ablation rows (`--methods` taught, taught-steered, steered): the
     dataset taught by the forward model (`mimesys dataset teach`: its chains and --teach-synthetic
     phase/burst traces planned by the inverse planner; the targets are never among them), a model
     trained on it as the base one is (same steps and size), each exported plain and carrying the
     forward model (`mimesys export --forward`): rows diffusion (the base model), steered (base +
     the forward model's guidance and finish), taught (taught data, no guidance), taught-steered,
     ddpo-forward (the taught model aligned by DDPO against the forward model on the synthetic
     traces, `mimesys align --forward --preset forward`, steered), ddpo-live (that model aligned
     further by DDPO with this host's agent executing the rollouts, `mimesys align --fleet`, on
     the synthetic traces, never the targets: what the forward model misses, steered)
  5. `mimesys evaluate` with every method, --replays times (seeds 0, 1, ...), scoring every
     metric the targets carry (on the device's scale; the target's own scale is in each run's
     `own_scale`, and which added windows the plan itself caused in `idle_windows_added`)
Phases apart: --prepare-only stops after step 4 (record on a quiet host, replay later);
--update METHODS replays only changed planners beside the earlier replays of the rest;
--summarize-only writes the summary again from what --out holds, with no agent.
Prints one JSON line: per method the mean DTW over every scored metric, per metric, per mix,
the added-activity count, next to the floor; on the target's own scale also each plan's replays
against each other (`replay_spread`: how far one plan lands from itself, the least difference
between methods these replays can tell), inverse − single per mix and, with ddpo-live, live DDPO's
held-out gain over the model it started from (`ddpo_live_gain`, beside the replay spread: a gain
inside the spread is none); writes it and a PNG beside the evaluations.
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO / "bench" / "workloads"))

from controller.commands.demo import DemoSettings, LocalAgent, write_campaign_config  # noqa: E402
from hostnoise import HostNoise, host_noise_pct  # noqa: E402

AGENT, CTL = [sys.executable, "-m", "agentd.cli"], [sys.executable, "-m", "controller.cli"]


def sh(cmd, **kw):
    print("$", " ".join(map(str, cmd)), file=sys.stderr, flush=True)
    return subprocess.run([str(c) for c in cmd], cwd=REPO, check=True, **kw)


def record_mix(agent: LocalAgent, mix: str, seconds: int, path: Path, max_foreign: float = 10.0,
               retries: int = 2) -> None:
    """Record the mix with the agent while holding the host's run lock: no mimesys run (of this
    or any other agent on the host) executes stressors next to the target being measured. Other
    work on the host does not take that lock: a recording where steal and processes outside the
    bench took more than `max_foreign` % of the CPUs in some 5-s interval is a different target
    (bench/hostnoise.py), so it is kept beside as <mix>.disturbed<j>.h5 and recorded again, up to
    `retries` times (the last one is kept whatever it saw, and says so)."""
    from mimesys.errors import HostBusy
    from agentd.hostlock import host_run_lock
    for j in range(retries + 1):
        deadline = time.monotonic() + 900
        while True:
            try:
                with host_run_lock(owner=f"fidelity_real.py recording {mix}"):
                    noise = _record(agent, mix, seconds, path)
                break
            except HostBusy:
                if time.monotonic() > deadline:
                    raise
                time.sleep(2.0)
        worst = host_noise_pct(noise)
        if worst <= max_foreign:
            return
        print(f"recording {mix}: steal + other processes took {worst:.1f} % of the CPUs in an interval "
              f"(> {max_foreign})" + (": recorded again" if j < retries else ": kept, disturbed"),
              file=sys.stderr, flush=True)
        if j < retries:
            path.replace(path.with_name(f"{path.stem}.disturbed{j}.h5"))


def _record(agent: LocalAgent, mix: str, seconds: int, path: Path) -> dict:
    """One recording of the mix; what else ran on the host meanwhile (HostNoise's figures)."""
    rec = subprocess.Popen([*AGENT, "record", "--config", str(agent.config_file), "--seconds", str(seconds),
                            "-o", str(path)], cwd=REPO)
    time.sleep(1.0)   # the recorder's first window starts before the mix does
    app = subprocess.Popen([sys.executable, str(REPO / "bench/workloads/mixes.py"), mix, "--seconds", str(seconds)],
                           cwd=REPO)
    noise = HostNoise([rec.pid, app.pid], interval=5)     # the agent is this process's child: its own tree
    noise.start()
    app.wait()
    ok = rec.wait() == 0
    noise.done.set()
    noise.join()
    if not ok or app.returncode != 0:
        raise SystemExit(f"recording {mix}: record exited {rec.returncode}, mix exited {app.returncode}")
    return {"steal_pct": noise.steal_pct, "foreign_pct": noise.foreign_pct}


def subset_dataset(src: Path, dst: Path, max_round: int | None) -> int:
    from controller.dataset import Dataset
    ds = Dataset.read(src)
    if max_round is not None and ds.round is not None:
        keep = ds.round <= max_round
        for f in ("prev_action", "action", "prev_obs", "obs", "obs_spread"):
            setattr(ds, f, getattr(ds, f)[keep])
        ds.round = ds.round[keep]
        ds.provenance = {**ds.provenance, "subset": f"rounds <= {max_round} of {src}"}
    ds.write(dst)
    return ds.S


def floor_scores(targets: dict, reruns: dict, peaks: dict, band: int) -> dict:
    from controller.evaluate.driver import EvalOptions, scored_metrics
    from controller.evaluate.dtw import compare
    out = {}
    for name, tr in targets.items():
        metrics = scored_metrics(tr, EvalOptions(outdir=Path(".")))
        out[name] = {m: r.distance for m, r in compare(tr, reruns[name], metrics, peaks=peaks, band=band).items()}
    return out


def own_floor(targets: dict, reruns: dict, band: int) -> dict:
    """The same mix run again, scored on the target's own scale: {mix: {per_core_cpu, resource_mean,
    idle_windows_added}} — the last the noise floor of the added-activity count: the host's own
    background (page-cache misses, journal commits) shows in windows where the target was idle."""
    from controller.evaluate.driver import EvalOptions, scored_metrics
    from controller.evaluate.own_scale import idle_window_additions, memory_range_score, own_scale_scores, resource_mean
    out = {}
    for name, tr in targets.items():
        cpu, res = resource_mean(own_scale_scores(tr, reruns[name], scored_metrics(tr, EvalOptions(outdir=Path("."))),
                                                  band=band))
        added = {r: e["added_windows"] for r, e in idle_window_additions(tr, reruns[name]).items()}
        out[name] = {"per_core_cpu": cpu, "resource_mean": res, "idle_windows_added": added,
                     "memory": memory_range_score(tr, reruns[name], band=band)}
    return out


def plan_attributed_additions(eval_dirs: list[Path], targets: dict) -> dict:
    """{method: {resource: windows}}: the added-activity windows where the plan itself drove the
    resource (controller/evaluate/own_scale.attribute_to_plan), from each run's plan and replay."""
    from mimesys.plan import Plan
    from mimesys.trace import Trace
    from controller.evaluate.own_scale import attribute_to_plan, idle_window_additions
    out: dict = {}
    for d in eval_dirs:
        for run in json.loads((d / "results.json").read_text())["runs"]:
            key = f"{run['trace']}__{run['method']}"
            if run.get("error") or run["trace"] not in targets or not (d / "executed" / f"{key}.h5").exists():
                continue
            add = attribute_to_plan(idle_window_additions(targets[run["trace"]], Trace.read(d / "executed" / f"{key}.h5")),
                                    Plan.read(d / "plans" / f"{key}.h5"))
            per = out.setdefault(run["method"], {})
            for r, e in add.items():
                per[r] = per.get(r, 0) + e.get("by_plan", 0)
    return out


def memory_of_run(d: Path, run: dict, targets: dict, band: int) -> dict | None:
    """Used memory of one replay scored now, from its executed trace and plan (so every replay
    of a summary is scored by the same code, whichever code its evaluation ran)."""
    from controller.evaluate.own_scale import memory_added_by_plan, memory_range_score
    from mimesys.plan import Plan
    from mimesys.trace import Trace
    key = f"{run['trace']}__{run['method']}"
    ex, plan = d / "executed" / f"{key}.h5", d / "plans" / f"{key}.h5"
    if run["trace"] not in targets or not ex.exists() or not plan.exists():
        return (run.get("own_scale") or {}).get("memory")
    score = memory_range_score(targets[run["trace"]], Trace.read(ex), band=band)
    return None if score is None else {**score, "added_by_plan": memory_added_by_plan(targets[run["trace"]],
                                                                                     Plan.read(plan))}


def own_scale_summary(eval_dirs: list[Path], floor: dict, targets: dict | None = None, band: int = 10) -> dict:
    """Per method, on the target's own scale (controller/evaluate/own_scale.py): per-core CPU and
    the CPU/disk/loopback mean per mix (mean over replays), their means over mixes, and the
    windows with activity added where the target was idle, per resource (summed over runs); used
    memory on the target's range, scored from the executed traces when `targets` are given."""
    per: dict = {}
    for d in eval_dirs:
        for run in json.loads((d / "results.json").read_text())["runs"]:
            own = run.get("own_scale")
            if not own:
                continue
            if targets is not None:
                own = {**own, "memory": memory_of_run(d, run, targets, band)}
            m = per.setdefault(run["method"], {"cpu": {}, "res": {}, "added": {}, "max_share": {}, "mem": {},
                                               "mem_added": 0, "mem_added_by_plan": 0})
            m["cpu"].setdefault(run["trace"], []).append(own["per_core_cpu"])
            m["res"].setdefault(run["trace"], []).append(own["resource_mean"])
            if own.get("memory"):
                m["mem"].setdefault(run["trace"], []).append(own["memory"]["dtw"])
                m["mem_added"] += own["memory"]["added_windows"]
                m["mem_added_by_plan"] += own["memory"].get("added_by_plan") or 0
            for r, e in (run.get("idle_windows_added") or {}).items():
                m["added"][r] = m["added"].get(r, 0) + e["added_windows"]
                m["max_share"][r] = max(m["max_share"].get(r, 0.0), e["max_added_share"])
    mean = lambda v: float(np.mean([x for x in v if x is not None])) if any(x is not None for x in v) else None  # noqa: E731
    out = {}
    for method, m in per.items():
        cpu = {t: mean(v) for t, v in m["cpu"].items()}
        res = {t: mean(v) for t, v in m["res"].items()}
        mem = {t: mean(v) for t, v in m["mem"].items()}
        out[method] = {"per_core_cpu": mean(list(cpu.values())), "resource_mean": mean(list(res.values())),
                       "memory": mean(list(mem.values())) if mem else None,
                       "by_mix": {t: {"per_core_cpu": cpu[t], "resource_mean": res[t], "memory": mem.get(t)}
                                  for t in cpu},
                       "idle_windows_added": m["added"], "max_added_share": m["max_share"],
                       "memory_windows_added": m["mem_added"], "memory_windows_added_by_plan": m["mem_added_by_plan"]}
    floor_mem = [f["memory"]["dtw"] for f in floor.values() if f.get("memory")]
    return {"methods": out,
            "floor": {"per_core_cpu": mean([f["per_core_cpu"] for f in floor.values()]),
                      "resource_mean": mean([f["resource_mean"] for f in floor.values()]),
                      "memory": mean(floor_mem) if floor_mem else None,
                      "idle_windows_added": {r: sum(f.get("idle_windows_added", {}).get(r, 0) for f in floor.values())
                                             for r in sorted({r for f in floor.values()
                                                              for r in f.get("idle_windows_added", {})})},
                      "by_mix": floor}}


def replay_spread(eval_dirs: list[Path], targets: dict, band: int) -> dict:
    """Per method, on the target's own scale: the replays of one plan scored against each other
    (per-core CPU, and the CPU/disk/loopback mean with each metric on the target's scale), per mix
    and over mixes. The same plan run twice on this host lands this far apart: a difference
    between methods below it is not one these replays can tell."""
    from controller.evaluate.driver import EvalOptions, scored_metrics
    from controller.evaluate.own_scale import own_scale_scores, resource_mean
    from mimesys.plan import Plan
    from mimesys.trace import Trace
    runs: dict = {}
    for d in eval_dirs:
        for f in sorted((d / "executed").glob("*.h5")):
            mix, _, method = f.stem.rpartition("__")
            if mix in targets and (d / "plans" / f.name).exists():
                runs.setdefault(method, {}).setdefault(mix, []).append((Trace.read(f), Plan.read(d / "plans" / f.name)))
    mean = lambda v: float(np.mean(v)) if v else None  # noqa: E731
    out = {}
    for method, by_mix in runs.items():
        cpu, res, same = {}, {}, True
        for mix, reps in by_mix.items():
            names = scored_metrics(targets[mix], EvalOptions(outdir=Path(".")))
            pc, pr = [], []
            for i in range(len(reps)):
                for j in range(i + 1, len(reps)):
                    (a, pa), (b, pb) = reps[i], reps[j]
                    same &= bool(np.array_equal(pa.compositions, pb.compositions))
                    c, r = resource_mean(own_scale_scores(a, b, names, band=band, scale_of=targets[mix]))
                    pc.append(c)
                    pr.append(r)
            if pc:
                cpu[mix], res[mix] = mean(pc), mean(pr)
        out[method] = {"per_core_cpu": mean(list(cpu.values())), "resource_mean": mean(list(res.values())),
                       "by_mix": {m: {"per_core_cpu": cpu[m], "resource_mean": res[m]} for m in cpu},
                       "plans_identical": same}
    return out


def method_difference(own: dict, a: str, b: str, key: str = "per_core_cpu") -> dict | None:
    """`key` (per_core_cpu, resource_mean) of method a minus method b, on the target's own scale:
    per mix (means over replays), their mean and its standard error over mixes."""
    ma, mb = own["methods"].get(a), own["methods"].get(b)
    if not ma or not mb:
        return None
    d = {t: ma["by_mix"][t][key] - mb["by_mix"][t][key] for t in ma["by_mix"]
         if t in mb["by_mix"] and ma["by_mix"][t][key] is not None and mb["by_mix"][t][key] is not None}
    if not d:
        return None
    v = np.array(list(d.values()))
    return {"methods": [a, b], "key": key, "by_mix": d, "mean": float(v.mean()),
            "standard_error": float(v.std(ddof=1) / np.sqrt(len(v))) if len(v) > 1 else None}


def live_gain(own: dict, spread: dict) -> dict | None:
    """Live DDPO's held-out gain: ddpo-forward − ddpo-live per key (positive: live DDPO lowered the
    error), beside the larger of the two plans' replay spreads; a gain inside it is reported as none."""
    out = {}
    for key in ("resource_mean", "per_core_cpu"):
        diff = method_difference(own, "ddpo-forward", "ddpo-live", key)
        if diff is None:
            return None
        noise = max(spread.get(m, {}).get(key) or 0.0 for m in ("ddpo-forward", "ddpo-live"))
        out[key] = {**diff, "replay_spread": noise, "gain": diff["mean"] if diff["mean"] > noise else None}
    return out


def combine_evaluations(base: Path, update: Path, methods: list[str], out: Path) -> Path:
    """An evaluation directory (results.json; plans/ and executed/ as links) with `methods` taken
    from `update` and every other method from `base`: one method replayed again after a change
    to it, beside the baselines' replays of the same targets."""
    b, u = (json.loads((d / "results.json").read_text()) for d in (base, update))
    doc = dict(b)
    doc["runs"] = [r for r in b["runs"] if r["method"] not in methods] + [r for r in u["runs"] if r["method"] in methods]
    doc["rows"] = [r for r in b["rows"] if r["method"] not in methods] + [r for r in u["rows"] if r["method"] in methods]
    doc["meta"] = {**b["meta"], "combined": {"base": str(base), "update": str(update), "methods": methods}}
    for sub in ("plans", "executed"):
        (out / sub).mkdir(parents=True, exist_ok=True)
        for src in (base, update):
            for f in (src / sub).glob("*.h5"):
                if (src is update) == (f.stem.rsplit("__", 1)[-1] in methods):
                    link = out / sub / f.name
                    link.unlink(missing_ok=True)
                    link.symlink_to(f.resolve())
    (out / "results.json").write_text(json.dumps(doc, indent=1))
    return out


def aggregate(eval_dirs: list[Path], floor: dict) -> dict:
    """Mean over mixes and replays, per method and metric; MEAN = mean over metrics."""
    per: dict = {}
    added: dict = {}
    for d in eval_dirs:
        doc = json.loads((d / "results.json").read_text())
        for r in doc["rows"]:
            if r["distance"] is not None:
                per.setdefault(r["method"], {}).setdefault(r["metric"], {}).setdefault(r["trace"], []).append(r["distance"])
        for run in doc["runs"]:
            added.setdefault(run["method"], []).append(len(run.get("added_activity") or {}))
    methods = {}
    for method, metrics in per.items():
        by_metric = {m: float(np.mean([np.mean(v) for v in traces.values()])) for m, traces in metrics.items()}
        by_mix = {}
        for m, traces in metrics.items():
            for t, v in traces.items():
                by_mix.setdefault(t, []).append(np.mean(v))
        cores = [v for m, v in by_metric.items() if m.startswith("cpu.util.core")]
        methods[method] = {"mean": float(np.mean(list(by_metric.values()))),
                           "per_core_cpu": float(np.mean(cores)) if cores else None,
                           "by_mix": {t: float(np.mean(v)) for t, v in by_mix.items()},
                           "added_activity_per_run": float(np.mean(added.get(method, [0]))),
                           "per_metric": by_metric}
    fm = {}
    for t, d in floor.items():
        for m, v in d.items():
            if np.isfinite(v):
                fm.setdefault(m, []).append(v)
    floor_metric = {m: float(np.mean(v)) for m, v in fm.items()}
    cores = [v for m, v in floor_metric.items() if m.startswith("cpu.util.core")]
    return {"methods": methods, "floor": {"mean": float(np.mean(list(floor_metric.values()))),
                                          "per_core_cpu": float(np.mean(cores)) if cores else None,
                                          "per_metric": floor_metric}}


def replay_prediction_error(fm_dir: Path, eval_dirs: list[Path], methods=("inverse", "select")) -> dict:
    """The forward model's predictions of the replayed plans against their measured replays: per
    metric the mean |predicted − measured| in units of the metric's full scale, corrected and
    first order, and per core the mean signed error (bias), over every run of `methods`."""
    from mimesys.forward.model import load_forward_model
    from mimesys.plan import Plan
    from mimesys.trace import Trace
    fm = load_forward_model(fm_dir)
    errs: dict = {"corrected": {}, "first_order": {}}
    bias: dict = {}
    runs = 0
    for d in eval_dirs:
        for run in json.loads((d / "results.json").read_text())["runs"]:
            if run["method"] not in methods or run.get("error"):
                continue
            key = next((p.stem for p in (d / "executed").glob("*.h5")
                        if p.stem.endswith("__" + run["method"]) and p.stem.startswith(run["trace"])), None)
            if key is None or not (d / "plans" / f"{key}.h5").exists():
                continue
            plan, meas = Plan.read(d / "plans" / f"{key}.h5"), Trace.read(d / "executed" / f"{key}.h5")
            T = min(plan.T, meas.T)
            if T < 2:
                continue
            runs += 1
            got = meas.select(fm.metric_names)[:T]
            for label, first_only in (("corrected", False), ("first_order", True)):
                pred = fm.predict_plan(plan.compositions[:T], first_order_only=first_only)[0]
                e = (pred - got) / fm.scales
                for n, name in enumerate(fm.metric_names):
                    col = e[:, n][np.isfinite(e[:, n])]
                    if col.size:
                        errs[label].setdefault(name, []).append(float(np.mean(np.abs(col))))
                        if not first_only and name.startswith("cpu.util.core"):
                            bias.setdefault(f"{run['method']}:{run['trace']}:{name}", float(np.mean(col)))
    mean = {label: {k: float(np.mean(v)) for k, v in per.items()} for label, per in errs.items()}
    return {"runs": runs, "mean_abs_error_full_scale": mean, "cpu_bias": bias,
            "median_over_metrics": {label: float(np.median(list(v.values()))) if v else None
                                    for label, v in mean.items()}}


def plot(summary: dict, path: Path, title: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    methods = sorted(summary["methods"], key=lambda m: summary["methods"][m]["mean"])
    metrics = list(summary["floor"]["per_metric"])
    own = summary.get("own_scale")
    memory = own is not None and own["floor"].get("memory") is not None
    rows = 2 + bool(own) + memory
    fig, axes = plt.subplots(rows, 1, figsize=(12, 3.7 * rows))
    axes[0].bar(methods + ["noise floor"], [summary["methods"][m]["mean"] for m in methods] + [summary["floor"]["mean"]],
                color=["C0"] * len(methods) + ["grey"])
    axes[0].set_ylabel("mean normalized DTW\n(every scored metric)")
    axes[0].set_title(title)
    x = np.arange(len(metrics))
    w = 0.8 / (len(methods) + 1)
    for i, m in enumerate(methods):
        axes[1].bar(x + i * w, [summary["methods"][m]["per_metric"].get(k, np.nan) for k in metrics], w, label=m)
    axes[1].bar(x + len(methods) * w, [summary["floor"]["per_metric"][k] for k in metrics], w, label="floor",
                color="grey")
    axes[1].set_xticks(x + 0.4, metrics, rotation=70, fontsize=7)
    axes[1].legend(fontsize=7, ncol=4)
    axes[1].set_ylabel("DTW per metric")
    if own:
        om = sorted(own["methods"], key=lambda m: own["methods"][m]["resource_mean"] or 9)
        vals = [own["methods"][m]["resource_mean"] for m in om] + [own["floor"]["resource_mean"]]
        bars = axes[2].bar(om + ["noise floor"], vals, color=["C1"] * len(om) + ["grey"])
        for b, m in zip(bars, om):
            added = sum(own["methods"][m]["idle_windows_added"].values())
            by_plan = own["methods"][m].get("idle_windows_added_by_plan")
            note = f"\n({sum(by_plan.values())} where the plan drove it)" if by_plan is not None else ""
            axes[2].annotate(f"{added} idle windows\nwith added activity{note}",
                             (b.get_x() + b.get_width() / 2, b.get_height()), ha="center", va="bottom", fontsize=7)
        axes[2].set_ylabel("on the target's own scale\n(per-core CPU, disk, loopback)")
    if memory:
        mm = [m for m in sorted(own["methods"], key=lambda m: own["methods"][m].get("memory") or 9)
              if own["methods"][m].get("memory") is not None]
        bars = axes[3].bar(mm + ["noise floor"], [own["methods"][m]["memory"] for m in mm] + [own["floor"]["memory"]],
                           color=["C2"] * len(mm) + ["grey"])
        for b, m in zip(bars, mm):
            axes[3].annotate(f"{own['methods'][m]['memory_windows_added']} windows above the target's least where "
                             f"it rested\n({own['methods'][m]['memory_windows_added_by_plan']} held by the plan)",
                             (b.get_x() + b.get_width() / 2, b.get_height()), ha="center", va="bottom", fontsize=7)
        axes[3].set_ylabel("used memory, DTW on\nthe target's range")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def memory_overlay(eval_dirs: list[Path], targets: dict, reruns: dict, path: Path) -> None:
    """Used memory of each mix: the target and its rerun in black, each method's replays in its colour."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from mimesys.trace import Trace
    mixes = [m for m in targets if "mem.used_B" in targets[m].names]
    if not mixes:
        return
    fig, axes = plt.subplots(len(mixes), 1, figsize=(10, 2.6 * len(mixes)), squeeze=False)
    for ax, mix in zip(axes[:, 0], mixes):
        ax.plot(targets[mix].column("mem.used_B") / 2**20, color="black", lw=2, label="target")
        ax.plot(reruns[mix].column("mem.used_B") / 2**20, color="black", lw=1, ls=":", label="the mix again")
        colours: dict = {}
        for d in eval_dirs:
            for f in sorted((d / "executed").glob(f"{mix}__*.h5")):
                method = f.stem.rpartition("__")[2]
                c = colours.setdefault(method, f"C{len(colours)}")
                ax.plot(Trace.read(f).column("mem.used_B") / 2**20, color=c, lw=1,
                        label=method if d == eval_dirs[0] else None)
        ax.set_title(mix, fontsize=9)
        ax.set_ylabel("used MiB")
        ax.legend(fontsize=7, ncol=5, loc="upper right")
    axes[-1, 0].set_xlabel("window (s)")
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=Path("bench-out/fidelity"))
    ap.add_argument("--campaign", type=Path, required=True,
                    help="A campaign directory on this host (created with the demo's settings by --collect-rounds).")
    ap.add_argument("--max-round", type=int, default=None, help="Use only rounds ≤ R (a shorter campaign).")
    ap.add_argument("--collect-rounds", type=int, default=None,
                    help="First continue the campaign on this bench's agent up to R novelty rounds.")
    ap.add_argument("--label", default="campaign")
    ap.add_argument("--train-steps", type=int, default=DemoSettings.train_steps,
                    help="Optimizer steps of the diffusion model (the demo's by default; more for a longer campaign).")
    ap.add_argument("--train-batch", type=int, default=DemoSettings.train_batch, help="Training batch size.")
    ap.add_argument("--mix-seconds", type=int, default=60)
    ap.add_argument("--mixes", default="",
                    help="Mixes to record and replay (comma-separated; bench/workloads/mixes.py --list): the five "
                         "by default; held-out kinds only when named.")
    ap.add_argument("--replays", type=int, default=2)
    ap.add_argument("--placement", choices=["pinned", "free", "yield"], default="pinned",
                    help="agent.placement of the replaying agent; free: the runner's threads move among the CPUs, "
                         "yield: pinned until another process keeps one waiting (evaluations then go to "
                         "eval-rep<R>-<placement>, the summary to fidelity-<placement>.json)")
    ap.add_argument("--methods", default="single,nearest,knn,diffusion,inverse,select",
                    help="Rows: single, nearest, knn, diffusion (alias model), inverse, inverse-first-order, select, "
                         "and the diffusion ablation steered, taught, taught-steered, ddpo-forward, ddpo-live.")
    ap.add_argument("--ddpo-epochs", type=int, default=30, help="Epochs of DDPO against the forward model.")
    ap.add_argument("--ddpo-live-epochs", type=int, default=6,
                    help="Epochs of DDPO on this host's agent (ddpo-live; each executes 8 rollouts of 9 windows).")
    ap.add_argument("--teach-synthetic", type=int, default=200,
                    help="Synthetic phase/burst traces the forward model teaches on (the taught rows).")
    ap.add_argument("--taught-share", type=float, default=0.5,
                    help="Share of each training batch from taught samples (the taught rows).")
    ap.add_argument("--band", type=int, default=10)
    ap.add_argument("--update", default="",
                    help="Methods (comma-separated) to replay again after a change to them, into eval-rep<R>-update; "
                         "the summary takes them from there and every other method from eval-rep<R>.")
    ap.add_argument("--summarize-only", action="store_true",
                    help="No agent, nothing replayed or refitted: summarize the replays already in --out again.")
    ap.add_argument("--prepare-only", action="store_true",
                    help="Record, profile, collect and fit, then stop: the replays can run later (the host quiet again).")
    return ap.parse_args()


@dataclass
class Bench:
    """What every phase of one bench run shares."""
    args: argparse.Namespace
    mixes: list[str]
    out: Path
    agent: LocalAgent | None
    t_start: float = field(default_factory=time.monotonic)

    def needs_agent(self, what: str) -> LocalAgent:
        if self.agent is None:
            raise SystemExit(f"--summarize-only: {what} is missing under {self.out}; run the bench without it first")
        return self.agent

    @property
    def targets_dir(self) -> Path:
        return self.out / "targets"


@dataclass
class Models:
    """The dataset, the forward model and the diffusion exports one bench run replays."""
    work: Path
    ds: Path
    samples: int
    onnx: Path
    fm: Path
    score: str
    wanted: list[str]
    ablation: dict


def check_mixes(args) -> list[str]:
    from mixes import HELD_OUT, MEMORY, MIXES, missing_tools
    mixes = [m for m in args.mixes.split(",") if m] or list(MIXES)
    unknown = sorted(set(mixes) - set(MIXES) - set(HELD_OUT) - set(MEMORY))
    if unknown:
        raise SystemExit(f"--mixes: unknown {', '.join(unknown)}; known: {', '.join([*MIXES, *HELD_OUT, *MEMORY])}")
    held_out = bool(set(mixes) & (set(HELD_OUT) | set(MEMORY)))
    if missing_tools(held_out):
        sh(["apt-get", "install", "-y", "-qq", *missing_tools(held_out)])
    return mixes


def record_targets(b: Bench) -> Path:
    """Calibrate the agent, record every mix twice, profile the host (each kept once made); the profile."""
    args, out, agent = b.args, b.out, b.agent
    if agent is not None:
        # a resumed run reuses the calibration it kept (calibrate --import checks the hardware and
        # the catalog), so the forward model it fitted stays the agent's; else it measures one
        kept = out / "calibration.json"
        if not (kept.exists() and (out / "profile.h5").exists() and subprocess.run(
                [*AGENT, "calibrate", "--config", str(agent.config_file), "--import", str(out)], cwd=REPO).returncode == 0):
            sh([*AGENT, "calibrate", "--config", agent.config_file])
            # kept beside the results (bench/colocation_real.py replays these plans with it), with
            # the solo profile measured with it: one measurement, which a resumed run imports
            kept.write_bytes((agent.tmp / "state" / "calibration.json").read_bytes())
            (out / "profile.h5").write_bytes((agent.tmp / "state" / "profile.h5").read_bytes())
    b.targets_dir.mkdir(exist_ok=True)
    for mix in b.mixes:
        for suffix in ("", ".rerun"):
            p = b.targets_dir / f"{mix}{suffix}.h5"
            if not p.exists():
                record_mix(b.needs_agent(str(p)), mix, args.mix_seconds, p)
    profile = out / "profile.h5"
    if not profile.exists():
        sh([*CTL, "forward", "profile", "--agent", b.needs_agent(str(profile)).url, "--token-file", agent.token_file,
            "-o", profile])
    if args.collect_rounds is not None and agent is not None:
        t0 = time.monotonic()
        write_campaign_config(args.campaign, DemoSettings())   # a new campaign: the demo's settings
        sh([*CTL, "collect", args.campaign, "--rounds", args.collect_rounds, "--fleet", agent.write_fleet()])
        print(f"collect to round {args.collect_rounds}: {time.monotonic() - t0:.0f} s", file=sys.stderr)
    return profile


def build_models(b: Bench, profile: Path) -> Models:
    """The dataset (rounds ≤ --max-round), the base diffusion model, the forward model and its score."""
    args, agent = b.args, b.agent
    work = b.out / args.label
    work.mkdir(exist_ok=True)
    full, ds = work / "dataset-full.h5", work / "dataset.h5"
    sh([*CTL, "dataset", "build", args.campaign, "-o", full])
    samples = subset_dataset(full, ds, args.max_round)
    s = DemoSettings()
    onnx, fm = work / "model-onnx", work / "forward"
    wanted = ["diffusion" if m == "model" else m for m in args.methods.split(",")]
    if not (onnx / "manifest.json").exists() and {"diffusion", "select", "steered"} & set(wanted):
        sh([*CTL, "train", ds, "--out", work / "model", "--steps", args.train_steps, "--batch-size", args.train_batch,
            "--hidden", s.train_hidden, "--blocks", s.train_blocks, "--device", "cpu", "--seed", s.seed,
            "--overwrite"])
        sh([*CTL, "export", work / "model", "--onnx", onnx, "--overwrite"])
    if agent is not None or not (fm / "manifest.json").exists():
        b.needs_agent(str(fm))
        # the calibration just made: each stressor's CPU share as this runner measures it
        # (corrects what an older profile recorded)
        cal = agent.tmp / "state" / "calibration.json"
        sh([*CTL, "forward", "fit", ds, "--profile", profile, "-o", fm, "--overwrite",
            *(["--calibration", cal] if cal.exists() else [])])
        score = subprocess.run([*CTL, "forward", "score", str(fm), str(ds), "--json"], cwd=REPO, check=True,
                               capture_output=True, text=True).stdout
        (work / "forward-score.json").write_text(score)
    taught_model, aligned, live = work / "model-taught", work / "model-ddpo-forward", work / "model-ddpo-live"
    ablation = {"steered": (work / "model", work / "model-onnx-steered", True),
                "taught": (taught_model, work / "model-onnx-taught", False),
                "taught-steered": (taught_model, work / "model-onnx-taught-steered", True),
                "ddpo-forward": (aligned, work / "model-onnx-ddpo-forward", True),
                "ddpo-live": (live, work / "model-onnx-ddpo-live", True)}
    return Models(work, ds, samples, onnx, fm, (work / "forward-score.json").read_text(), wanted, ablation)


def build_ablation(b: Bench, m: Models) -> None:
    """The diffusion ablation's models (taught, DDPO against the forward model) and their exports."""
    args, work, s = b.args, m.work, DemoSettings()
    taught_ds = work / "dataset-taught.h5"
    taught_model, aligned, live = (m.ablation[row][0] for row in ("taught", "ddpo-forward", "ddpo-live"))
    teaching = json.loads((work / "teaching.json").read_text()) if (work / "teaching.json").exists() else {}
    synthetic = work / "synthetic-targets"
    if {"taught", "taught-steered", "ddpo-forward", "ddpo-live"} & set(m.wanted) and \
            not (taught_model / "model.pt").exists():
        t0 = time.monotonic()
        sh([*CTL, "dataset", "teach", m.ds, "--forward", m.fm, "--synthetic", args.teach_synthetic,
            "--write-synthetic", synthetic, "-o", taught_ds])
        teaching["teach_s"] = round(time.monotonic() - t0, 1)
        t0 = time.monotonic()
        sh([*CTL, "train", taught_ds, "--out", taught_model, "--steps", args.train_steps, "--batch-size",
            args.train_batch, "--hidden", s.train_hidden, "--blocks", s.train_blocks, "--device", "cpu",
            "--seed", s.seed, "--taught-share", args.taught_share, "--overwrite"])
        teaching["train_s"] = round(time.monotonic() - t0, 1)
        (work / "teaching.json").write_text(json.dumps(teaching))
    if {"ddpo-forward", "ddpo-live"} & set(m.wanted) and not (aligned / "model.pt").exists():
        t0 = time.monotonic()
        sh([*CTL, "align", taught_model, "--traces", *sorted(synthetic.glob("*.h5"))[:32], "--forward", m.fm,
            "--preset", "forward", "--epochs", args.ddpo_epochs, "--out", aligned, "--quiet"])
        teaching["ddpo_forward_s"] = round(time.monotonic() - t0, 1)
        (work / "teaching.json").write_text(json.dumps(teaching))
    if "ddpo-live" in m.wanted and not (live / "model.pt").exists():
        # Live: the agent executes every rollout (2 segments × 4 noises × (8 + 1) windows an epoch),
        # sim-fast's step sizes; resumable from its work directory like any align run.
        t0 = time.monotonic()
        sh([*CTL, "align", aligned, "--traces", *sorted(synthetic.glob("*.h5"))[:8],
            "--fleet", b.needs_agent(str(live)).write_fleet(), "--preset", "sim-fast",
            "--set", "segments_per_epoch=2", "--epochs", args.ddpo_live_epochs, "--out", live, "--quiet"])
        teaching["ddpo_live_s"] = round(time.monotonic() - t0, 1)
        (work / "teaching.json").write_text(json.dumps(teaching))
    for row, (model_dir, export_dir, steer) in m.ablation.items():
        if row in m.wanted and not (export_dir / "manifest.json").exists():
            sh([*CTL, "export", model_dir, "--onnx", export_dir, "--overwrite", *(["--forward", m.fm] if steer else [])])


def placed(args) -> str:
    """The suffix of the evaluations and summary of replays made with a placement other than pinned."""
    return "" if args.placement == "pinned" else f"-{args.placement}"


def replay_all(b: Bench, m: Models) -> tuple[list[Path], list[Path], list[str]]:
    """Every method's plan for every target, --replays times (and --update's methods again):
    (the targets, the evaluation directories, the updated methods)."""
    args, agent = b.args, b.agent
    specs = {"single": "single", "nearest": "nearest", "knn": "knn", "diffusion": f"diffusion={m.onnx}",
             **{row: f"{row}={export_dir}" for row, (_, export_dir, _) in m.ablation.items()},
             "inverse": f"inverse=inverse:{m.fm}", "inverse-first-order": f"inverse-first-order=inverse-first-order:{m.fm}",
             "select": f"select=select:{m.onnx},{m.fm}"}
    methods = [specs[x] for x in m.wanted]
    targets = [p for p in sorted(b.targets_dir.glob("*.h5")) if not p.name.endswith(".rerun.h5") and p.stem in b.mixes]

    def evaluate(d: Path, method_specs: list[str], seed: int) -> None:
        sh([*CTL, "evaluate", "--agent", b.needs_agent(str(d)).url, "--token-file", agent.token_file, "--scale", "device",
            *[a for t in targets for a in ("--trace", t)], *[a for x in method_specs for a in ("--method", x)],
            "--dataset", m.ds, "--seed", seed, "--band", args.band, "-o", d])

    eval_dirs = []
    for r in range(args.replays):
        d = m.work / f"eval-rep{r}{placed(args)}"
        done = (d / "results.json").exists() and \
            not any(x.get("error") for x in json.loads((d / "results.json").read_text())["runs"])
        if not done:
            evaluate(d, methods, r)
        eval_dirs.append(d)
    update = [x for x in args.update.split(",") if x]
    for r, d in enumerate(list(eval_dirs) if update else []):
        u = m.work / f"eval-rep{r}{placed(args)}-update"
        if not (u / "results.json").exists():
            evaluate(u, [specs[x] for x in update], r)
        eval_dirs[r] = combine_evaluations(d, u, [specs[x].partition("=")[0] for x in update],
                                           m.work / f"eval-rep{r}{placed(args)}-combined")
    return targets, eval_dirs, update


def report(summary: dict) -> None:
    """The summary's figures a person reads first, on stderr."""
    own = summary["own_scale"]
    for method, spread in own["replay_spread"].items():
        own_m = own["methods"].get(method, {})
        print(f"{method}: per-core CPU {own_m.get('per_core_cpu')} vs the target, {spread['per_core_cpu']} between "
              f"its replays; resource mean {own_m.get('resource_mean')} vs {spread['resource_mean']}", file=sys.stderr)
    for method, own_m in own["methods"].items():
        if own_m.get("memory") is not None:
            print(f"{method}: used memory on the target's range {own_m['memory']:.4f} (floor "
                  f"{own['floor']['memory']}), windows of memory added "
                  f"{own_m['memory_windows_added']} (by the plan {own_m['memory_windows_added_by_plan']})",
                  file=sys.stderr)
    diff = own["inverse_minus_single"]
    if diff:
        print(f"per-core CPU, inverse − single: {diff['mean']:+.5f} (standard error over mixes "
              f"{diff['standard_error']})", file=sys.stderr)
    for key, g in (own.get("ddpo_live_gain") or {}).items():
        print(f"live DDPO, {key}: ddpo-forward − ddpo-live {g['mean']:+.4f} (standard error over mixes "
              f"{g['standard_error']}), replay spread {g['replay_spread']:.4f}: "
              f"{'a gain' if g['gain'] is not None else 'no gain beyond the spread'}", file=sys.stderr)
    pe = summary["replay_prediction"]
    print(f"forward model on the replayed plans ({pe['runs']} runs): mean |predicted − measured| / full scale, "
          f"median over metrics: corrected {pe['median_over_metrics']['corrected']}, first order "
          f"{pe['median_over_metrics']['first_order']}", file=sys.stderr)
    for name in sorted(pe["mean_abs_error_full_scale"]["corrected"]):
        print(f"  {name:28s} corrected {pe['mean_abs_error_full_scale']['corrected'][name]:.4f}   first order "
              f"{pe['mean_abs_error_full_scale']['first_order'].get(name, float('nan')):.4f}", file=sys.stderr)


def summarize(b: Bench, m: Models, targets: list[Path], eval_dirs: list[Path], update: list[str]) -> dict:
    """The summary JSON, its PNGs and the lines on stderr, from what the evaluations left."""
    from mimesys.trace import Trace
    args, work = b.args, m.work
    peaks = json.loads((eval_dirs[0] / "results.json").read_text())["meta"]["peaks_used_for_scale"]
    tr = {p.stem: Trace.read(p) for p in targets}
    re = {p.stem: Trace.read(b.targets_dir / f"{p.stem}.rerun.h5") for p in targets}
    summary = aggregate(eval_dirs, floor_scores(tr, re, peaks, args.band))
    summary["own_scale"] = own_scale_summary(eval_dirs, own_floor(tr, re, args.band), tr, args.band)
    for method, per in plan_attributed_additions(eval_dirs, tr).items():
        summary["own_scale"]["methods"].get(method, {})["idle_windows_added_by_plan"] = per
    summary["own_scale"]["replay_spread"] = replay_spread(eval_dirs, tr, args.band)
    summary["own_scale"]["inverse_minus_single"] = method_difference(summary["own_scale"], "inverse", "single")
    summary["own_scale"]["ddpo_live_gain"] = live_gain(summary["own_scale"], summary["own_scale"]["replay_spread"])
    summary["replay_prediction"] = replay_prediction_error(m.fm, eval_dirs)
    report(summary)
    summary.update({"bench": "fidelity_real", "label": args.label, "samples": m.samples,
                    "max_round": args.max_round, "mixes": list(tr), "mix_seconds": args.mix_seconds,
                    "replays": args.replays, "placement": args.placement, "train_steps": args.train_steps, "simulated": False,
                    "updated_methods": update, "eval_dirs": [str(d) for d in eval_dirs],
                    "teaching": json.loads((work / "teaching.json").read_text())
                    if (work / "teaching.json").exists() else None,
                    "forward_score": {k: v for k, v in json.loads(m.score).items() if k != "metrics"},
                    "elapsed_s": round(time.monotonic() - b.t_start, 1)})
    (work / f"fidelity{placed(args)}.json").write_text(json.dumps(summary, indent=1))
    plot(summary, work / f"fidelity{placed(args)}.png", f"real mixes on this host, {args.label} ({m.samples} samples)")
    memory_overlay(eval_dirs, tr, re, work / f"memory{placed(args)}.png")
    return summary


def main() -> None:
    args = parse_args()
    # A stop (SIGTERM) unwinds like ^C: the bench's agent is stopped, its temporary directory removed.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    mixes = check_mixes(args)
    args.out.mkdir(parents=True, exist_ok=True)
    b = Bench(args, mixes, args.out, None if args.summarize_only else LocalAgent(args.out / "agent", placement=args.placement))
    if b.agent is not None:
        b.agent.start()
    try:
        models = build_models(b, record_targets(b))
        build_ablation(b, models)
        if args.prepare_only:
            print(f"prepared in {time.monotonic() - b.t_start:.0f} s: targets, profile, campaign, forward model",
                  file=sys.stderr)
            return
        print(json.dumps(summarize(b, models, *replay_all(b, models))))
    finally:
        if b.agent is not None:
            b.agent.stop()


if __name__ == "__main__":
    main()
