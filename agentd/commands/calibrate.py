"""`mimesys-agent calibrate`: measure every stressor's throughput on this host with the
real runner and write the calibration file the agent shows in /v1/info."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import click

from ..errors import MimesysError
from ..hostpaths import online_cpus, parse_cpu_list


@click.command("calibrate")
@click.option("--out", "out_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Calibration file (default: <agent.state_dir>/calibration.json from the agent config).")
@click.option("--config", "config_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Agent config (for the default --out, CPUs and scratch directory).")
@click.option("--window-s", type=click.FloatRange(0.05, 10), default=0.5, show_default=True,
              help="How long each stressor runs in each measurement.")
@click.option("--cpus", default=None, help="CPUs to use, e.g. 0-1 (default: the agent's CPUs).")
@click.option("--scratch-dir", type=click.Path(file_okay=False, path_type=Path), default=None)
@click.option("--one-thread-only", is_flag=True, help="Skip the all-threads bandwidth measurements.")
@click.option("--only", multiple=True, help="Calibrate only this stressor (repeatable).")
def calibrate(out_path, config_path, window_s, cpus, scratch_dir, one_thread_only, only):
    """Run each stressor alone (one thread; all threads for bandwidth classes) and record ops/s,
    bytes/s and per-class peaks."""
    from tqdm import tqdm

    from ..calibration import measure, write
    from ..runner import RunnerConfig

    try:
        cfg = None
        if out_path is None or cpus is None:
            from ..config import load_config
            cfg = load_config(config_path)
        if out_path is None:
            out_path = Path(cfg.agent.state_dir) / "calibration.json"
        cpu_list = tuple(parse_cpu_list(cpus)) if cpus else (cfg.agent.resolved_cpus() if cfg else tuple(online_cpus()))
        if scratch_dir is not None:
            scratch_dir.mkdir(parents=True, exist_ok=True)
        rcfg = RunnerConfig(cpus=cpu_list, scratch_dir=str(scratch_dir) if scratch_dir else None)
        with tqdm(desc="calibrate", unit="win") as bar:
            def progress(done, total):
                bar.total = total
                bar.update(done - bar.n)
            doc = asyncio.run(measure(rcfg, window_s=window_s, all_threads=not one_thread_only,
                                      only=list(only) or None, progress=progress))
        write(doc, out_path)
    except ValueError as e:
        raise click.ClickException(f"--cpus {cpus!r}: {e}") from None
    except MimesysError as e:
        raise click.ClickException(str(e)) from None
    for name, e in doc["stressors"].items():
        if e.get("unavailable"):
            click.echo(f"{name:28s} unavailable: {e['unavailable']}")
            continue
        one = e["one_thread"]
        line = f"{name:28s} {one['ops_per_s']:12.4g} ops/s {one['bytes_per_s'] / 1e6:10.1f} MB/s"
        if e["all_threads"]:
            line += f"   x{e['all_threads']['threads']}: {e['all_threads']['bytes_per_s'] / 1e6:10.1f} MB/s"
        click.echo(line)
    click.echo("peaks: " + json.dumps({k: round(v) for k, v in doc["peaks"].items()}))
    for name, note in doc["notes"].items():
        click.echo(f"note: {name}: {note}")
    click.echo(f"wrote {out_path}")
