"""The trace of an offline replay (`mimesys-agent replay`), written as its windows are measured.

Apart from the replay's supervision (agentd/commands/replay.py) because it has its own life:
made at the first window (a replay that ran nothing writes nothing), appended to window by
window (agentd/trace_append.py: a replay beside a command that runs for days holds no window
in memory), finished with how the replay ended or abandoned where it ended by an exception.
"""

from __future__ import annotations

from pathlib import Path


class ReplayTrace:
    """Where `output` is None nothing is written; `path` says what was."""

    def __init__(self, output: Path | None, info, schema, plan, command: list[str], seed):
        self.output, self.info, self.schema = output, info, schema
        self.plan, self.command, self.seed = plan, command, seed
        self.writer = None                       # TraceAppender, made at the first window

    @property
    def path(self) -> Path | None:
        return self.output if self.writer is not None else None

    def append(self, w) -> None:
        if self.output is None:
            return
        if self.writer is None:
            self.writer = self._open(int(w.start_ns))
        self.writer.append(int(w.start_ns), w.values)

    def _open(self, first_start_ns: int):
        from mimesys import __version__
        from mimesys.trace import wall_clock_of_monotonic
        from .trace_append import TraceAppender

        info, plan, seed = self.info, self.plan, self.seed
        return TraceAppender(
            self.output, self.schema, window_s=float(plan.window_s), host_fingerprint=info.fingerprint,
            simulated=bool(info.simulated),
            provenance={"kind": "replay", "backend": info.name, "agent_version": __version__,
                        "plan_windows": plan.T, "command": self.command or None,
                        "plan_provenance": plan.provenance, "catalog_hash": plan.catalog_hash,
                        "seed": seed if seed is not None else plan.seed,
                        "window_start_clock": "CLOCK_MONOTONIC",
                        "started_unix_s": wall_clock_of_monotonic(first_start_ns)})

    def close(self, complete: bool, *, repetitions: int, state: str) -> None:
        """Finished with how the replay ended, or, where it ended by an exception, abandoned:
        what was flushed stays readable, marked incomplete."""
        if self.writer is None:
            return
        if complete:
            self.writer.finish(repetitions=repetitions, state=state)
        else:
            self.writer.abandon()
