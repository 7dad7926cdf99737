"""Every absolute import a package's source names, read with ast (function-level imports too):
the layering and packaging tests read the same list."""

from __future__ import annotations

import ast
from pathlib import Path


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
