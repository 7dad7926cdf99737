"""Code loaded on first use, for the registries of named things. Two ways, one helper each:

- `load_target("package.module:attribute")`: an entry written as a string, imported only
  when it is asked for (the CLIs' commands, the agent's backends, the demo's parts), so a
  command or a backend that is not used never loads its dependencies.
- `PackageModules(package)`: a package whose modules each register themselves with one line
  at their bottom (the samplers, the trace importers), imported all at once on the first
  lookup, so adding one is adding a file.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any, Callable


def load_target(target: str) -> Any:
    """"package.module:attribute" -> the attribute; ImportError / AttributeError as Python raises them."""
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)


class PackageModules:
    """Every module of `package` (a dotted name) but those `skip` names, imported on the first load()."""

    def __init__(self, package: str, *, skip: Callable[[str], bool] = lambda name: False):
        self.package = package
        self.skip = skip
        self.loaded = False

    def load(self) -> None:
        if self.loaded:
            return
        path = importlib.import_module(self.package).__path__
        for m in pkgutil.iter_modules(path):
            if not self.skip(m.name):
                importlib.import_module(f"{self.package}.{m.name}")
        self.loaded = True
