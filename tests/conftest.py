import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED_TRACES = Path(os.environ.get("MIMESYS_SHARED_TRACES", ROOT.parent / "shared" / "traces"))


@pytest.fixture(scope="session")
def catalog():
    from mimesys.catalog import load_catalog
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


@pytest.fixture(scope="session")
def paced_calibration(catalog, tmp_path_factory):
    """A real calibration of the paced variants' bases (one thread, 0.2 s each, on this
    machine), so that a test agent given it accepts plans that use paced variants (an agent
    without one refuses them). runner_helpers.write_calibration(state_dir, doc) installs it."""
    import asyncio

    from agentd.calibrator import measure
    from agentd.runner import RunnerConfig
    from runner_helpers import runner_or_skip
    runner_or_skip()
    bases = sorted({catalog.stressors[m].pace["base"] for m in catalog.paced()})
    scratch = tmp_path_factory.mktemp("calibration-scratch")
    return asyncio.run(measure(RunnerConfig(cpus=(0,), scratch_dir=scratch), window_s=0.2, all_threads=False,
                               only=bases, catalog=catalog))



def pytest_ignore_collect(collection_path, config):
    """`-m serial` alone (make test's second phase) imports only the test files that mark a test
    serial: a test is marked in its own file, so one that never says "serial" has none, and
    importing the other ~70 modules (PyTorch among them) only to deselect them took ~6 s."""
    if (config.getoption("markexpr", "") == "serial" and collection_path.suffix == ".py"
            and collection_path.name.startswith("test_") and "serial" not in collection_path.read_text()):
        return True
    return None


def pytest_collection_modifyitems(config, items):
    """Files with slow tests first, the most slow tests first (collection order otherwise).
    `make test`'s parallel phase hands a whole file to one worker in this order
    (--dist loadfile --no-loadscope-reorder): a long file started last would finish alone while
    the other workers idle. A stable sort: the tests of a file keep their order."""
    from collections import Counter
    slow = Counter(item.path for item in items if item.get_closest_marker("slow"))
    first_seen = {p: i for i, p in enumerate(dict.fromkeys(item.path for item in items))}
    items.sort(key=lambda item: (-slow[item.path], first_seen[item.path]))
