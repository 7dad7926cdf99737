"""`mimesys-agent record`: sample this host at 1 Hz into a trace (a production trace).

Uses the same backend monitor path as /v1/monitor, so a recorded trace and a live stream
of the same host agree. Ctrl-C stops early and still writes what was recorded.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
from pathlib import Path

import click

from mimesys.cliopts import json_option, progress_option

from ._common import config_options, friendly_errors, load


@click.command()
@config_options
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="Trace file to write (HDF5).")
@click.option("--seconds", type=click.IntRange(1, 7 * 24 * 3600), required=True, help="How long to record.")
@click.option("--interval", type=click.FloatRange(0.05, 3600), default=None,
              help="Window length in seconds (default: monitor.interval_s, normally 1).")
@click.option("--csv", "csv_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write the trace as CSV (one row per window).")
@progress_option
@click.option("--flush-every", "flush_s", type=click.FloatRange(1, 3600), default=60.0, show_default=True,
              help="Seconds between flushes of the trace file (what a crash can lose).")
@json_option
@friendly_errors
def record(config_path, backend, output, seconds, interval, csv_path, progress, flush_s, as_json):
    """Record this host's metrics for --seconds into a trace file (written as it goes)."""
    from mimesys.trace import Trace
    cfg = load(config_path, backend)
    interval = interval or cfg.monitor.interval_s
    windows = max(1, int(round(seconds / interval)))
    rows, simulated, n_metrics = asyncio.run(_record(cfg, output, windows, interval, progress, flush_s))
    if rows == 0:
        output.unlink(missing_ok=True)
        raise click.ClickException("interrupted before the first window completed; nothing written")
    click.echo(f"recorded {rows} windows of {interval:g} s, {n_metrics[0]} metrics "
               f"({n_metrics[1]} available) -> {output}" + (" [SIMULATED host]" if simulated else ""), err=as_json)
    if csv_path:
        Trace.read(output).write_csv(csv_path)
        click.echo(f"csv -> {csv_path}", err=as_json)
    if as_json:
        import json
        click.echo(json.dumps({"trace": str(output), "windows": rows, "window_s": interval, "metrics": n_metrics[0],
                               "available": n_metrics[1], "simulated": simulated,
                               "csv": str(csv_path) if csv_path else None}))


async def _record(cfg, output: Path, windows: int, interval: float, progress: bool, flush_s: float):
    from tqdm import tqdm

    from mimesys import __version__
    from ..backend_registry import create_backend
    from ..trace_append import TraceAppender

    be = create_backend(cfg)
    started = time.time()
    # Ctrl-C / SIGTERM end the recording at the next window; what was recorded is kept.
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, task.cancel)
    out = None
    try:
        info, schema = be.info(), be.metric_schema()
        out = TraceAppender(output, schema, window_s=interval, host_fingerprint=info.fingerprint,
                            simulated=bool(info.simulated), flush_s=flush_s,
                            provenance={"kind": "record", "backend": info.name, "agent_version": __version__,
                                        "started_unix_s": started, "window_start_clock": "CLOCK_REALTIME",
                                        "requested_windows": windows})
        with tqdm(total=windows, unit="window", disable=not progress, desc="recording") as bar:
            async with contextlib.aclosing(be.monitor(interval)) as samples:
                async for sample in samples:
                    if out.rows == 0:   # window 0 started one interval before its sample
                        _set_start(out, sample.timestamp_ns / 1e9 - interval)
                    out.append(int(sample.timestamp_ns - interval * 1e9), sample.values)
                    bar.update(1)
                    if out.rows >= windows:
                        break
    except asyncio.CancelledError:
        task.uncancel()
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
        if out is not None:
            out.finish()
        await be.close()
    return out.rows, bool(info.simulated), (len(schema), sum(m.available for m in schema))


def _set_start(out, started_unix_s: float) -> None:
    """Window 0's wall-clock start (the first sample's time less one interval)."""
    from mimesys.h5io import get_json, set_json
    set_json(out.f.attrs, "provenance", {**(get_json(out.f.attrs, "provenance", {}) or {}),
                                         "started_unix_s": started_unix_s})
