"""`mimesys-agent replay PLAN [-o TRACE] [-- CMD ARGS...]`: run a released workload offline.

No network and no running agent needed: the plan is executed by this process through the
configured backend (the real host by default) and the host is recorded at the plan's
window boundaries, exactly as a run through the API.

With a command: the workload starts first; the command is started once the first window
has executed (so it never runs on an unloaded host), and the plan is repeated back to back
until the command exits; then the workload stops. Reported: the command's exit status and
wall time, the windows executed and the trace written. The exit status follows
mimesys/exitstatus.py: the command's own when it fails (128+N when signal N killed it), 4 when
the command succeeded but the plan failed (so a script wrapping a benchmark sees both).

With --json, stdout carries one JSON line written after the command has ended (the summary
above, plus the exit status this program returns); the command's own stdout goes to stderr
(its stderr stays stderr), so a script reads stdout with one json.loads. A benchmark whose
output the script parses writes it to a file of its own: `-- sh -c 'bench > bench.out'`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import json
import os
import shlex
import shutil
import signal
import sys
import time
from pathlib import Path

import click

from mimesys.cliopts import json_option, progress_option, stderr_fd
from mimesys.terminal import printable

from ..config import PLACEMENTS
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
@progress_option
@click.option("--textfile-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Write mimesys_replay.prom there after every window (node_exporter's textfile collector).")
@click.option("--run-as", "run_as", metavar="USER[:GROUP]", default=None,
              help="Run the command as this user (root only), in a session of its own with an allow-listed "
                   "environment; the plan keeps this process's privileges.")
@click.option("--pass-stdin", is_flag=True,
              help="With --run-as: give the command this process's stdin (default: /dev/null).")
@click.option("--strict", is_flag=True,
              help="Refuse a plan made for other hardware (default: a warning naming what differs).")
@click.option("--fold-threads", is_flag=True,
              help="Run a plan with more threads than this host's CPUs by folding threads onto them "
                   "(work that no longer fits a window is dropped and reported).")
@click.option("--placement", type=click.Choice(PLACEMENTS), default=None,
              help="How the runner places the plan's threads (default: agent.placement): pinned, one per "
                   "core, free, moved by the scheduler as an application's are (no per-core hold), or yield, pinned "
                   "until something else on the host keeps a thread waiting for its core, then free for "
                   "the rest of that window.")
@click.option("--via-agent", is_flag=True,
              help="Hand the plan to this host's running agent (URL and token from --config): it measures "
                   "everything the unit may (perf events), the command runs here as you.")
@json_option(help="Print only one JSON line on stdout, after the command ends (windows, state, trace, the "
                  "command's exit status and wall time, this program's exit status); messages and the "
                  "command's own stdout go to stderr.")
@friendly_errors
def replay(config_path, backend, plan_path, command, output, no_record, csv_path, repetitions, seed, progress,
           textfile_dir, run_as, pass_stdin, strict, fold_threads, placement, via_agent, as_json):
    """Execute PLAN on this host, optionally around `-- CMD ARGS...`."""
    from mimesys.errors import ValidationError
    from mimesys.plan import Plan
    from ..runas import parse_run_as

    cfg = load(config_path, backend)
    if placement is not None:
        if via_agent:
            raise click.UsageError("--placement with --via-agent: the running agent places threads as its "
                                   "agent.placement says")
        cfg = cfg.with_placement(placement)
    command = list(command)
    who = parse_run_as(run_as) if run_as else None
    if who is not None and not command:
        raise click.UsageError("--run-as names who runs the command after `--`; there is none")
    if pass_stdin and who is None:
        raise click.UsageError("--pass-stdin is for --run-as (without it the command has this process's stdin)")
    if via_agent and textfile_dir is not None:
        raise click.UsageError("--textfile-dir with --via-agent: the agent publishes /metrics itself")

    say = functools.partial(click.echo, err=as_json)

    async def spawn(cmd):
        kw = ({"env": who.env(dict(os.environ)), **who.subprocess_kw(stdin=pass_stdin)} if who is not None
              else {})
        if as_json:   # stdout is the summary's alone: the command writes its own to stderr
            kw["stdout"] = stderr_fd()
        try:
            return await asyncio.create_subprocess_exec(*cmd, **kw)
        except OSError as e:
            raise ValidationError(f"cannot start {cmd[0]!r}: {e.strerror or e}") from None

    plan = Plan.read(plan_path)
    prepare = functools.partial(prepare_plan, strict=strict, fold=fold_threads)
    output = None if no_record else (output or Path(f"{plan_path.stem}.replay.h5"))
    if via_agent:
        from ..replay_via_agent import replay_via_agent
        result = asyncio.run(replay_via_agent(cfg, plan, command, repetitions, seed, output=output, spawn=spawn,
                                              prepare=prepare))
        result.setdefault("plan_windows", plan.T)
        # run id, state and error are the agent's words: printable() before they reach the terminal
        say(f"workload: {result['windows']} windows executed by the agent at {result['agent']} "
            f"(run {printable(result['run_id'])}), state {printable(result['state'])}"
            + (f": {printable(result['error'])}" if result["error"] else ""))
        csv_written = None
        if result["trace_path"] is not None:
            say(f"trace: {result['trace_path']}")
            if csv_path:
                from mimesys.trace import Trace
                Trace.read(result["trace_path"]).write_csv(csv_path)
                say(f"csv: {csv_path}")
                csv_written = csv_path
        _report_command(command, result, say)
        status = replay_status(result, bool(command))
        if as_json:
            click.echo(json.dumps(replay_summary(plan_path, command, result, status, trace=result["trace_path"],
                                                 csv=csv_written, simulated=result.get("simulated"),
                                                 agent=result["agent"], run_id=result["run_id"]), default=str))
        raise SystemExit(status)

    from ..replayarea import private_scratch
    scratch = private_scratch(cfg.agent)
    cfg = dataclasses.replace(cfg, agent=dataclasses.replace(cfg.agent, scratch_dir=scratch))
    try:
        result = asyncio.run(_replay(cfg, plan, command, repetitions, seed, progress, textfile_dir, spawn=spawn,
                                     prepare=prepare, output=output))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    say(f"workload: {result['windows']} windows executed (plan of {result['plan_windows']}, "
        f"{result['repetitions']} complete repetition(s)), "
        f"state {result['state']}" + (f": {printable(result['error'])}" if result["error"] else "")
        + (" [SIMULATED host]" if result["simulated"] else ""))
    written, written_csv = result["trace_path"], None
    if written is not None:
        say(f"trace: {written}")
        if csv_path:
            from mimesys.trace import Trace
            Trace.read(written).write_csv(csv_path)
            say(f"csv: {csv_path}")
            written_csv = csv_path
    _report_command(command, result, say)
    status = replay_status(result, bool(command))
    if as_json:
        click.echo(json.dumps(replay_summary(plan_path, command, result, status, trace=written, csv=written_csv,
                                             simulated=result["simulated"] if result["windows"] else None),
                              default=str))
    raise SystemExit(status)


def replay_summary(plan_path, command, result: dict, status: int, *, trace=None, csv=None, simulated=None,
                   **extra) -> dict:
    """The --json line: what ran, what was written, how the command ended and the exit status
    this program returns (mimesys/exitstatus.py)."""
    rc = result.get("exit_status")
    return {"plan": str(plan_path), "windows": result["windows"], "plan_windows": result.get("plan_windows"),
            "repetitions": result.get("repetitions"), "state": result["state"], "error": result["error"],
            "simulated": simulated, "trace": str(trace) if trace is not None else None,
            "csv": str(csv) if csv is not None else None, **extra,
            "command": list(command) or None,
            "command_exit_status": rc if rc is None or rc >= 0 else None,
            "command_signal": -rc if rc is not None and rc < 0 else None,
            "command_wall_s": round(result["wall_s"], 6) if command and rc is not None else None,
            "exit_status": status}


def _report_command(command, result, say=click.echo) -> None:
    if not command:
        return
    say(f"command: {shlex.join(command)}")
    if result["exit_status"] is None:
        say("  not run (the workload failed before its first window ended)")
    else:
        rc = result["exit_status"]
        how = f"killed by signal {-rc} ({signal.Signals(-rc).name})" if rc < 0 else f"exit status {rc}"
        say(f"  {how}, wall time {result['wall_s']:.3f} s")


def prepare_plan(plan, fingerprint: dict, max_threads: int, *, strict: bool, fold: bool):
    """The plan as this host will run it: refused (--strict) or warned about when it was made for
    other hardware; folded onto max_threads CPUs with --fold-threads."""
    from mimesys.errors import ValidationError
    from mimesys.exitstatus import WorkloadFailure
    from ..fingerprint import hardware_differences
    from ..fold import fold_threads
    diffs = hardware_differences(plan.host_fingerprint, fingerprint) if plan.host_fingerprint else []
    if diffs:
        msg = "the plan was made for other hardware: " + "; ".join(diffs)
        if strict:
            raise ValidationError(msg + " (--strict)")
        # msg quotes the plan's fingerprint, the file's words
        click.echo(f"warning: {printable(msg)}; its contention will not be the original's (--strict refuses)",
                   err=True)
    if plan.K > max_threads:
        if not fold:
            raise WorkloadFailure(f"plan has {plan.K} threads but this host has {max_threads} CPUs; "
                                  f"--fold-threads runs it on {max_threads}")
        plan, report = fold_threads(plan, max_threads)
        click.echo(f"folded {report['from_threads']} threads onto {report['to_threads']} CPUs: "
                   f"{report['dropped_fraction']:.1%} of the planned work did not fit "
                   f"({report['windows_scaled']} window(s) scaled down)", err=True)
    return plan


def replay_status(result: dict, wrapped: bool) -> int:
    """The exit status (mimesys/exitstatus.py): the wrapped command's own failure first, as
    time(1) does (-N from a signal becomes 128+N); then the plan's."""
    from mimesys.exitstatus import OK, SIGNAL_BASE, WORKLOAD, status_of_wait
    if wrapped and result["exit_status"] is not None and result["exit_status"] != 0:
        return status_of_wait(result["exit_status"])
    if result["state"] == "interrupted":
        return SIGNAL_BASE + signal.SIGINT
    if result["state"] != "done" or (wrapped and result["exit_status"] is None):
        return WORKLOAD
    return OK


