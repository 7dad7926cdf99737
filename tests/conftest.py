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


def perf_usable() -> bool:
    """System-wide software perf events work here (they go through the same syscall as the
    hardware ones, so they are how this VM exercises the perf binding)."""
    from agentd.perf.events import SW_CONTEXT_SWITCHES, PerfEventError, probe_event
    try:
        probe_event(SW_CONTEXT_SWITCHES, cpu=0)
        return True
    except PerfEventError:
        return False


needs_perf = pytest.mark.skipif(not perf_usable(), reason="system-wide software perf events not permitted here")
