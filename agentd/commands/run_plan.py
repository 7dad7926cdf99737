"""`mimesys-agent run-plan plan.h5`: execute a plan on this host with mimesys-runner,
show progress, and print planned vs achieved time per stressor (optionally as JSON)."""

from __future__ import annotations

import asyncio
import functools
import json
from pathlib import Path

import click
import numpy as np

from mimesys.cliopts import json_option, progress_option
from mimesys.errors import MimesysError
from mimesys.exitstatus import WORKLOAD, click_error

from mimesys.hostpaths import online_cpus, parse_cpu_list


def summarize(result, catalog, window_ns: int, plan=None) -> dict:
    """Planned vs achieved per stressor, and the timing figures, from a RunnerRecord. With the
    plan: also what it compiled to (compiled_s), so what the hold changed shows — a held compute
    tail as the runner sized it, IO it shortened so the tail fits (planned_s is what the runner
    set out to run)."""
    from ..schedule import durations_ns
    wins = result.windows
    M = len(catalog)
    compiled = np.zeros(M, np.int64)
    planned = np.zeros(M, np.int64)
    ran = np.zeros(M, np.int64)
    ops = np.zeros(M, np.int64)
    nbytes = np.zeros(M, np.int64)
    errors = []
    for w in wins:
        if plan is not None:
            compiled += durations_ns(plan.compositions[w.window], window_ns).sum(axis=1)
        planned += w.planned_ns.sum(axis=1)
        ran += w.ran_ns.sum(axis=1)
        ops += w.ops.sum(axis=1)
        nbytes += w.bytes.sum(axis=1)
        mask = w.planned_ns > 0      # one segment per (stressor, thread) and window
        errors.append(np.abs(w.ran_ns[mask] - w.planned_ns[mask]))
    err = np.concatenate(errors) if errors else np.zeros(0, np.int64)
    lateness = np.array([(w.thread_start_ns - w.planned_start_ns).max() for w in wins]) if wins else np.zeros(0)
    stressors = {}
    for m, s in enumerate(catalog.stressors):
        if planned[m] == 0 and ran[m] == 0:
            continue
        stressors[s.name] = {"class": s.resource_class, "planned_s": planned[m] / 1e9, "ran_s": ran[m] / 1e9,
                             "ops": int(ops[m]), "bytes": int(nbytes[m]),
                             "bytes_per_s": float(nbytes[m] / ran[m] * 1e9) if ran[m] else 0.0}
        if plan is not None:
            stressors[s.name]["compiled_s"] = compiled[m] / 1e9
    hold = None
    if plan is not None:
        cpu = np.array([s.resource_class == "cpu" for s in catalog.stressors])
        delta = (planned - compiled) / 1e9
        hold = {"compute_resized_s": float(delta[cpu].sum()), "other_shortened_s": float(-delta[~cpu].sum())}
    memory = None
    if plan is not None and plan.mem_held_B is not None and wins:
        want = np.array([plan.mem_held_B[w.window] for w in wins], np.float64)
        got = np.array([w.held_B for w in wins], np.float64)
        memory = {"planned_mean_B": float(want.mean()), "held_mean_B": float(got.mean()),
                  "held_max_B": float(got.max()), "windows_short": int((got < want - (1 << 20)).sum())}
    return {
        "windows": len(wins),
        "exit": result.exit.status if result.exit else None,
        "exit_detail": result.exit.detail if result.exit else "",
        "stressors": stressors,
        "timing": {
            "segments": int(err.size),
            "p50_segment_error_ms": float(np.percentile(err, 50) / 1e6) if err.size else None,
            "p99_segment_error_ms": float(np.percentile(err, 99) / 1e6) if err.size else None,
            "max_segment_error_ms": float(err.max() / 1e6) if err.size else None,
            "max_start_lateness_ms": float(lateness.max() / 1e6) if lateness.size else None,
            "drift_ms": float(lateness[-1] / 1e6) if lateness.size else None,
        },
        "notes": dict(result.notes),
        "hold": hold,
        "memory_held": memory,
    }


async def _run(plan, cfg, seed, repetitions, warmup, progress):
    from ..runner import run_to_completion
    return await run_to_completion(plan, cfg, on_window=lambda ev: progress.update(1), seed=seed,
                                   repetitions=repetitions, warmup_windows=warmup)


@click.command("run-plan")
@click.argument("plan_path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--config", "config_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Agent config whose agent.cpus, scratch budget and replay area are the defaults below.")
@click.option("--scratch-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Directory for the disk stressors' files (default: a private one in the config's replay area "
                   "with --config, else /var/tmp; files are unlinked at creation).")
@click.option("--scratch-budget-mib", type=click.IntRange(1), default=None,
              help="Most scratch space the disk stressors may use; the runner refuses plans that need more "
                   "[agent.scratch_budget_mib with --config, else 2048].")
@click.option("--cpus", default=None, help="CPUs for the plan's threads, e.g. 0-1 (default: agent.cpus with "
                                           "--config, else the online CPUs).")
@click.option("--seed", type=int, default=None, help="Segment-order seed (default: the plan's).")
@click.option("--repetitions", type=click.IntRange(1), default=1, show_default=True,
              help="Run the whole plan this many times back to back.")
