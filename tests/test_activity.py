"""The no-invented-activity rule behind every planner (mimesys/activity.py, mimesys/planners/registry.py)."""

from __future__ import annotations

import numpy as np

from mimesys.activity import GuardedPlanner
from mimesys.catalog import load_catalog
from mimesys.metrics import MetricSpec
from mimesys.plan import Plan
from mimesys.trace import Trace


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
    from controller.baselines.from_dataset import KINDS, from_dataset
    from test_model_toydata import write_toy_dataset
    toy = write_toy_dataset(tmp_path / "toy.h5", catalog, S=50)
    for kind in KINDS:
        assert isinstance(from_dataset(kind, toy), GuardedPlanner), kind


def test_page_cache_writes_run_only_where_the_writes_go_on_until_writeback(tmp_path):
    """Dirty pages reach the disk dirty_expire + dirty_writeback after they were written (measured:
    134 MB of writeback 5-7 windows after the target's writes stopped): a page-cache writer may run
    only where the target keeps writing over that horizon; a writer that syncs itself only where
    the target writes."""
    from mimesys import activity
    from mimesys.hostpaths import HostPaths

    vm = tmp_path / "proc" / "sys" / "vm"
    vm.mkdir(parents=True)
    (vm / "dirty_expire_centisecs").write_text("300\n")
    (vm / "dirty_writeback_centisecs").write_text("100\n")
    assert activity.writeback_horizon_s(HostPaths(proc=tmp_path / "proc")) == 4.0
    assert activity.writeback_horizon_s(HostPaths(proc=tmp_path / "absent")) == 35.0   # the kernel's defaults
    quiet = np.array([1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0], bool)
    assert activity.quiet_ahead(quiet, 4).tolist() == [1, 0, 0, 0, 1, 1, 1, 1, 1, 0, 0, 0]
    drives = activity.stressor_drives(["pagecache_rw", "disk_seq_write", "int_crc32"])
    delays = activity.stressor_delays(["pagecache_rw", "disk_seq_write", "int_crc32"])
    assert delays["disk.write"].tolist() == [True, False, False]
    ok = activity.allowed({"disk.write": quiet}, drives, 12, 3, delays, 4)
    assert ok[:, 0].tolist() == [0, 1, 1, 1, 0, 0, 0, 0, 0, 1, 1, 1]   # the plan's end bounds the horizon
    assert ok[:, 1].tolist() == (~quiet).tolist()
    assert ok[:, 2].all()