async def _replay(cfg, plan, command: list[str], repetitions: int, seed, progress: bool,
                  textfile_dir: Path | None = None, *, spawn=None, prepare=None, output: Path | None = None) -> dict:
    """Run the plan here; each window goes to `output` as it is measured (agentd/trace_append.py:
    a replay beside a command that runs for days holds no window in memory), nothing kept
    without one."""
    be, plan, textfile = await _open_backend(cfg, plan, prepare, textfile_dir, command)
    run = _Replay(be, plan, command, repetitions, seed, textfile, spawn, output)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await run.supervise(stop, progress)
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
        await be.close()
        run.trace.close(sys.exc_info()[0] is None, repetitions=run.reps_done, state=run.state)
    if textfile is not None:
        textfile.finish(run.state, run.exit_status())
    return run.result()


async def _open_backend(cfg, plan, prepare, textfile_dir: Path | None, command: list[str]):
    """(the backend, the plan as `prepare` fits it to the backend's host, the Prometheus textfile
    or None); the backend closed again where preparing or the textfile fails."""
    from ..backend_registry import create_backend

    be = create_backend(cfg)
    if prepare is not None:
        try:
            plan = prepare(plan, be.info().fingerprint, be.max_threads)
        except BaseException:
            await be.close()
            raise
    textfile = None
    if textfile_dir is not None:
        from ..prometheus.textfile import ReplayTextfile
        try:
            textfile = ReplayTextfile(textfile_dir, plan, be.metric_schema(), command=command)
        except BaseException:
            await be.close()
            raise
    return be, plan, textfile


