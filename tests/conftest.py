import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED_TRACES = Path(os.environ.get("MIMESYS_SHARED_TRACES", ROOT.parent / "shared" / "traces"))


@pytest.fixture(scope="session")
def catalog():
    from agentd.catalog import load_catalog
    return load_catalog(ROOT / "stressors" / "catalog.toml")
