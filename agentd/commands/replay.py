"""`mimesys-agent replay PLAN [-o TRACE] [-- CMD ARGS...]`: run a released workload offline.

No network and no running agent needed: the plan is executed by this process through the
configured backend (the real host by default) and the host is recorded at the plan's
window boundaries, exactly as a run through the API.

With a command: the workload starts first; the command is started once the first window
has executed (so it never runs on an unloaded host), and the plan is repeated back to back
until the command exits; then the workload stops. Reported: the command's exit status and
wall time, the windows executed and the trace written. replay exits with the command's
status (so it can wrap a benchmark in a script).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import shlex
import shutil
import signal
import time
from pathlib import Path

import click
import numpy as np

from ._common import config_options, friendly_errors, load


@click.command(context_settings={"ignore_unknown_options": False})
@config_options
@click.argument("plan_path", metavar="PLAN", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Trace of the replay (HDF5). Default: <plan name>.replay.h5 in the current directory.")
@click.option("--no-record", is_flag=True, help="Do not write a trace.")
@click.option("--csv", "csv_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write the trace as CSV.")
@click.option("--repetitions", type=click.IntRange(1, 100000), default=1,
              help="Times to run the plan (without a command; with one, it repeats until the command exits).")
@click.option("--seed", type=click.IntRange(0, 2**63 - 1), default=None, help="Segment-order seed (default: the plan's).")
@click.option("--progress/--no-progress", default=True)
@click.option("--textfile-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Write mimesys_replay.prom there after every window (node_exporter's textfile collector).")
@friendly_errors
def replay(config_path, backend, plan_path, command, output, no_record, csv_path, repetitions, seed, progress,
           textfile_dir):
    """Execute PLAN on this host, optionally around `-- CMD ARGS...`."""
    from ..plan import Plan

    cfg = load(config_path, backend)
    # A private scratch directory: a daemon on the same host keeps its own.
    scratch = cfg.agent.scratch_dir / f"replay-{os.getpid()}"
    cfg = dataclasses.replace(cfg, agent=dataclasses.replace(cfg.agent, scratch_dir=scratch))
    plan = Plan.read(plan_path)
    output = None if no_record else (output or Path(f"{plan_path.stem}.replay.h5"))
    try:
        result = asyncio.run(_replay(cfg, plan, list(command), repetitions, seed, progress, textfile_dir))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    trace = result["trace"]
    click.echo(f"workload: {result['windows']} windows executed (plan of {plan.T}, {result['repetitions']} complete "
               f"repetition(s)), "
               f"state {result['state']}" + (f": {result['error']}" if result["error"] else "")
               + (" [SIMULATED host]" if trace is not None and trace.simulated else ""))
    if output is not None and trace is not None and trace.T:
        trace.write(output)
        click.echo(f"trace: {output}")
        if csv_path:
            trace.write_csv(csv_path)
            click.echo(f"csv: {csv_path}")
    if command:
        click.echo(f"command: {shlex.join(command)}")
        if result["exit_status"] is None:
            click.echo("  not run (the workload failed before its first window ended)")
        else:
            click.echo(f"  exit status {result['exit_status']}, wall time {result['wall_s']:.3f} s")
        raise SystemExit(result["exit_status"] if result["exit_status"] is not None else 1)
    if result["state"] != "done":
        raise SystemExit(1)


async def _replay(cfg, plan, command: list[str], repetitions: int, seed, progress: bool,
                  textfile_dir: Path | None = None) -> dict:
    from tqdm import tqdm

    from .. import __version__
    from ..backend import RunOptions
    from ..backends import create_backend
    from ..errors import MimesysError, ValidationError
    from ..trace import Trace

    be = create_backend(cfg)
    textfile = None
    if textfile_dir is not None:
        from ..textfile import ReplayTextfile
        try:
            textfile = ReplayTextfile(textfile_dir, plan, be.metric_schema(), command=command)
        except BaseException:
            await be.close()
            raise
    rows, starts = [], []
    proc = None
    cmd_started = cmd_wall = None
    state, error, reps_done = "done", None, 0
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)

    async def workload(bar):
        nonlocal proc, cmd_started, reps_done
        total = None if command else repetitions
        while total is None or reps_done < total:
            async with contextlib.aclosing(be.execute(plan, RunOptions(repetitions=1, seed=seed))) as windows:
                async for w in windows:
                    rows.append(np.asarray(w.values, np.float32))
                    starts.append(int(w.start_ns))
                    bar.update(1)
                    if textfile is not None:
                        textfile.window(w)
                    if command and proc is None:
                        cmd_started = time.monotonic()
                        try:
                            proc = await asyncio.create_subprocess_exec(*command)
                        except OSError as e:
                            raise ValidationError(f"cannot start {command[0]!r}: {e.strerror or e}") from None
                        waiter.set()
            reps_done += 1

    waiter = asyncio.Event()
    try:
        with tqdm(total=None if command else plan.T * repetitions, unit="window", disable=not progress,
                  desc="replay") as bar:
            work = asyncio.create_task(workload(bar))
            stopper = asyncio.create_task(stop.wait())
            if command:
                started = asyncio.create_task(waiter.wait())
                await asyncio.wait({work, started, stopper}, return_when=asyncio.FIRST_COMPLETED)
                if proc is not None:
                    ended = asyncio.create_task(proc.wait())
                    await asyncio.wait({ended, stopper, work}, return_when=asyncio.FIRST_COMPLETED)
                    if not ended.done():
                        if stop.is_set():   # Ctrl-C: pass it on to the command and wait for it
                            proc.send_signal(signal.SIGINT)
                        await ended
                    cmd_wall = time.monotonic() - cmd_started
                started.cancel()
            else:
                await asyncio.wait({work, stopper}, return_when=asyncio.FIRST_COMPLETED)
            stopper.cancel()
            if not work.done():
                work.cancel()
                state = "interrupted" if stop.is_set() and not command else "done"
            try:
                await work
            except asyncio.CancelledError:
                pass
            except MimesysError as e:
                state, error = "failed", str(e)
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
        info, schema = be.info(), be.metric_schema()
        await be.close()
    trace = None
    if rows:
        trace = Trace(values=np.stack(rows), metrics=schema, window_s=float(plan.window_s),
                      window_start_ns=np.asarray(starts, np.int64), host_fingerprint=info.fingerprint,
                      simulated=bool(info.simulated),
                      provenance={"kind": "replay", "backend": info.name, "agent_version": __version__,
                                  "plan_windows": plan.T, "repetitions": reps_done,
                                  "command": command or None, "plan_provenance": plan.provenance,
                                  "catalog_hash": plan.catalog_hash,
                                  "seed": seed if seed is not None else plan.seed})
    if textfile is not None:
        textfile.finish(state, proc.returncode if proc is not None else None)
    return {"trace": trace, "windows": len(rows), "repetitions": reps_done, "state": state, "error": error,
            "exit_status": proc.returncode if proc is not None else None, "wall_s": cmd_wall or 0.0}
