"""The planner wing's one registry (mimesys/planners/registry.py): every kind registered once,
the kind lists and the help text come from it, and callers reach every planner by spec."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import controller  # noqa: F401  (registers the dataset baselines)
from mimesys.errors import ConfigError
from mimesys.planners import registry

ROOT = Path(__file__).resolve().parent.parent
AGENT_KINDS = ["diffusion", "inverse", "inverse-first-order", "select"]
BASELINES = ["nearest", "knn", "single"]


def test_every_kind_is_registered_once_and_the_agent_sees_only_its_own():
    assert registry.kinds() == AGENT_KINDS + BASELINES
    assert registry.kinds(agent_only=True) == AGENT_KINDS
    assert registry.kinds(group="baseline") == BASELINES


def test_help_names_every_kind_it_can_build_and_no_other():
    agent_help, full = registry.help_text(agent_only=True), registry.help_text()
    for k in AGENT_KINDS:
        assert k in agent_help and k in full
    for k in BASELINES:
        assert not re.search(rf"\b{k}\b", agent_help) and re.search(rf"\b{k}\b", full)


def test_specs_for_builds_every_method_the_inputs_allow_and_leaves_variants_out():
    specs = registry.specs_for({"model": "M", "forward": "F", "dataset": "D"})
    assert specs == {"diffusion": "diffusion:M", "inverse": "inverse:F", "select": "select:M,F",
                     "nearest": "nearest:D", "knn": "knn:D", "single": "single:D"}
    assert registry.specs_for({"forward": "F"}) == {"inverse": "inverse:F"}


def test_a_bare_kind_takes_its_inputs_as_options_and_says_how_when_they_are_missing(tmp_path):
    with pytest.raises(ConfigError, match=r"write nearest:DATASET, or pass --dataset"):
        registry.load_planner("nearest")
    with pytest.raises(ConfigError, match="unknown baseline 'oracle'; known: nearest, knn, single"):
        registry.load_planner("baseline:oracle")
    with pytest.raises(ConfigError, match="is not a file"):
        registry.load_planner(f"knn:{tmp_path / 'absent.h5'}")


def _docstring_lines(tree: ast.AST) -> set[int]:
    lines = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                lines.update(range(first.lineno, first.end_lineno + 1))
    return lines


def test_no_caller_outside_the_planner_wing_names_a_planner_kind():
    """The kinds are written in the registry's rows only: callers take them from there (prose in
    docstrings and comments aside)."""
    pattern = re.compile(r"""\b(knn|nearest|inverse-first-order)\b|["'](diffusion|inverse|select|single)["':=,]""")
    found = []
    for top in ("mimesys", "agentd", "controller"):
        for p in sorted((ROOT / top).rglob("*.py")):
            rel = p.relative_to(ROOT).as_posix()
            if rel.startswith(("mimesys/planners/", "controller/baselines/")):
                continue
            text = p.read_text()
            prose = _docstring_lines(ast.parse(text))
            for i, line in enumerate(text.splitlines(), 1):
                if i not in prose and pattern.search(line.split("#", 1)[0]):
                    found.append(f"{rel}:{i}: {line.strip()}")
    assert not found, "\n".join(found)
