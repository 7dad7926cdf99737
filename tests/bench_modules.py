"""Loading a bench script as a module in a test. The agent's tests on Debian's packages copy the
agent and its tests, not bench/: a test module of a bench calls require_bench at import, which
skips the whole module there."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]


def require_bench(name: str) -> Path:
    """bench/<name>.py, or the calling test module skipped where it is not beside the tests."""
    path = ROOT / "bench" / f"{name}.py"
    if not path.is_file():
        pytest.skip(f"{path} is not here: a bench's tests run in the checkout", allow_module_level=True)
    return path


def load_bench(name: str) -> ModuleType:
    """bench/<name>.py loaded afresh (its workloads importable, as when it runs)."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "bench" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(ROOT / "bench" / "workloads"))
    spec.loader.exec_module(mod)
    return mod
