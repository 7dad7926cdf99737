"""Colocation: does an application suffer next to the synthetic plan as it does next to the real
mix the plan was generated from?

Three measurements of the same application command, each repeated `repeats` times (median),
interleaved round by round so that background load drifts hit all three alike:
  alone  — nothing else started by us;
  mix    — next to the real mix (a shell command, started in its own process group `warmup_s`
           before the application and killed afterwards);
  plan   — next to the plan replayed: on an agent (`--agent URL`, POST /v1/runs, cancelled
           afterwards) or locally by `mimesys-agent replay PLAN --no-record` in the background.

Performance of one application run: with `--regex`, the first capture group of the last match
in its stdout+stderr, as a number (e.g. `([0-9.]+) requests per second`); `--higher-is-better`
(throughput, default with a regex) or `--lower-is-better` (latency). Without a regex: the
wall time of the command (lower is better).

Degradation in percent, per round (the neighbour's run against the same round's run alone):
throughput (alone − coloc) / alone × 100; latency and wall time (coloc − alone) / alone × 100;
the degradation of a condition is the median over rounds. The result is
|degradation(mix) − degradation(plan)| in percentage points (the MIMESYS paper reports 8.3 points on average, 19.4 for its best baseline).
A neighbour that stops before the application finishes makes the measurement invalid: error.
"""

from __future__ import annotations

import asyncio
import math
import os
import re
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from mimesys.backend import RunOptions
from mimesys.errors import MimesysError
from mimesys.plan import Plan


class ColocationError(MimesysError):
    """A colocation measurement could not be made (app failed, a neighbour died early)."""


@dataclass(frozen=True)
class AppSpec:
    cmd: str
    regex: str | None = None
    higher_is_better: bool | None = None   # None: True with a regex (throughput), False for wall time
    timeout_s: float = 600.0

    @property
    def better_high(self) -> bool:
        return self.higher_is_better if self.higher_is_better is not None else self.regex is not None

    @property
    def measure(self) -> str:
        return f"regex {self.regex!r}" if self.regex else "wall time [s]"


@dataclass
class AppRun:
    value: float
    wall_s: float
    rc: int


def run_app(spec: AppSpec) -> AppRun:
    t0 = time.monotonic()
    try:
        p = subprocess.run(["/bin/sh", "-c", spec.cmd], capture_output=True, text=True, timeout=spec.timeout_s)
    except subprocess.TimeoutExpired:
        raise ColocationError(f"application {spec.cmd!r} did not finish within {spec.timeout_s:g} s") from None
    wall = time.monotonic() - t0
    if p.returncode != 0:
        tail = (p.stderr or p.stdout).strip().splitlines()[-3:]
        raise ColocationError(f"application {spec.cmd!r} exited with status {p.returncode}: {' | '.join(tail)}")
    if spec.regex is None:
        return AppRun(wall, wall, p.returncode)
    matches = list(re.finditer(spec.regex, p.stdout + "\n" + p.stderr))
    if not matches:
        raise ColocationError(f"--regex {spec.regex!r} matched nothing in the output of {spec.cmd!r} "
                              f"(last line: {(p.stdout.strip().splitlines() or [''])[-1][:120]!r})")
    m = matches[-1]
    try:
        return AppRun(float(m.group(1) if m.groups() else m.group(0)), wall, p.returncode)
    except ValueError:
        raise ColocationError(f"--regex {spec.regex!r} captured {m.group(1) if m.groups() else m.group(0)!r}, "
                              f"not a number") from None


def degradation_pct(alone: float, coloc: float, higher_is_better: bool) -> float:
    if alone <= 0:
        raise ColocationError(f"the application's performance alone is {alone}; cannot compute a degradation")
    return (alone - coloc) / alone * 100.0 if higher_is_better else (coloc - alone) / alone * 100.0


