"""Every absolute import a package's source names, read with ast (function-level imports too):
the layering and packaging tests read the same list. Imports by name -- `importlib.import_module`
and `__import__` of a literal (or of an f-string, `+` or `%`/`.format` whose package is literal),
and the registries' "package.module:attribute" strings -- are read by dynamic_imports."""

from __future__ import annotations

import ast
import re
from pathlib import Path

# A registry entry naming what to import (mimesys/lazycli.py, agentd/backend_registry.py, ...).
TARGET = re.compile(r"[A-Za-z_]\w*(\.\w+)+:[A-Za-z_]\w*")
WILDCARD = "*"   # stands for a part of a name only known when the code runs


def absolute_imports(package: Path):
    """(file, imported module) for every `import X` / `from X import ...` under `package`."""
    for py in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(py.read_text(), str(py))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                yield py, name


def dynamic_imports(package: Path):
    """(file, module) for every import by name under `package` (see names_imported_by_name)."""
    for py in sorted(package.rglob("*.py")):
        for name in names_imported_by_name(py.read_text(), str(py)):
            yield py, name


def names_imported_by_name(source: str, filename: str = "<source>") -> list[str]:
    """The modules `source` imports by name, as far as the source spells them: a part known only
    at run time is WILDCARD ("agentd.*"); a call whose package part is not literal is skipped."""
    names = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Call) and _imports_by_name(node.func) and node.args:
            name = _literal_prefix(node.args[0])
            if name and name.startswith("."):          # import_module(".runs", "agentd")
                package = node.args[1] if len(node.args) > 1 else _keyword(node, "package")
                name = _resolve_relative(name, _literal_prefix(package) if package is not None else None)
            if name:
                names.append(name)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and TARGET.fullmatch(node.value):
            names.append(node.value.split(":")[0])
    return names


def _imports_by_name(func: ast.expr) -> bool:
    """importlib.import_module / import_module / __import__ / builtins.__import__."""
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
    return name in ("import_module", "__import__")


def _keyword(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def _literal_prefix(node: ast.expr) -> str | None:
    """The module name `node` spells, WILDCARD for each part known only at run time; None when
    even its first package is not literal (f"{pkg}.runs", a variable)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        text = node.value
    elif isinstance(node, ast.JoinedStr):                                  # f"agentd.{x}"
        text = "".join(v.value if isinstance(v, ast.Constant) else WILDCARD for v in node.values)
    elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):    # "agentd." + x
        left = _literal_prefix(node.left)
        if left is None:
            return None
        text = left + (_literal_prefix(node.right) or WILDCARD)
    elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod) and isinstance(node.left, ast.Constant):
        text = re.sub(r"%\w", WILDCARD, str(node.left.value))              # "agentd.%s" % x
    elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format"
          and isinstance(node.func.value, ast.Constant)):
        text = re.sub(r"\{[^}]*\}", WILDCARD, str(node.func.value.value))  # "agentd.{}".format(x)
    else:
        return None
    if text.startswith("."):
        return text                       # relative: resolved against the package argument
    first = text.split(".")[0]
    return text if first and WILDCARD not in first else None


def _resolve_relative(name: str, package: str | None) -> str | None:
    """importlib's rule: each leading dot past the first climbs one package up."""
    if not package or WILDCARD in package.split(".")[0]:
        return None
    dots = len(name) - len(name.lstrip("."))
    parts = package.split(".")
    if dots - 1 >= len(parts):
        return None
    base = ".".join(parts[:len(parts) - (dots - 1)])
    rest = name[dots:]
    return f"{base}.{rest}" if rest else base
