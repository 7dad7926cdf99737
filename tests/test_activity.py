"""The no-invented-activity rule behind every planner (agentd/activity.py, agentd/planners.py)."""

from __future__ import annotations

import numpy as np

from agentd.activity import GuardedPlanner
from agentd.catalog import load_catalog
from agentd.metrics import MetricSpec
from agentd.plan import Plan
from agentd.trace import Trace


class _Everything:
    """A planner that runs every stressor a little in every window (what a model trained on a
    campaign of random compositions proposes)."""
    name = "everything"

    def __init__(self, names):
        self.names = names

    def generate(self, trace, *, seed=0):
        a = np.full((trace.T, len(self.names), 2), 0.5 / len(self.names), np.float32)
        return Plan(a, list(self.names), "sha256:x")


def test_any_planner_behind_the_guard_adds_no_io_where_the_target_had_none():
    cat = load_catalog()
    names = [s.name for s in cat.stressors]
    kernel = {s.name: s.kernel for s in cat.stressors}
    T = 6
    metrics = ["cpu.util.core0", "disk.read_Bps", "disk.write_Bps", "net.lo.tx_Bps", "disk.busy"]
    v = np.zeros((T, len(metrics)), np.float32)
    v[:, 0] = 0.5
    v[:3, 1] = 50e6            # reads in the first half only
    v[:, 2] = 100e3            # journal-sized writes: idle as a person sees it
    v[:, 3] = np.nan           # loopback not measured: nothing to judge, nothing removed
    v[:, 4] = 0.6              # busy all along: a derived signal, not a reason to read
    trace = Trace(v, [MetricSpec(n, "fraction" if n.startswith(("cpu", "disk.busy")) else "B/s") for n in metrics])
    gen = GuardedPlanner(_Everything(names))
    assert gen.name == "everything"                    # the planner's own attributes pass through
    plan = gen.generate(trace)
    a = plan.compositions
    reads = [m for m, n in enumerate(names) if kernel[n] in ("disk_qd_read", "disk_seq_read", "disk_rand_read",
                                                             "disk_readahead")]
    writes = [m for m, n in enumerate(names) if kernel[n] in ("disk_qd_write", "disk_seq_write", "disk_fallocate",
                                                              "pagecache_rw")]
    compute = [m for m, n in enumerate(names) if kernel[n] in ("int_crc32", "stream_triad")]
    net = [m for m, n in enumerate(names) if kernel[n] == "tcp_loopback"]
    assert reads and writes and compute and net
    assert a[:3, reads].min() > 0 and a[3:, reads].max() == 0.0
    assert a[:, writes].max() == 0.0
    assert a[:, compute].min() > 0 and a[:, net].min() > 0
    removed = plan.provenance["activity_guard"]["entries_removed"]
    assert removed == (3 * len(reads) + T * len(writes)) * 2


def test_every_baseline_comes_back_guarded(tmp_path, catalog):
    """The dataset baselines keep the rule too (the registry's planners: test_forward's inverse
    tests and the planner specs test go through load_planner)."""
    from controller.baselines import KINDS, from_dataset
    from test_model_toydata import write_toy_dataset
    toy = write_toy_dataset(tmp_path / "toy.h5", catalog, S=50)
    for kind in KINDS:
        assert isinstance(from_dataset(kind, toy), GuardedPlanner), kind