class ProcessNeighbour:
    """A background command in its own session (so the whole process group can be stopped)."""

    def __init__(self, argv: list[str], label: str):
        self.argv, self.label = argv, label
        self.proc: subprocess.Popen | None = None

    async def start(self, warmup_s: float) -> None:
        self.proc = subprocess.Popen(self.argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
        await asyncio.sleep(warmup_s)
        self.check()

    def check(self) -> None:
        if self.proc is not None and self.proc.poll() is not None:
            err = (self.proc.stderr.read().decode(errors="replace").strip().splitlines() or [""])[-1] if self.proc.stderr else ""
            raise ColocationError(f"{self.label} exited (status {self.proc.returncode}) before the application "
                                  f"finished: {err[:200]}")

    async def stop(self) -> None:
        p = self.proc
        if p is None or p.poll() is not None:
            return
        for sig, wait in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(p.pid, sig)
            except ProcessLookupError:
                return
            try:
                await asyncio.to_thread(p.wait, wait)
                return
            except subprocess.TimeoutExpired:
                continue


class AgentNeighbour:
    """The plan running on an agent for as long as the measurement takes."""

    def __init__(self, client, plan: Plan, repetitions: int):
        self.client, self.plan, self.repetitions = client, plan, repetitions
        self.label = f"plan on agent {getattr(client, 'url', '')}"
        self.run_id: str | None = None

    async def start(self, warmup_s: float) -> None:
        self.run_id = await self.client.start(self.plan, RunOptions(repetitions=self.repetitions, record=False))
        deadline = time.monotonic() + 60 + warmup_s
        while True:   # wait for the first executed window, then the warm-up
            st = await self.client.status(self.run_id)
            if st.get("state") in ("failed", "cancelled", "done"):
                raise ColocationError(f"{self.label}: run {self.run_id} {st.get('state')}: {st.get('error')}")
            if st.get("windows_done", 0) >= 1:
                break
            if time.monotonic() > deadline:
                raise ColocationError(f"{self.label}: run {self.run_id} executed no window in 60 s")
            await asyncio.sleep(0.1)
        await asyncio.sleep(warmup_s)

    async def check_async(self) -> None:
        st = await self.client.status(self.run_id)
        if st.get("state") != "running":
            raise ColocationError(f"{self.label}: run {self.run_id} is {st.get('state')} before the application "
                                  f"finished (increase repetitions or shorten the application)")

    async def stop(self) -> None:
        if self.run_id is not None:
            try:
                await self.client.cancel(self.run_id)
            except MimesysError:
                pass


@dataclass
class Measurement:
    condition: str
    values: list[float] = field(default_factory=list)
    wall_s: list[float] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(self.values) if self.values else math.nan


async def _measure(spec: AppSpec, condition: str, repeats: int, neighbour=None, warmup_s: float = 0.0) -> Measurement:
    m = Measurement(condition)
    if neighbour is not None:
        await neighbour.start(warmup_s)
    try:
        for _ in range(repeats):
            r = await asyncio.to_thread(run_app, spec)
            if neighbour is not None:
                if hasattr(neighbour, "check_async"):
                    await neighbour.check_async()
                else:
                    neighbour.check()
            m.values.append(r.value)
            m.wall_s.append(r.wall_s)
    finally:
        if neighbour is not None:
            await neighbour.stop()
    return m


def local_replay_argv(plan_path: Path, repetitions: int, agent_config: str | None) -> list[str]:
    argv = [sys.executable, "-m", "agentd.cli", "replay", str(plan_path), "--no-record", "--no-progress",
            "--repetitions", str(repetitions)]
    if agent_config:
        argv[4:4] = ["--config", agent_config]
    return argv


async def colocation(spec: AppSpec, mix_cmd: str, plan_path: Path, *, client=None, repeats: int = 3,
                     warmup_s: float = 3.0, agent_config: str | None = None) -> dict:
    """Measure alone, next to the mix, next to the plan; return the result document.

    The three conditions are interleaved round by round (alone, mix, plan, alone, mix, ...), so
    a change in the host's background load during the measurement hits every condition alike
    instead of biasing one of them; each neighbour is started and stopped in every round."""
    plan = Plan.read(plan_path)
    first = await asyncio.to_thread(run_app, spec)   # sizes the plan's repetitions; not counted
    # the plan must outlast one round's application run several times over
    need_s = 5 * first.wall_s + warmup_s + 30
    reps = min(1000, max(1, math.ceil(need_s / (plan.T * plan.window_s))))
    alone, mix, synth = Measurement("alone"), Measurement("mix"), Measurement("plan")
    for _ in range(repeats):
        for m, neighbour in ((alone, None),
                             (mix, ProcessNeighbour(["/bin/sh", "-c", mix_cmd], f"mix {mix_cmd!r}")),
                             (synth, AgentNeighbour(client, plan, reps) if client is not None else
                              ProcessNeighbour(local_replay_argv(plan_path, reps, agent_config),
                                               f"local replay of {plan_path}"))):
            one = await _measure(spec, m.condition, 1, neighbour, warmup_s)
            m.values += one.values
            m.wall_s += one.wall_s
    hib = spec.better_high
    # paired by round: each round's neighbour run against the same round's run alone
    per_round_mix = [degradation_pct(a, c, hib) for a, c in zip(alone.values, mix.values)]
    per_round_plan = [degradation_pct(a, c, hib) for a, c in zip(alone.values, synth.values)]
    d_mix = statistics.median(per_round_mix)
    d_plan = statistics.median(per_round_plan)
    return {
        "app": spec.cmd, "measure": spec.measure, "higher_is_better": hib, "repeats": repeats, "warmup_s": warmup_s,
        "mix": mix_cmd, "plan": str(plan_path), "plan_windows": plan.T, "plan_repetitions": reps,
        "replayed_on": getattr(client, "url", None) or "local (mimesys-agent replay)",
        "order": "interleaved rounds: alone, mix, plan",
        "alone": asdict(alone) | {"median": alone.median},
        "with_mix": asdict(mix) | {"median": mix.median},
        "with_plan": asdict(synth) | {"median": synth.median},
        "degradation_mix_pct": d_mix, "degradation_plan_pct": d_plan,
        "degradation_mix_per_round_pct": per_round_mix, "degradation_plan_per_round_pct": per_round_plan,
        "difference_pp": abs(d_mix - d_plan),
    }


def render(doc: dict) -> str:
    unit = doc["measure"]
    return "\n".join([
        f"application: {doc['app']}   ({unit}, {'higher' if doc['higher_is_better'] else 'lower'} is better, "
        f"{doc['repeats']} interleaved rounds; degradations are per-round paired medians)",
        f"  alone      {doc['alone']['median']:.4g}",
        f"  with mix   {doc['with_mix']['median']:.4g}   degradation {doc['degradation_mix_pct']:+.1f} %",
        f"  with plan  {doc['with_plan']['median']:.4g}   degradation {doc['degradation_plan_pct']:+.1f} %   "
        f"({doc['replayed_on']})",
        f"  difference {doc['difference_pp']:.1f} percentage points",
    ])
