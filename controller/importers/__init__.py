"""Trace importers: one foreign format per module, each registering itself by name with one
line at its bottom (`register("alibaba", load, "...")`). The CLI's `--format` choices come
from `names()`; adding a format is adding a file.

Every importer is `load(path, *, window_s, **options) -> (Trace, ImportReport)`: metrics in
agentd's naming scheme, NaN where the source did not measure something (never 0), and a
report of what was mapped and what was dropped. Malformed input raises
`base.TraceImportError` naming the file, the line and what was expected; nothing is written.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from mimesys.errors import ConfigError
from mimesys.lazyload import PackageModules


@dataclass(frozen=True)
class ImporterEntry:
    name: str
    load: Callable
    description: str
    aliases: tuple[str, ...] = ()


REGISTRY: dict[str, ImporterEntry] = {}
_ALIASES: dict[str, str] = {}
_MODULES = PackageModules(__name__, skip=lambda name: name == "base")   # base: what the importers share


def register(name: str, load: Callable, description: str, *, aliases: tuple[str, ...] = ()) -> None:
    if name in REGISTRY and _guarded.get(REGISTRY[name].load) is not load:
        raise RuntimeError(f"two importers named {name!r}")
    REGISTRY[name] = ImporterEntry(name, _guard(load), description, tuple(aliases))
    for a in aliases:
        _ALIASES[a] = name


_guarded: dict = {}


def _guard(load: Callable) -> Callable:
    """Every importer's failure on malformed input is a TraceImportError naming the file, never
    a traceback: the CSV module's field limit, numbers out of range, bad encodings, bad gzip."""
    import csv
    import functools
    import zlib

    from .base import TraceImportError

    @functools.wraps(load)
    def guarded(path, *args, **kwargs):
        try:
            return load(path, *args, **kwargs)
        except TraceImportError:
            raise
        except csv.Error as e:
            raise TraceImportError(path, f"malformed CSV: {e}") from None
        except UnicodeDecodeError as e:
            raise TraceImportError(path, f"not UTF-8 text (byte {e.start})") from None
        except (zlib.error, EOFError) as e:
            raise TraceImportError(path, f"corrupt compressed data: {e}") from None
        except (ValueError, OverflowError, IndexError, KeyError, TypeError) as e:
            raise TraceImportError(path, f"malformed input ({type(e).__name__}: {str(e)[:200]})") from None
        except MemoryError:
            raise TraceImportError(path, "too large to import in this much memory") from None
    _guarded[guarded] = load
    return guarded


def names() -> list[str]:
    """Format names, sorted; the CLI's --format choices."""
    _MODULES.load()
    return sorted(REGISTRY)


def get(name: str) -> ImporterEntry:
    _MODULES.load()
    name = _ALIASES.get(name, name)
    if name not in REGISTRY:
        raise ConfigError(f"unknown trace format {name!r}; known: {', '.join(sorted(REGISTRY))}")
    return REGISTRY[name]
