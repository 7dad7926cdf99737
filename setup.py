"""Build hook: compiling the native runner is part of installing the package.

`pip install .` / `pip install -e .` (and so `make setup`) run `make -C stressors`
(gcc -O2, links libzstd) and ship the result as package data agentd/_bin/mimesys-runner,
with the stressor catalog as mimesys/data/catalog.toml. Editable installs leave the
source tree alone: agentd.runner.find_runner() finds stressors/build/mimesys-runner there,
so a later `make -C stressors` is picked up without reinstalling. Metadata lives in
pyproject.toml.
"""

import shutil
import subprocess
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent


class BuildPyWithRunner(build_py):
    def run(self):
        subprocess.run(["make", "-C", str(ROOT / "stressors")], check=True)
        super().run()
        if getattr(self, "editable_mode", False):
            return
        bin_dir = Path(self.build_lib) / "agentd" / "_bin"
        bin_dir.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / "stressors" / "build" / "mimesys-runner", bin_dir / "mimesys-runner")
        data_dir = Path(self.build_lib) / "mimesys" / "data"
        data_dir.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / "stressors" / "catalog.toml", data_dir / "catalog.toml")


setup(cmdclass={"build_py": BuildPyWithRunner})
