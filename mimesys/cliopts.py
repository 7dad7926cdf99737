"""Options both command lines share, so one idea has one name everywhere:
`--progress/--no-progress` (bars; default: only when stderr is a terminal), `-o/--output`
(the file or directory a command writes), `--json` (only JSON on stdout). Older spellings
stay as hidden aliases for a release."""

from __future__ import annotations

import functools
import os
import sys

import click


def show_progress(flag: bool | None, stream=None) -> bool:
    """An explicit --progress/--no-progress wins; else bars only when stderr is a terminal
    (a bar redrawn into a log file or a CI capture is noise)."""
    if flag is not None:
        return flag
    stream = stream if stream is not None else sys.stderr
    try:
        return bool(stream.isatty()) and os.environ.get("TERM") != "dumb"
    except (AttributeError, ValueError):
        return False


def progress_option(f):
    """--progress/--no-progress (default: auto), and the old --quiet as a hidden alias of
    --no-progress; the command receives `progress` as a bool already resolved."""
    f = click.option("--quiet", "quiet_alias", is_flag=True, hidden=True, expose_value=True)(f)
    f = click.option("--progress/--no-progress", "progress", default=None,
                     help="Progress bar on stderr (default: only when stderr is a terminal).")(f)
    return _resolving(f)


def _resolving(f):
    @functools.wraps(f)
    def wrapper(*args, progress=None, quiet_alias=False, **kw):
        return f(*args, progress=show_progress(False if quiet_alias else progress), **kw)
    return wrapper


JSON_HELP = "Print only JSON on stdout (messages go to stderr)."


def json_option(f=None, *, help: str = JSON_HELP):
    """--json (the command receives `as_json`): stdout carries one JSON document and nothing
    else. `@json_option`, or `@json_option(help=...)` where a command says more (what the
    document holds, where a wrapped command's output goes)."""
    def deco(g):
        return click.option("--json", "as_json", is_flag=True, help=help)(g)
    return deco(f) if f is not None else deco


def renamed_option(name: str, dest: str, *old: str, required: bool = False, default=None, short: str | None = None,
                   **kw):
    """`name` (and `short`) as the one spelling shown in --help; `old` spellings keep working
    as hidden aliases for a release. Giving two spellings at once is a usage error."""
    def deco(f):
        olds = [(o, f"_old_{dest}_{i}") for i, o in enumerate(old)]

        @functools.wraps(f)
        def wrapper(*args, **kwargs):
            value = kwargs.pop(dest)
            for spelling, odest in olds:
                ov = kwargs.pop(odest)
                if ov is None:
                    continue
                if value is not None:
                    raise click.UsageError(f"{spelling} is the old spelling of {name}; give one of them")
                value = ov
            if value is None:
                if required:
                    raise click.UsageError(f"Missing option '{name}'.")
                value = default
            kwargs[dest] = value
            return f(*args, **kwargs)

        for spelling, odest in olds:
            wrapper = click.option(spelling, odest, hidden=True, default=None, type=kw.get("type"))(wrapper)
        names = ([short] if short else []) + [name]
        opts = dict(kw)
        if default is not None and opts.get("show_default"):
            opts["show_default"] = str(default)
        return click.option(*names, dest, default=None, **opts)(wrapper)
    return deco


def output_option(dest: str, *old: str, **kw):
    """-o/--output: the file or directory a command writes."""
    return renamed_option("--output", dest, *old, short="-o", **kw)


class _NoBar:
    length = pos = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def update(self, n):
        self.pos += n


def progressbar(enabled: bool, **kw):
    """click.progressbar on stderr when enabled (stdout stays the command's result), else a
    stand-in with the same update()/length/pos."""
    if not enabled:
        return _NoBar()
    return click.progressbar(file=sys.stderr, **kw)


def stderr_fd() -> int:
    """This process's stderr as a file descriptor for a child's stdout (--json: stdout is the
    document's alone); 2 when sys.stderr has none (a test runner's capture)."""
    try:
        sys.stderr.flush()
        return sys.stderr.fileno()
    except (AttributeError, ValueError, OSError):
        return 2
