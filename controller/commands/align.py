"""`mimesys align MODEL --traces T1.h5 [T2.h5 ...] (--fleet fleet.toml | --sim | --forward FM) -o MODEL2`

Execution-driven alignment (DDPO) of a trained model against real traces, executed by
the agents of a fleet, by simulated agents (labelled simulated everywhere), or predicted by
the host's forward model (labelled predicted: fast, and checked on agents before believed). Resumable:
run the same command again to continue from the last checkpoint in --work-dir.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from mimesys.errors import MimesysError
from controller.align.config import PRESETS
from mimesys.exitstatus import click_error
from mimesys.cliopts import json_option, output_option, progress_option
from controller.commands._agents import plain_http_option


def _parse_value(text: str):
    """`--set` values: JSON when it parses (numbers, true/false, null, lists), else the string."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _pairs(values: tuple[str, ...], what: str) -> list[tuple[str, str]]:
    out = []
    for v in values:
        key, sep, val = v.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{v!r}: expected NAME=VALUE", param_hint=what)
        out.append((key.strip(), val.strip()))
    return out


@click.command("align")
@click.argument("model", type=click.Path(exists=True, path_type=Path))
@click.argument("more_traces", nargs=-1, type=click.Path(exists=True, dir_okay=False, path_type=Path),
                metavar="")
@click.option("--traces", "traces", multiple=True, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Target trace(s) (mimesys HDF5, on this host's metric schema); further paths may follow.")
@click.option("--fleet", "fleet_file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Fleet file (TOML): real agents execute the rollouts.")
@plain_http_option
@click.option("--sim", "sim", is_flag=True, help="Simulated agents execute the rollouts. Results are SIMULATED.")
@click.option("--sim-agents", type=click.IntRange(min=1), default=4, show_default=True,
              help="How many simulated agents (with --sim).")
@click.option("--forward", "forward_dir", type=click.Path(exists=True, file_okay=False, path_type=Path), default=None,
              help="A forward model of the real host predicts the rollouts (`mimesys forward fit`): nothing is "
                   "executed; results are predictions, and say so.")
@output_option("out", "--out", required=True, type=click.Path(path_type=Path),
              help="Where to write the aligned model (same format as `mimesys train` writes).")
@click.option("--epochs", type=int, default=None, help="Epochs to run in total (raising it continues a run).")
@click.option("--preset", type=click.Choice(sorted(PRESETS)), default=None,
              help="Named overrides (controller/align/config.py PRESETS).")
@click.option("--set", "sets", multiple=True, metavar="FIELD=VALUE",
              help="Override one config field, e.g. --set lr=1e-5 --set segment_windows=16.")
@click.option("--weight", "weights", multiple=True, metavar="PATTERN=W",
              help="Reward weight for metrics matching PATTERN (fnmatch), e.g. --weight 'disk.*=0.5'.")
@click.option("--work-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Checkpoint, history and reward curve (default: OUT.align/).")
@click.option("--restart", is_flag=True, help="Ignore an existing checkpoint and start from MODEL.")
@click.option("--seed", type=int, default=None, help="Random seed (default: config seed).")
@progress_option
@json_option(help="Print only one JSON object on stdout: the aligned model, epochs, simulated or not, first and "
                  "last epoch's reward, the reward curve and the work directory (messages go to stderr).")
def align(model, more_traces, traces, fleet_file, allow_plain_http, sim, sim_agents, forward_dir, out, epochs, preset,
          sets, weights, work_dir, restart, seed, progress, as_json):
    """Align MODEL to real traces by executing its plans (DDPO); write the aligned model to OUT."""
    from controller.align.config import AlignConfig, preset as named_preset

    all_traces = list(traces) + list(more_traces)
    if not all_traces:
        raise click.UsageError("give at least one target trace: --traces T1.h5 [T2.h5 ...]")
    if (fleet_file is not None) + bool(sim) + (forward_dir is not None) != 1:
        raise click.UsageError("choose exactly one executor: --fleet fleet.toml (real agents), --sim (simulated) "
                               "or --forward FM (the host's forward model predicts)")
    try:
        overrides = named_preset(preset) if preset else {}
        overrides.update({k: _parse_value(v) for k, v in _pairs(sets, "--set")})
        if weights:
            try:
                overrides["reward_weights"] = [(p, float(w)) for p, w in _pairs(weights, "--weight")]
            except ValueError as e:
                raise click.BadParameter(f"weight must be a number: {e}", param_hint="--weight") from None
        if epochs is not None:
            overrides["epochs"] = epochs
        if seed is not None:
            overrides["seed"] = seed
        cfg = AlignConfig.from_overrides(overrides)

        from controller.align.session import run_alignment
        work_dir = work_dir or out.with_name(out.name + ".align")
        summary = run_alignment(model_path=model, trace_paths=all_traces, out_path=out, config=cfg,
                                fleet_file=fleet_file, sim_agents=sim_agents if sim else None,
                                work_dir=work_dir, restart=restart, progress=progress, forward_dir=forward_dir,
                                allow_plain_http=allow_plain_http)
    except MimesysError as e:
        raise click_error(e) from None
    label = "SIMULATED agents" if summary["simulated"] else \
        "PREDICTED by the forward model" if summary["predicted"] else "real agents"
    click.echo(f"aligned model: {summary['out']}  ({label}, {summary['epochs']} epochs)", err=as_json)
    click.echo(f"reward: first epoch {summary['reward_first']:.4f} -> last epoch {summary['reward_last']:.4f}",
               err=as_json)
    click.echo(f"reward curve: {summary['curve']}", err=as_json)
    if as_json:
        click.echo(json.dumps({**summary, "work_dir": str(work_dir), "traces": [str(t) for t in all_traces]},
                              default=str))
