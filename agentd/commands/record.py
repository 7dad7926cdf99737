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
import numpy as np

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
@click.option("--progress/--no-progress", default=True)
@friendly_errors
def record(config_path, backend, output, seconds, interval, csv_path, progress):
    """Record this host's metrics for --seconds into a trace file."""
    cfg = load(config_path, backend)
    interval = interval or cfg.monitor.interval_s
    windows = max(1, int(round(seconds / interval)))
    trace = asyncio.run(_record(cfg, windows, interval, progress))
    if trace.T == 0:
        raise click.ClickException("interrupted before the first window completed; nothing written")
    trace.write(output)
    click.echo(f"recorded {trace.T} windows of {interval:g} s, {len(trace.metrics)} metrics "
               f"({sum(m.available for m in trace.metrics)} available) -> {output}"
               + (" [SIMULATED host]" if trace.simulated else ""))
    if csv_path:
        trace.write_csv(csv_path)
        click.echo(f"csv -> {csv_path}")


async def _record(cfg, windows: int, interval: float, progress: bool):
    from tqdm import tqdm

    from .. import __version__
    from ..backends import create_backend
    from ..trace import Trace

    be = create_backend(cfg)
    rows, starts = [], []
    started = time.time()
    # Ctrl-C / SIGTERM end the recording at the next window; what was recorded is kept.
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, task.cancel)
    try:
        with tqdm(total=windows, unit="window", disable=not progress, desc="recording") as bar:
            async with contextlib.aclosing(be.monitor(interval)) as samples:
                async for sample in samples:
                    rows.append(np.asarray(sample.values, np.float32))
                    starts.append(int(sample.timestamp_ns - interval * 1e9))
                    bar.update(1)
                    if len(rows) >= windows:
                        break
    except asyncio.CancelledError:
        task.uncancel()
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
        info = be.info()
        schema = be.metric_schema()
        await be.close()
    values = np.stack(rows) if rows else np.zeros((0, len(schema)), np.float32)
    return Trace(values=values, metrics=schema, window_s=interval,
                 window_start_ns=np.asarray(starts, np.int64) if starts else None,
                 host_fingerprint=info.fingerprint, simulated=bool(info.simulated),
                 provenance={"kind": "record", "backend": info.name, "agent_version": __version__,
                             "started_unix_s": started, "window_start_clock": "CLOCK_REALTIME",
                             "requested_windows": windows})
