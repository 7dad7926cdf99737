"""Trace importers: one foreign format per module, each registering itself by name with one
line at its bottom (`register("alibaba", load, "...")`). The CLI's `--format` choices come
from `names()`; adding a format is adding a file.

Every importer is `load(path, *, window_s, **options) -> (Trace, ImportReport)`: metrics in
agentd's naming scheme, NaN where the source did not measure something (never 0), and a
report of what was mapped and what was dropped. Malformed input raises
`base.TraceImportError` naming the file, the line and what was expected; nothing is written.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass
from typing import Callable

from agentd.errors import ConfigError


@dataclass(frozen=True)
class ImporterEntry:
    name: str
    load: Callable
    description: str
    aliases: tuple[str, ...] = ()


REGISTRY: dict[str, ImporterEntry] = {}
_ALIASES: dict[str, str] = {}
_NOT_IMPORTERS = {"base"}
_loaded = False


def register(name: str, load: Callable, description: str, *, aliases: tuple[str, ...] = ()) -> None:
    if name in REGISTRY and REGISTRY[name].load is not load:
        raise RuntimeError(f"two importers named {name!r}")
    REGISTRY[name] = ImporterEntry(name, load, description, tuple(aliases))
    for a in aliases:
        _ALIASES[a] = name


def _load_all() -> None:
    global _loaded
    if not _loaded:
        for m in pkgutil.iter_modules(__path__):
            if m.name not in _NOT_IMPORTERS:
                importlib.import_module(f"{__name__}.{m.name}")
        _loaded = True


def names() -> list[str]:
    """Format names, sorted; the CLI's --format choices."""
    _load_all()
    return sorted(REGISTRY)


def get(name: str) -> ImporterEntry:
    _load_all()
    name = _ALIASES.get(name, name)
    if name not in REGISTRY:
        raise ConfigError(f"unknown trace format {name!r}; known: {', '.join(sorted(REGISTRY))}")
    return REGISTRY[name]
