"""The agent's metric families, in the Prometheus text format through prometheus_client.

One collector reads the agent's live objects at scrape time (nothing is updated per event here);
prometheus_client formats the values, so counters stay exact (repr, not %g) far past 10^7.
Series have fixed label sets: sampler states are a state set (every state always present,
one of them 1), never a label that changes value and leaves stale series behind.

What is exposed (docs/design.md "Monitoring"):
- mimesys_build_info, mimesys_agent_info, process_* (ProcessCollector), python_info
- runs: mimesys_runs_total{state}, mimesys_run_active, mimesys_run_windows_{done,total},
  mimesys_run_progress_ratio, mimesys_run_started_timestamp_seconds, mimesys_windows_executed_total,
  mimesys_runner_segment_error_seconds (histogram)
- the agent's own responsiveness: mimesys_event_loop_lag_seconds (histogram) and its maximum
- samplers: mimesys_sampler_{up,state,errors_total,no_data_total,read_duration_seconds}
- the host's latest measured window: mimesys_host_* (names.py), its time in
  mimesys_host_sample_timestamp_seconds
"""

from __future__ import annotations

import math
import platform
from dataclasses import dataclass
from typing import Any, Callable

from prometheus_client import CollectorRegistry, PlatformCollector, ProcessCollector
from prometheus_client.core import (CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, InfoMetricFamily,
                                    StateSetMetricFamily, SummaryMetricFamily)

from mimesys import __version__

from ..samplers.samplerset import SAMPLER_STATES
from .names import prom_name


@dataclass(frozen=True)
class AgentSources:
    """What one scrape reads: the agent's live objects (counters and the latest window, nothing
    copied). `scrapes` is the HTTP side's Scrapes, for its refusal count (None: not served)."""

    runs: Any            # agentd.runs.RunManager
    monitor: Any         # agentd.api.monitor.MonitorHub
    backend: Any         # mimesys.backend.Backend
    loop_lag: Any        # agentd.api.looplag.LoopLag
    scrapes: Any = None


class AgentCollector:
    """The agent's families, read at scrape time from `sources()` (the objects are made after
    the registry: the runs and the monitor start with the app)."""

    def __init__(self, sources: Callable[[], AgentSources]):
        self.sources = sources

    def collect(self):
        src = self.sources()
        runs, hub, backend = src.runs, src.monitor, src.backend
        info = backend.info()
        yield _info("mimesys_build", "The agent's version.", {"version": __version__,
                                                               "python": platform.python_version()})
        yield _info("mimesys_agent", "The agent's execution backend.",
                    {"backend": info.name, "simulated": str(bool(info.simulated)).lower()})
        yield from _runs(runs)
        yield from _samplers(backend)
        yield _gauge("mimesys_monitor_clients", "Connected /v1/monitor WebSocket clients.", len(hub.clients))
        yield _counter("mimesys_monitor_samples", "Samples taken by the monitor loop.", hub.frames_sampled)
        yield _counter("mimesys_monitor_missed_frames", "Monitor frames dropped because a client's queue was full.",
                       hub.missed_frames)
        scrapes = src.scrapes
        if scrapes is not None:
            yield _counter("mimesys_metrics_scrapes_refused", "/metrics scrapes answered 503 (over "
                           "api.metrics_max_requests).", scrapes.refused)
        latest = max((runs.counters.latest, hub.latest), key=lambda s: s.measured_at)
        yield from host_families(backend.metric_schema(), latest.values, latest.measured_at)
        lag = src.loop_lag
        yield HistogramMetricFamily(
            "mimesys_event_loop_lag_seconds",
            f"How late the agent's event loop woke from a {lag.period_s:g} s sleep (a stall delays every "
            "request and the run's window stream).", buckets=lag.cumulative(), sum_value=lag.sum_s)
        yield _gauge("mimesys_event_loop_lag_max_seconds", "The worst event-loop lag since the agent started.",
                     lag.max_s)


def _info(name: str, doc: str, labels: dict) -> InfoMetricFamily:
    return InfoMetricFamily(name, doc, value=labels)


def _gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, value=value)


def _counter(name: str, doc: str, value: float) -> CounterMetricFamily:
    return CounterMetricFamily(name, doc, value=value)


