"""The house's three parts and the arrows allowed between them.

    mimesys/     the shared core (formats, errors, forward model, planners, ...): imports neither
                 agentd nor controller, and never torch
    agentd/      the daemon: imports the core, never the controller, never torch
    controller/  imports the core, never the daemon (EXCEPTIONS below say where and why)

Each rule is checked twice: by reading every import statement (function-level ones too, and
imports by name: `importlib.import_module` / `__import__` of a literal, a registry's
"package.module:attribute" string) and by importing every module in a fresh interpreter where
the forbidden packages cannot load.
"""

import itertools
import subprocess
import sys
from pathlib import Path

from importscan import absolute_imports, dynamic_imports, names_imported_by_name

ROOT = Path(__file__).resolve().parent.parent

# (importing file, daemon module) -> why the controller may reach into the daemon there.
EXCEPTIONS: dict[tuple[str, str], str] = {}


def _imports(package: str, root: Path = ROOT):
    """(file relative to root, imported module) for every absolute import under `package`, by
    statement or by name."""
    for py, name in itertools.chain(absolute_imports(root / package), dynamic_imports(root / package)):
        yield str(py.relative_to(root)), name


def _top(name: str) -> str:
    return name.split(".")[0]


def _import_all(packages: tuple[str, ...], blocked: tuple[str, ...]) -> subprocess.CompletedProcess:
    """Import every module of `packages` in a fresh interpreter where `blocked` cannot load."""
    code = f"""
import sys, importlib, pkgutil
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in {blocked!r}:
            raise ImportError('must not import ' + name)
sys.meta_path.insert(0, Block())
for pkg in {packages!r}:
    top = importlib.import_module(pkg)
    for m in pkgutil.walk_packages(top.__path__, pkg + '.'):
        importlib.import_module(m.name)
print('ok')
"""
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)


def test_agentd_imports_without_torch_or_controller():
    # The agent is agentd plus the core: every module of both, with torch and controller poisoned.
    out = _import_all(("mimesys", "agentd"), ("torch", "controller", "sklearn"))
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_the_core_imports_neither_the_daemon_nor_the_controller():
    found = [(f, m) for f, m in _imports("mimesys") if _top(m) in ("agentd", "controller", "torch", "sklearn")]
    assert not found, f"the core (mimesys/) must stand alone: {found}"
    out = _import_all(("mimesys",), ("agentd", "controller", "torch", "sklearn"))
    assert out.returncode == 0, out.stderr


def test_agentd_never_names_the_controller_or_torch():
    found = [(f, m) for f, m in _imports("agentd") if _top(m) in ("controller", "torch", "sklearn")]
    assert not found, found


def _controller_daemon_imports(root: Path = ROOT) -> set[tuple[str, str]]:
    return {(f, m) for f, m in _imports("controller", root) if _top(m) == "agentd"}


def test_the_controller_imports_the_core_never_the_daemon():
    found = _controller_daemon_imports()
    unexplained = sorted(p for p in found if p not in EXCEPTIONS)
    assert not unexplained, (f"the controller imports the daemon (move what is shared into mimesys/, "
                             f"or list it in EXCEPTIONS with the reason): {unexplained}")
    stale = sorted(p for p in EXCEPTIONS if p not in found)
    assert not stale, f"EXCEPTIONS lists imports that are gone; remove them: {stale}"


def test_importing_the_controller_loads_no_daemon_module():
    code = """
import importlib, pkgutil, sys
import controller
for m in pkgutil.walk_packages(controller.__path__, 'controller.'):
    importlib.import_module(m.name)
print(sorted(m for m in sys.modules if m.split('.')[0] == 'agentd'))
"""
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]", out.stdout


def test_imports_by_name_are_read_too():
    """What the import statements do not show: importlib and __import__ of a literal name (a part
    known only at run time reads as *), relative names against a literal package, registry entries."""
    source = """
import builtins, importlib
from importlib import import_module
importlib.import_module("agentd.runs")
importlib.import_module(f"agentd.samplers.{name}")
import_module("agentd." + name)
importlib.import_module("agentd.%s" % name)
importlib.import_module("agentd.{}".format(name))
importlib.import_module(".runs", package="agentd.api")
__import__("agentd.config")
builtins.__import__("agentd")
PARTS = {"agent": "agentd.commands.serve:serve"}
importlib.import_module(name)                     # not literal: nothing to read
importlib.import_module(f"{package}.runs")        # nor is its package
AGENT_CLI = "agentd.cli"                          # a `python -m` target, not an import
COLOR = "tab:blue"
"""
    assert names_imported_by_name(source) == [
        "agentd.runs", "agentd.samplers.*", "agentd.*", "agentd.*", "agentd.*", "agentd.api.runs", "agentd.config",
        "agentd", "agentd.commands.serve"]


def test_a_daemon_import_by_name_in_the_controller_is_caught(tmp_path):
    """The controller rule fails on a module that imports the daemon through importlib (planted in
    a throwaway tree, never in this one)."""
    planted = tmp_path / "controller" / "commands" / "planted.py"
    planted.parent.mkdir(parents=True)
    planted.write_text('import importlib\n\nRUNS = importlib.import_module("agentd.runs")\n')
    assert _controller_daemon_imports(tmp_path) == {("controller/commands/planted.py", "agentd.runs")}