class _Replay:
    """One replay here as its parts share it: the plan's windows run on the backend (repeated
    for as long as the command beside it runs) and recorded (agentd/replay_trace.py), the
    command beside them, and what the result reports."""

    def __init__(self, be, plan, command: list[str], repetitions: int, seed, textfile, spawn, output: Path | None):
        from ..replay_trace import ReplayTrace

        self.be, self.plan, self.command, self.repetitions, self.seed = be, plan, command, repetitions, seed
        self.textfile, self.spawn = textfile, spawn
        self.info = be.info()
        self.trace = ReplayTrace(output, self.info, be.metric_schema(), plan, command, seed)
        self.windows_done = self.reps_done = 0
        self.proc = None                         # the command's process
        self.cmd_started = self.cmd_wall = None
        self.state, self.error = "done", None
        self.command_started = asyncio.Event()

    async def supervise(self, stop: asyncio.Event, progress: bool) -> None:
        """The windows run until the plan's repetitions are done or the command ends (then
        cut short), or stop is set (Ctrl-C: passed on to the command, which is awaited)."""
        from tqdm import tqdm

        from mimesys.errors import MimesysError

        with tqdm(total=None if self.command else self.plan.T * self.repetitions, unit="window",
                  disable=not progress, desc="replay") as bar:
            work = asyncio.create_task(self.workload(bar))
            stopper = asyncio.create_task(stop.wait())
            if self.command:
                await self._beside_command(work, stopper, stop)
            else:
                await asyncio.wait({work, stopper}, return_when=asyncio.FIRST_COMPLETED)
            stopper.cancel()
            if not work.done():
                work.cancel()
                self.state = "interrupted" if stop.is_set() and not self.command else "done"
            try:
                await work
            except asyncio.CancelledError:
                pass
            except MimesysError as e:
                self.state, self.error = "failed", str(e)

    async def _beside_command(self, work: asyncio.Task, stopper: asyncio.Task, stop: asyncio.Event) -> None:
        started = asyncio.create_task(self.command_started.wait())
        await asyncio.wait({work, started, stopper}, return_when=asyncio.FIRST_COMPLETED)
        if self.proc is not None:
            ended = asyncio.create_task(self.proc.wait())
            await asyncio.wait({ended, stopper, work}, return_when=asyncio.FIRST_COMPLETED)
            if not ended.done():
                if stop.is_set():   # Ctrl-C: pass it on to the command and wait for it
                    from ..runas import interrupt
                    interrupt(self.proc)
                await ended
            self.cmd_wall = time.monotonic() - self.cmd_started
        started.cancel()

    async def workload(self, bar) -> None:
        """The plan, one repetition at a time: repetitions of them, or without end beside a
        command (which starts once the first window is measured)."""
        from mimesys.backend import RunOptions

        total = None if self.command else self.repetitions
        while total is None or self.reps_done < total:
            options = RunOptions(repetitions=1, seed=self.seed)
            async with contextlib.aclosing(self.be.execute(self.plan, options)) as windows:
                async for w in windows:
                    self.trace.append(w)
                    self.windows_done += 1
                    bar.update(1)
                    if self.textfile is not None:
                        self.textfile.window(w)
                    if self.command and self.proc is None:
                        await self._start_command()
            self.reps_done += 1

    async def _start_command(self) -> None:
        from mimesys.errors import ValidationError

        self.cmd_started = time.monotonic()
        if self.spawn is not None:
            self.proc = await self.spawn(self.command)
        else:
            try:
                self.proc = await asyncio.create_subprocess_exec(*self.command)
            except OSError as e:
                raise ValidationError(f"cannot start {self.command[0]!r}: {e.strerror or e}") from None
        self.command_started.set()

    def exit_status(self) -> int | None:
        return self.proc.returncode if self.proc is not None else None

    def result(self) -> dict:
        return {"trace_path": self.trace.path,
                "simulated": bool(self.info.simulated), "windows": self.windows_done, "plan_windows": self.plan.T,
                "repetitions": self.reps_done, "state": self.state, "error": self.error,
                "exit_status": self.exit_status(), "wall_s": self.cmd_wall or 0.0}
