"""`mimesys-agent replay --textfile-dir DIR`: the replay as node_exporter textfile metrics.

node_exporter's textfile collector reads DIR/*.prom at each scrape, so an offline replay
(no agent, no port) still shows up in Prometheus next to the host's own metrics. The file
is rewritten after every window and once at the end, always atomically (written beside it
under a name the collector ignores, then renamed over it), so a scrape never reads half a
file. Names follow /metrics (families.py): mimesys_replay_* for the replay,
mimesys_runner_segment_error_seconds and mimesys_host_* as the agent exposes them.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, InfoMetricFamily, StateSetMetricFamily
from prometheus_client.exposition import generate_latest

from mimesys import __version__
from mimesys.errors import ConfigError
from mimesys.fsutil import atomic_write_bytes

from .families import host_families, segment_error_family
from .telemetry import SegmentErrors

STATES = ("running", "done", "failed", "interrupted")
FILENAME = "mimesys_replay.prom"


class ReplayTextfile:
    def __init__(self, directory: Path, plan, schema, *, command: list[str] | None = None):
        directory = Path(directory)
        if not directory.is_dir():
            raise ConfigError(f"--textfile-dir {directory}: not a directory (node_exporter's "
                              f"--collector.textfile.directory)")
        if not os.access(directory, os.W_OK):
            raise ConfigError(f"--textfile-dir {directory}: not writable by this user")
        self.path = directory / FILENAME
        self.plan, self.schema = plan, schema
        self.command = command or []
        self.started_at = time.time()
        self.windows = 0
        self.state = "running"
        self.exit_status: int | None = None
        self.latest = None
        self.latest_at = 0.0
        self.segment_errors = SegmentErrors()
        self.write()

    def window(self, w) -> None:
        self.windows += 1
        self.latest, self.latest_at = w.values, time.time()
        if 0 <= w.window < self.plan.T:
            self.segment_errors.observe_window(self.plan.compositions[w.window], self.plan.window_s, w.ran_ns,
                                               w.planned_ns)
        self.write()

    def finish(self, state: str, exit_status: int | None) -> None:
        self.state = state if state in STATES else "failed"
        self.exit_status = exit_status
        self.write()

    def collect(self):
        yield InfoMetricFamily("mimesys_replay", "The replay this file describes.",
                               value={"version": __version__, "catalog_hash": self.plan.catalog_hash})
        st = StateSetMetricFamily("mimesys_replay_state", "The replay's state (exactly one is 1).")
        st.add_metric([], {s: s == self.state for s in STATES})
        yield st
        yield GaugeMetricFamily("mimesys_replay_active", "1 while the replay runs.",
                                value=1 if self.state == "running" else 0)
        yield GaugeMetricFamily("mimesys_replay_started_timestamp_seconds", "Unix time the replay started.",
                                value=self.started_at)
        yield GaugeMetricFamily("mimesys_replay_plan_windows", "Windows in one repetition of the plan.",
                                value=self.plan.T)
        yield CounterMetricFamily("mimesys_replay_windows_executed", "Plan windows executed and measured.",
                                  value=self.windows)
        if self.exit_status is not None:
            yield GaugeMetricFamily("mimesys_replay_command_exit_status", "Exit status of the command after --.",
                                    value=self.exit_status)
        yield segment_error_family(self.segment_errors)
        yield from host_families(self.schema, self.latest, self.latest_at)

    def write(self) -> None:
        reg = CollectorRegistry(auto_describe=False)
        reg.register(self)
        data = generate_latest(reg)
        # Temp name ends .tmp, not .prom: never collected. 0644 whatever our umask: node_exporter
        # runs as another user. Written through its descriptor: the directory may be its owner's.
        atomic_write_bytes(self.path, data, mode=0o644, exact_mode=True)