@click.option("--warmup-windows", type=click.IntRange(0), default=0, show_default=True,
              help="Windows of the first composition run before window 0, not reported.")
@click.option("--udp-sink", default="127.0.0.1:9", show_default=True, help="HOST:PORT for net_udp_sink.")
@click.option("--report", "report_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the summary as JSON here.")
@progress_option
@json_option
@click.option("--catalog", "catalog_path", type=click.Path(exists=True, dir_okay=False), default=None,
              help="Stressor catalog (default: the shipped one).")
def run_plan(plan_path, config_path, scratch_dir, scratch_budget_mib, cpus, seed, repetitions, warmup_windows, udp_sink,
             report_path, catalog_path, progress, as_json):
    """Execute PLAN_PATH (HDF5) on this host and report planned vs achieved time per stressor."""
    from tqdm import tqdm

    from mimesys.catalog import load_catalog
    from mimesys.plan import Plan
    from ..runner import RunnerConfig

    # --json: stdout is the summary alone; the human lines go to stderr.
    say = functools.partial(click.echo, err=as_json)
    private = None
    try:
        cfg_agent = None
        if config_path is not None:
            from ..config import load_config
            cfg_agent = load_config(config_path).agent
        catalog = load_catalog(catalog_path)
        plan = Plan.read(plan_path)
        cpu_list = tuple(parse_cpu_list(cpus)) if cpus else (
            cfg_agent.resolved_cpus() if cfg_agent else tuple(online_cpus()))
        if scratch_budget_mib is None:
            scratch_budget_mib = cfg_agent.scratch_budget_mib if cfg_agent else 2048
        if scratch_dir is None and cfg_agent is not None:
            from ..replayarea import private_scratch
            scratch_dir = private = private_scratch(cfg_agent)
        plan.validate(catalog)
        if scratch_dir is not None:
            scratch_dir.mkdir(parents=True, exist_ok=True)
        cfg = RunnerConfig(cpus=cpu_list, scratch_dir=str(scratch_dir) if scratch_dir else None,
                           scratch_budget_bytes=scratch_budget_mib << 20, udp_sink=udp_sink,
                           catalog_path=catalog_path)
        total = plan.T * repetitions
        say(f"{plan_path}: {plan.T} windows x {plan.window_s:g} s, {plan.K} threads on CPUs "
                   f"{','.join(map(str, cpu_list))}, {repetitions} repetition(s), {warmup_windows} warm-up window(s)")
        with tqdm(total=total, unit="window", desc="run-plan", disable=not progress) as bar:
            result = asyncio.run(_run(plan, cfg, seed, repetitions, warmup_windows, bar))
    except ValueError as e:
        raise click.ClickException(f"--cpus {cpus!r}: {e}") from None
    except MimesysError as e:
        raise click_error(e) from None
    except KeyboardInterrupt:
        raise click.ClickException("interrupted; the runner was stopped and its scratch files removed") from None
    finally:
        if private is not None:
            import shutil
            shutil.rmtree(private, ignore_errors=True)

    summary = summarize(result, catalog, int(round(plan.window_s * 1e9)), plan)
    summary.update(plan=str(plan_path), threads=plan.K, window_s=plan.window_s, repetitions=repetitions,
                   seed=plan.seed if seed is None else seed, cpus=list(cpu_list))
    for name, note in summary["notes"].items():
        say(f"note: {name}: {note}")
    say(f"{'stressor':28s} {'planned s':>10s} {'ran s':>10s} {'ran/plan':>9s} {'MB/s':>10s}")
    for name, s in summary["stressors"].items():
        ratio = s["ran_s"] / s["planned_s"] if s["planned_s"] else float("nan")
        say(f"{name:28s} {s['planned_s']:10.3f} {s['ran_s']:10.3f} {ratio:9.4f} {s['bytes_per_s'] / 1e6:10.1f}")
    t = summary["timing"]
    if t["segments"]:
        say(f"segments: {t['segments']}, |ran - planned| p50 {t['p50_segment_error_ms']:.3f} ms, "
                   f"p99 {t['p99_segment_error_ms']:.3f} ms, max {t['max_segment_error_ms']:.3f} ms; "
                   f"window start lateness max {t['max_start_lateness_ms']:.3f} ms, last {t['drift_ms']:.3f} ms")
    h = summary["hold"]
    if plan.core_busy_target is not None and h is not None:
        say(f"hold (the plan names each core's busy fraction): compute tails {h['compute_resized_s']:+.3f} s "
            f"against the compiled plan, other stressors shortened {h['other_shortened_s']:.3f} s so the tails fit")
    mem = summary["memory_held"]
    if mem is not None:
        say(f"memory held: mean {mem['held_mean_B'] / 2**20:.0f} MiB (planned {mem['planned_mean_B'] / 2**20:.0f}), "
            f"most {mem['held_max_B'] / 2**20:.0f} MiB, {mem['windows_short']} window(s) short of the plan")
    say(f"runner: {summary['exit']} {summary['exit_detail']}".rstrip())
    if report_path:
        from mimesys.fsutil import atomic_write_text
        atomic_write_text(report_path, json.dumps(summary, indent=1) + "\n")   # often run as root
        say(f"report: {report_path}")
    if as_json:
        click.echo(json.dumps(summary, default=str))
    if summary["exit"] != "done":
        raise SystemExit(WORKLOAD)