def _runs(runs):
    total = CounterMetricFamily("mimesys_runs", "Runs finished by this agent process, by final state.",
                                labels=["state"])
    for s in ("done", "failed", "cancelled"):
        total.add_metric([s], runs.counters.runs_by_state.get(s, 0))
    yield total
    cur = runs.book.current
    running = cur is not None and cur.state.value == "running"
    yield _gauge("mimesys_run_active", "1 while a run is executing.", 1 if running else 0)
    # The current run, or the last one while idle (0 before the first).
    yield _gauge("mimesys_run_windows_done", "Windows measured in the current (or last) run.",
                 cur.windows_done if cur else 0)
    yield _gauge("mimesys_run_windows_total", "Windows the current (or last) run executes in all.",
                 cur.windows_total if cur else 0)
    yield _gauge("mimesys_run_progress_ratio", "windows_done / windows_total of the current (or last) run.",
                 cur.windows_done / cur.windows_total if cur and cur.windows_total else 0)
    yield _gauge("mimesys_run_started_timestamp_seconds", "Unix time the current (or last) run started.",
                 cur.started_at if cur else 0)
    yield _counter("mimesys_windows_executed", "Plan windows executed and measured.", runs.counters.windows_executed)
    yield segment_error_family(runs.counters.segment_errors)


def segment_error_family(seg) -> HistogramMetricFamily:
    return HistogramMetricFamily(
        "mimesys_runner_segment_error_seconds",
        "|executed - planned| time per stressor, thread and window, as the runner reports it "
        "(real runner only; the simulated host reports none).",
        buckets=seg.cumulative(), sum_value=seg.sum_s)


def _samplers(backend):
    states = getattr(backend, "sampler_states", None)
    states = states() if callable(states) else {}
    up = GaugeMetricFamily("mimesys_sampler_up", "1 if the sampler's last read succeeded.", labels=["sampler"])
    state = StateSetMetricFamily("mimesys_sampler_state", "The sampler's state (exactly one is 1).",
                                 labels=["sampler"])
    errors = CounterMetricFamily("mimesys_sampler_errors", "Failed reads or derivations, per sampler.",
                                 labels=["sampler"])
    no_data = CounterMetricFamily("mimesys_sampler_no_data", "Ticks on which the sampler had no data.",
                                  labels=["sampler"])
    duration = SummaryMetricFamily("mimesys_sampler_read_duration_seconds", "Time spent reading each sampler.",
                                   labels=["sampler"])
    for name, s in sorted(states.items()):
        st = s.get("state", "")
        up.add_metric([name], 1 if st == "ok" else 0)
        state.add_metric([name], {k: k == st for k in SAMPLER_STATES})
        errors.add_metric([name], s.get("errors", 0))
        no_data.add_metric([name], s.get("no_data", 0))
        duration.add_metric([name], count_value=s.get("reads", 0), sum_value=s.get("read_seconds", 0.0))
    yield from (up, state, errors, no_data, duration)


def host_families(schema, values, measured_at: float):
    """The host measurements of one window as mimesys_host_* gauges (NaN: not exported)."""
    if values is None:
        return
    families: dict[str, GaugeMetricFamily] = {}
    for spec, v in zip(schema, values):
        if not spec.available or not math.isfinite(float(v)):
            continue
        pn = prom_name(spec.name, spec.unit)
        if pn is None:
            continue
        fam = families.get(pn.name)
        if fam is None:
            fam = families[pn.name] = GaugeMetricFamily(
                pn.name, f"Agent measurement {spec.name} over its last window ({spec.unit} -> base unit).",
                labels=[k for k, _ in pn.labels])
        fam.add_metric([v_ for _, v_ in pn.labels], float(v) * pn.scale)
    yield from families.values()
    yield _gauge("mimesys_host_sample_timestamp_seconds", "Unix time of the window the mimesys_host_* values "
                 "come from.", measured_at)


def create_registry(sources: Callable[[], AgentSources]) -> CollectorRegistry:
    """The agent's registry: its own families plus the process and platform collectors."""
    reg = CollectorRegistry(auto_describe=False)
    reg.register(AgentCollector(sources))
    ProcessCollector(registry=reg)
    PlatformCollector(registry=reg)
    return reg
