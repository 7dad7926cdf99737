"""The scripting contract of both command lines (`mimesys-agent` and `mimesys`): one table of
exit statuses, and the click group that applies it, so a script can tell "bad arguments" from
"some runs failed" from "the benchmark I wrapped crashed" without parsing text.

The table is the single source: the man pages are generated from it (docs/guide.md, "Scripting",
explains it for people), and tests/test_exit_status.py covers every row.
"""

from __future__ import annotations

import signal
import sys

import click

from .errors import MimesysError

OK = 0
ERROR = 1        # the command failed: bad input, an unreachable agent, a refused plan, ...
USAGE = 2        # bad command line (click's own status for usage errors)
PARTIAL = 3      # some of several independent items failed, the others are reported
WORKLOAD = 4     # the workload (the plan) failed while the command around it succeeded
DIVERGED = 5     # training stopped: the loss is no longer finite
SIGNAL_BASE = 128  # 128+N: killed by signal N (the wrapped command, or this program itself)

TABLE: tuple[tuple[str, str], ...] = (
    ("0", "Success."),
    ("1", "Error: the command failed (bad input file, unreachable agent, refused plan, runner error, ...); "
          "the message on stderr names what and where."),
    ("2", "Usage error: unknown option, missing or malformed argument."),
    ("3", "Partial failure: some of several independent items failed and the rest were done "
          "(evaluate: some runs failed; fleet probe: some agents unreachable)."),
    ("4", "Workload failure: the plan's execution failed (runner error) while the command wrapped by "
          "replay succeeded; run-plan/replay without a command whose runner did not finish."),
    ("5", "Diverged: training stopped because the loss became NaN or infinite."),
    ("128+N", "Killed by signal N: replay's wrapped command died of signal N, or this program was "
              "interrupted (130 for Ctrl-C)."),
)

REPLAY_NOTE = ("replay -- CMD exits with CMD's own status when CMD fails (non-zero exit, or 128+N on signal N), "
               "like time(1) and timeout(1); 4 only when CMD succeeded but the plan did not.")


class PartialFailure(MimesysError):
    """Raised (or its status used) when some items of a batch failed."""
    exit_status = PARTIAL


class WorkloadFailure(MimesysError):
    exit_status = WORKLOAD


class Diverged(MimesysError):
    """Training's loss became NaN/inf: a clear message and its own status, not a traceback."""
    exit_status = DIVERGED


def status_of_wait(returncode: int | None) -> int:
    """A child's exit as a shell would report it: asyncio/subprocess give -N for signal N."""
    if returncode is None:
        return ERROR
    return SIGNAL_BASE - returncode if returncode < 0 else returncode


class ScriptedGroup(click.Group):
    """A click group whose exit status follows TABLE: MimesysError -> one line on stderr and
    its `exit_status` (1 by default), never a traceback; Ctrl-C -> 130."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        try:
            rv = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except click.ClickException as e:
            e.show()
            sys.exit(e.exit_code)
        except click.Abort as e:
            # click raises Abort `from e` (8.1.7+) or `from None` (Debian 12's 8.1.3): the interrupt
            # is the cause or the context.
            if isinstance(e.__cause__ or e.__context__, KeyboardInterrupt):
                click.echo("interrupted", err=True)
                sys.exit(SIGNAL_BASE + signal.SIGINT)
            click.echo("Aborted!", err=True)
            sys.exit(ERROR)
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            sys.exit(SIGNAL_BASE + signal.SIGINT)
        except MimesysError as e:
            click.echo(f"Error: {e}", err=True)
            sys.exit(getattr(e, "exit_status", ERROR))
        except BrokenPipeError:
            # `mimesys-agent trace csv X | head`: the reader left; not an error of ours.
            sys.stderr.close()
            sys.exit(OK)
        sys.exit(rv if type(rv) is int else OK)   # a callback returning True is not status 1


def click_error(e: MimesysError) -> click.ClickException:
    """A MimesysError as a one-line click error that keeps its exit status."""
    from .terminal import printable
    err = click.ClickException(printable(e, multiline=True))   # messages quote names from files
    err.exit_code = getattr(e, "exit_status", ERROR)
    return err
