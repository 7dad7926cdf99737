"""`mimesys evaluate`: trace fidelity (the default) and `mimesys evaluate colocation`.

    mimesys evaluate --fleet fleet.toml --agent NAME --trace a.h5 --trace b.h5 --method model=MODEL_DIR \\
        --method aligned=ALIGNED_DIR --method KIND:DS.h5 --method KIND --dataset DS.h5 -o eval/
    mimesys evaluate colocation --app CMD --mix CMD --plan PLAN [--fleet F --agent NAME] [--regex R]

Methods: `NAME=PLANNER` or `PLANNER`, any spec of the planner registry
(mimesys/planners/registry.py; the dataset baselines of controller/baselines/ included); a kind
named bare (or `NAME=baseline:KIND`) takes its dataset from `--dataset`. Targets are mimesys
traces (`mimesys import` converts foreign ones); one recorded on another machine is mapped
onto the agent's host first.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import click

from mimesys.errors import ConfigError, MimesysError
from mimesys.planners.registry import help_text, kinds, load_planner
from mimesys.trace import Trace
from mimesys.cliopts import json_option, output_option, progress_option
from mimesys.exitstatus import ERROR, PARTIAL, click_error
from controller.baselines import BASELINE_GROUP

from ._agents import agent_options, one_agent


def resolve_method(spec: str, dataset: str | None):
    """`NAME=PLANNER` or `PLANNER` (named after itself), PLANNER any spec of the planner registry
    (mimesys/planners/registry.py); `--dataset` is the input of a kind named bare -> (name, generator)."""
    name, sep, target = spec.partition("=")
    if not sep:
        name = target = spec
        if target not in kinds() and ":" not in target and not Path(target).exists():
            target = f"{BASELINE_GROUP}:{target}"      # `--method KIND`: the dataset baselines' old spelling
    try:
        return name, load_planner(target, dataset=dataset)
    except ConfigError as e:
        raise ConfigError(f"--method {spec!r}: {e}") from None


@click.group(invoke_without_command=True)
@agent_options
@click.option("--trace", "traces", multiple=True, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Target trace (HDF5); repeat for several.")
@click.option("--method", "methods", multiple=True,
              help="[NAME=]PLANNER, repeat; PLANNER is " + help_text())
@click.option("--dataset", default=None, type=click.Path(exists=True, dir_okay=False), help="Dataset for the baselines.")
@output_option("outdir", "--outdir", default=Path("eval"), type=click.Path(file_okay=False, path_type=Path),
               show_default=True, help="Results directory.")
@click.option("--band", default=10, type=click.IntRange(1, 100000), show_default=True,
              help="Sakoe-Chiba band of the DTW, in windows.")
@click.option("--scale", default="own", type=click.Choice(("own", "device")), show_default=True,
              help="Each metric's full scale: the target's own peak (traffic where the target had none counts "
                   "in full, as in an overlay) or the host's calibrated peak.")
@click.option("--metric", "metrics", multiple=True,
              help="Metric to score, or 'paper' for the MIMESYS paper's set; repeat (default: every metric the "
                   "target carries).")
@click.option("--seed", default=0, type=int, show_default=True)
@progress_option
@click.option("--warmup", "warmup_windows", default=1, type=click.IntRange(0, 600), show_default=True,
              help="Windows of the first composition run before each plan, not scored.")
@click.option("--cores", "core_strategy", default="preserve-total", type=click.Choice(("preserve-total", "busiest")),
              show_default=True, help="Core mapping for targets from other hosts.")
@click.option("--load-level", "load_levels", multiple=True, metavar="TRACE=low|mid|high",
              help="Override a target's load level (default: from its mean CPU utilization).")
@json_option
@click.pass_context
def evaluate(ctx, fleet_file, agent, token_file, allow_plain_http, traces, methods, dataset, outdir, band, scale, metrics, seed,
             warmup_windows, core_strategy, load_levels, progress, as_json):
    """Score generated plans against target traces (DTW per metric), or run `colocation`."""
    if ctx.invoked_subcommand is not None:
        return
    try:
        if not traces or not methods:
            raise ConfigError("trace evaluation needs at least one --trace and one --method, and an agent "
                              "(--fleet FILE [--agent NAME]) "
                              "(see `mimesys evaluate --help`; or `mimesys evaluate colocation ...`)")
        levels = {}
        for item in load_levels:
            k, _, v = item.partition("=")
            if v not in ("low", "mid", "high"):
                raise ConfigError(f"--load-level {item!r}: expected TRACE=low|mid|high")
            levels[k] = v
        gens = dict(resolve_method(m, dataset) for m in methods)
        targets = {p.stem: Trace.read(p) for p in traces}
        from controller.evaluate.driver import EvalOptions
        from controller.evaluate.driver import evaluate as run_eval
        client = one_agent(fleet_file, agent, token_file, allow_plain_http=allow_plain_http)

        opts = EvalOptions(outdir=outdir, band=band, seed=seed, warmup_windows=warmup_windows,
                           metrics=tuple(metrics) or None, core_strategy=core_strategy, load_levels=levels,
                           progress=progress, scale=scale)

        async def main():
            try:
                return await run_eval(targets, gens, client, opts)
            finally:
                await client.close()

        results = asyncio.run(main())
    except MimesysError as e:
        raise click_error(e) from None
    click.echo(results.render(), err=as_json)
    for r in results.runs:
        if r.get("added_activity"):
            added = ", ".join(f"{m} {v['executed_mean']:.0%} of scale" for m, v in r["added_activity"].items())
            click.echo(f"added where {r['trace']} was idle, by {r['method']}: {added}", err=as_json)
        if r.get("added_background"):
            seen = ", ".join(f"{m} {v['executed_mean']:.0%} of scale" for m, v in r["added_background"].items())
            click.echo(f"seen where {r['trace']} was idle during {r['method']}'s replay, not from its plan "
                       f"(no stressor of it drives that; the host's background): {seen}", err=as_json)
    errors = [r for r in results.runs if r.get("error")]
    for r in errors:
        click.echo(f"FAILED {r['trace']} / {r['method']}: {r['error']}", err=True)
    sim = " (SIMULATED host: not a measurement of real hardware)" if results.meta.get("simulated") else ""
    click.echo(f"results in {outdir}/ (results.json, results.csv, summary.csv, PNGs){sim}", err=as_json)
    if as_json:   # the same document as results.json
        click.echo(results_json(outdir, results))
    if errors:   # every run failed: an error; some: a partial failure (the rest are scored above)
        raise SystemExit(ERROR if len(errors) == len(results.runs) else PARTIAL)


@evaluate.command("colocation")
@click.option("--app", "app_cmd", required=True, help="The application command (shell), e.g. a benchmark.")
@click.option("--mix", "mix_cmd", required=True, help="The real neighbour mix (shell command), killed afterwards.")
@click.option("--plan", "plan_path", required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="The synthetic plan generated from the mix's trace.")
@agent_options
@click.option("--agent-config", default=None, type=click.Path(dir_okay=False),
              help="Config for the local replay (mimesys-agent --config).")
@click.option("--regex", default=None, help="Performance from the app's output: first group of the last match "
                                            "(default: wall time).")
@click.option("--higher-is-better/--lower-is-better", "higher", default=None,
              help="Throughput (default with --regex) or latency/time (default without).")
@click.option("--repeats", default=3, type=click.IntRange(1, 100), show_default=True)
@click.option("--warmup", "warmup_s", default=3.0, type=click.FloatRange(0, 600), show_default=True,
              help="Seconds the neighbour runs before the application starts.")
@click.option("-o", "--output", default=None, type=click.Path(dir_okay=False, path_type=Path), help="Result JSON.")
@json_option(help="Print only JSON on stdout: the result document (the one -o writes, plus `output`); "
                  "the table goes to stderr.")
def colocation_cmd(app_cmd, mix_cmd, plan_path, fleet_file, agent, token_file, allow_plain_http, agent_config, regex, higher, repeats, warmup_s,
                   output, as_json):
    """The application alone, next to the real mix, next to the plan: degradation difference in points.

    The plan replays on the fleet's agent when --fleet/--agent name one, else locally with
    `mimesys-agent replay`."""
    from controller.evaluate.colocation import AppSpec, colocation, render

    spec = AppSpec(app_cmd, regex, higher)
    try:
        async def main():
            client = (one_agent(fleet_file, agent, token_file, allow_plain_http=allow_plain_http)
                      if (fleet_file or agent) else None)
            try:
                return await colocation(spec, mix_cmd, plan_path, client=client, repeats=repeats, warmup_s=warmup_s,
                                        agent_config=agent_config)
            finally:
                if client is not None:
                    await client.close()

        doc = asyncio.run(main())
    except MimesysError as e:
        raise click_error(e) from None
    click.echo(render(doc), err=as_json)
    if output:
        from mimesys.fsutil import atomic_write_text
        atomic_write_text(output, json.dumps(doc, indent=1))
        click.echo(f"result: {output}", err=as_json)
    if as_json:
        click.echo(json.dumps({**doc, "output": str(output) if output else None}, default=str))


@evaluate.command("rescore")
@click.argument("outdir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--trace", "traces", multiple=True, required=True,
              type=click.Path(exists=True, dir_okay=False, path_type=Path), help="The targets of that run.")
@click.option("--band", default=10, type=click.IntRange(1, 100000), show_default=True)
@click.option("--scale", default="own", type=click.Choice(("own", "device")), show_default=True,
              help="Each metric's full scale: the target's own peak or the host's calibrated peak.")
@click.option("--metric", "metrics", multiple=True, help="Metrics to score, or 'paper' (default: every metric the target carries).")
@click.option("--load-level", "load_levels", multiple=True, metavar="TRACE=low|mid|high")
@json_option(help="Print only JSON on stdout: outdir, meta and runs (the rewritten results.json); "
                  "the table goes to stderr.")
def rescore_cmd(outdir, traces, band, scale, metrics, load_levels, as_json):
    """Score an earlier evaluation's executed traces again (other metrics or band), without replaying."""
    from controller.evaluate.driver import EvalOptions, rescore
    try:
        levels = dict(item.partition("=")[::2] for item in load_levels)
        res = rescore({p.stem: Trace.read(p) for p in traces}, outdir,
                      EvalOptions(outdir=outdir, band=band, metrics=tuple(metrics) or None, load_levels=levels,
                                  scale=scale))
    except (MimesysError, OSError, ValueError) as e:
        raise click_error(e) from None
    click.echo(res.render(), err=as_json)
    click.echo(f"results in {outdir}/ (rescored)", err=as_json)
    if as_json:   # the same document as results.json
        click.echo(results_json(outdir, res))


def results_json(outdir, results) -> str:
    """`evaluate --json` and `evaluate rescore --json`: the results.json document and its directory."""
    return json.dumps({"outdir": str(outdir), "meta": results.meta, "runs": results.runs}, default=str)
