"""agentd must install and run without PyTorch and never import controller."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_agentd_imports_without_torch_or_controller():
    # Import every agentd module in a fresh interpreter where torch and controller are poisoned.
    code = """
import sys, importlib, pkgutil
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in ('torch', 'controller', 'sklearn'):
            raise ImportError('agentd must not import ' + name)
sys.meta_path.insert(0, Block())
import agentd
for m in pkgutil.walk_packages(agentd.__path__, 'agentd.'):
    importlib.import_module(m.name)
print('ok')
"""
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
