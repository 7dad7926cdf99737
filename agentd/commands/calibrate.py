"""`mimesys-agent calibrate`: the host's one solo measurement. Every stressor alone, once: with an
agent configuration the solo profile is run through the agent's own backend and both the
calibration (the runner's counts: the file the agent shows in /v1/info) and the profile (every
sampled metric: profile.h5 beside it) are read off it (agentd/profile_recorder.py); then the disk
stressors' short segments, the host's peaks and the reach. `--import` installs both from another
agent's state on the same hardware (the demo keeps its copy)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import click

from mimesys.cliopts import output_option, progress_option
from mimesys.errors import MimesysError
from mimesys.exitstatus import click_error

from mimesys.hostpaths import online_cpus, parse_cpu_list


@click.command("calibrate")
@output_option("out_path", "--out", type=click.Path(dir_okay=False, path_type=Path),
              help="Calibration file (default: <agent.state_dir>/calibration.json from the agent config).")
@click.option("--config", "config_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Agent config (for the default --output, CPUs and scratch directory).")
@click.option("--window-s", type=click.FloatRange(0.05, 10), default=0.5, show_default=True,
              help="How long each stressor runs in each measurement without the profile (--no-profile, --only); "
                   "the profile's windows are 1 s.")
@click.option("--cpus", default=None, help="CPUs to use, e.g. 0-1 (default: the agent's CPUs).")
@click.option("--scratch-dir", type=click.Path(file_okay=False, path_type=Path), default=None)
@click.option("--one-thread-only", is_flag=True, help="Skip the all-threads bandwidth measurements.")
@click.option("--only", multiple=True, help="Calibrate only this stressor (repeatable).")
@click.option("--probe-seconds", type=click.FloatRange(0, 30), default=0.5, show_default=True,
              help="How long each shape of each host peak probe runs (0: no probes, no host_peaks/reach).")
@click.option("--reach-repeats", type=click.IntRange(0, 10), default=3, show_default=True,
              help="With probes: run the catalog's two best variants for each reach metric this many more times, "
                   "each run followed by the probes; reach is the median over these pairs (a shared host's disk "
                   "moves by 20 % within a minute: only side-by-side figures compare).")
@click.option("--segment-pairs", type=click.IntRange(1, 16), default=None,
              help="Short/long segment pairs per disk stressor for its dead time (default: the calibrator's).")
@click.option("--profile/--no-profile", "with_profile", default=None,
              help="Also record the solo profile (profile.h5 beside the calibration file) through the agent's "
                   "samplers [default: when writing the agent's own state].")
@click.option("--profile-hold", type=click.IntRange(1, 16), default=None,
              help="Windows of 1 s per profile step (default 2: the window read comes a window after each "
                   "switch; 1 takes ~4 × stressors windows instead of ~7 ×, reading the first window after it).")
@click.option("--import", "import_dir", type=click.Path(file_okay=False, exists=True, path_type=Path), default=None,
              help="Measure nothing: install the calibration.json and profile.h5 in this directory (another "
                   "agent's state, or a demo's demo-out/calibration) into this agent's state, if they were "
                   "measured on this hardware for this catalog.")
@click.option("--json", "as_json", is_flag=True,
              help="Print host_peaks, reach, catalog_best and peaks as one JSON line (no progress bar).")
@progress_option
def calibrate(out_path, config_path, window_s, cpus, scratch_dir, one_thread_only, only, probe_seconds, reach_repeats,
              segment_pairs, with_profile, profile_hold, import_dir, as_json, progress):
    """Run each stressor alone (one thread, a second thread, all threads: the solo profile, with the
    agent's samplers) and record ops/s, bytes/s and per-class peaks, and what a short segment of
    each disk stressor loses (its dead time, which the forward model plans around); probe the
    host's own peaks (code that is not a catalog stressor) and report each metric's reach =
    catalog best / host peak."""
    from mimesys.calibration import write

    from ..profile_recorder import PROFILE_FILE
    from ..runner import RunnerConfig

    if import_dir is not None:
        _import(import_dir, config_path, out_path)
        return
    if with_profile is None:
        with_profile = out_path is None and not only
    if with_profile and only:
        raise click.UsageError("--profile needs every stressor: it cannot be combined with --only")
    try:
        cfg = None
        if out_path is None or cpus is None or config_path is not None or with_profile:
            from ..config import load_config
            cfg = load_config(config_path)
        if out_path is None:
            out_path = Path(cfg.agent.state_dir) / "calibration.json"
        cpu_list = tuple(parse_cpu_list(cpus)) if cpus else (cfg.agent.resolved_cpus() if cfg else tuple(online_cpus()))
        if scratch_dir is not None:
            scratch_dir.mkdir(parents=True, exist_ok=True)
        rcfg = RunnerConfig(cpus=cpu_list, scratch_dir=str(scratch_dir) if scratch_dir else None)
        # the agent's catalog (agent.catalog), which is what its plans use
        from mimesys.catalog import load_catalog
        catalog = load_catalog(cfg.agent.catalog) if cfg is not None else None
        more = {"segment_pairs": segment_pairs} if segment_pairs else {}
        doc, profile = asyncio.run(_measure(cfg if with_profile else None, profile_hold, progress and not as_json,
                                            rcfg, window_s=window_s, all_threads=not one_thread_only,
                                            catalog=catalog, only=list(only) or None, probe_seconds=probe_seconds,
                                            reach_repeats=reach_repeats, **more))
        write(doc, out_path)
        profile_file = None
        if profile is not None and profile.trace is not None:
            profile_file = out_path.parent / PROFILE_FILE
            profile.finish(doc).write(profile_file)
        elif profile is not None:
            click.echo(f"no solo profile recorded: {profile.why}", err=True)
    except ValueError as e:
        raise click.ClickException(f"--cpus {cpus!r}: {e}") from None
    except MimesysError as e:
        raise click_error(e) from None
    if as_json:
        click.echo(json.dumps({k: doc.get(k) for k in ("host_peaks", "reach", "reach_pairs", "catalog_best", "peaks",
                                                        "host_peaks_method", "created", "catalog_hash")}
                              | {"path": str(out_path), "profile": str(profile_file) if profile_file else None},
                              sort_keys=True))
        return
    _print_calibration(doc)
    if profile_file is not None:
        click.echo(f"wrote {profile_file} (the solo profile)")
    click.echo(f"wrote {out_path}")


def _import(src: Path, config_path, out_path) -> None:
    """--import: checked against this host and its agent's catalog, then copied into its state."""
    from ..config import load_config
    from ..host_backend import HostBackend
    from ..profile_recorder import import_measurement

    if out_path is not None:
        raise click.UsageError("--import installs into the agent's state directory; it takes no --output")
    try:
        cfg = load_config(config_path)
        backend = HostBackend.from_config(cfg)
        try:
            backend.use_calibration({})        # this host's fingerprint, whatever its state holds
            written = import_measurement(src, cfg.agent.state_dir, backend.catalog, backend.info())
        finally:
            asyncio.run(backend.close())
    except MimesysError as e:
        raise click_error(e) from None
    for path in written:
        click.echo(f"wrote {path}")


async def _measure(cfg, hold: int | None, progress: bool, rcfg, **kw):
    """measure() with the bar; with an agent config `cfg`, reading each stressor alone once for
    both the calibration and the solo profile, through the agent's own backend (ProfilePass)."""
    from tqdm import tqdm

    from mimesys.solo_profile import HOLD

    from ..calibrator import measure
    from ..host_backend import HostBackend
    from ..profile_recorder import ProfilePass

    profile = None
    if cfg is not None:
        Path(cfg.agent.scratch_dir).mkdir(parents=True, exist_ok=True)   # `serve` makes it; calibrate may run first
        profile = ProfilePass(HostBackend.from_config(cfg), hold or HOLD)
    try:
        with tqdm(desc="calibrate", unit="window", disable=not progress) as bar:
            def advance(done, total):
                bar.total = total
                bar.update(done - bar.n)
            doc = await measure(rcfg, progress=advance, solo=profile, **kw)
    finally:
        if profile is not None:
            await profile.backend.close()
    return doc, profile


def _print_calibration(doc: dict) -> None:
    for name, e in doc["stressors"].items():
        if e.get("unavailable"):
            click.echo(f"{name:28s} unavailable: {e['unavailable']}")
            continue
        one = e["one_thread"]
        line = f"{name:28s} {one['ops_per_s']:12.4g} ops/s {one['bytes_per_s'] / 1e6:10.1f} MB/s"
        if e["all_threads"]:
            line += f"   x{e['all_threads']['threads']}: {e['all_threads']['bytes_per_s'] / 1e6:10.1f} MB/s"
        dead = (e.get("segment") or {}).get("dead_s")
        if dead is not None:
            line += f"   each segment loses {dead * 1e3:.1f} ms (queue fill and drain)"
        click.echo(line)
    click.echo("peaks: " + json.dumps({k: round(v) for k, v in doc["peaks"].items()}))
    for metric, value in (doc.get("host_peaks") or {}).items():
        best = (doc.get("catalog_best") or {}).get(metric)
        click.echo(f"host peak {metric:16s} {value:14.4g}   reach {doc['reach'].get(metric, float('nan')):.3f}"
                   + (f"  (best: {best['stressor']} x{best['threads']})" if best else "  (no catalog stressor)")
                   + (f"  pairs {doc['reach_pairs'][metric]}" if metric in (doc.get("reach_pairs") or {}) else ""))
    for metric, how in (doc.get("host_peaks_method") or {}).items():
        if metric not in (doc.get("host_peaks") or {}):
            click.echo(f"host peak {metric:16s} not measured: {how}")
    for name, note in doc["notes"].items():
        click.echo(f"note: {name}: {note}")
