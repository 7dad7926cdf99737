"""/metrics: the agent's counters in the Prometheus text exposition format (0.0.4)."""

from __future__ import annotations

from aiohttp import web

from .state import BACKEND, MONITOR, RUNS


def _escape(v: str) -> str:
    return v.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def render(app: web.Application) -> str:
    runs, hub, backend = app[RUNS], app[MONITOR], app[BACKEND]
    out: list[str] = []

    def metric(name: str, kind: str, help_: str, samples: list[tuple[dict, float]]) -> None:
        out.append(f"# HELP {name} {help_}")
        out.append(f"# TYPE {name} {kind}")
        for labels, value in samples:
            lab = ",".join(f'{k}="{_escape(str(v))}"' for k, v in labels.items())
            out.append(f"{name}{{{lab}}} {value:g}" if lab else f"{name} {value:g}")

    running = 1 if runs.current is not None and runs.current.state.value == "running" else 0
    metric("mimesys_runs_total", "counter", "Runs finished by this agent process, by final state.",
           [({"state": s}, runs.runs_by_state.get(s, 0)) for s in ("done", "failed", "cancelled")])
    metric("mimesys_run_active", "gauge", "1 while a run is executing.", [({}, running)])
    metric("mimesys_windows_executed_total", "counter", "Plan windows executed and measured.",
           [({}, runs.windows_executed)])
    states = getattr(backend, "sampler_states", None)
    states = states() if callable(states) else {}
    metric("mimesys_sampler_errors_total", "counter", "Failed reads or derivations, per sampler.",
           [({"sampler": n}, s.get("errors", 0)) for n, s in sorted(states.items())])
    metric("mimesys_sampler_up", "gauge", "1 if the sampler's last read succeeded (0: failing/unsupported).",
           [({"sampler": n, "state": s.get("state", "")}, 1 if s.get("state") == "ok" else 0)
            for n, s in sorted(states.items())])
    metric("mimesys_monitor_clients", "gauge", "Connected /v1/monitor WebSocket clients.", [({}, len(hub.clients))])
    metric("mimesys_monitor_samples_total", "counter", "Samples taken by the monitor loop.", [({}, hub.frames_sampled)])
    metric("mimesys_monitor_missed_frames_total", "counter",
           "Monitor frames dropped because a client's queue was full.", [({}, hub.missed_frames)])
    info = backend.info()
    metric("mimesys_agent_info", "gauge", "Constant 1, labelled with the backend.",
           [({"backend": info.name, "simulated": str(bool(info.simulated)).lower()}, 1)])
    return "\n".join(out) + "\n"
