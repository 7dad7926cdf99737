"""`mimesys demo`: the whole mimesys path on this host, in one command, from a clone.

It orchestrates the other commands (as subprocesses, so each shows its own progress and a
failure is that command's own message) and re-implements none of them. The path is STEPS, a
list of small steps, each a name, what it does, and a function that runs it and says what it
produced:

  1. preflight     every part the path needs exists (commands, runner binary, the trace); the
                   agent's side is asked through its own CLI (`mimesys-agent check-config
                   --probe`), as the controller never imports the daemon
  2. agent         `mimesys-agent serve` on 127.0.0.1 with the real host backend, a fresh
                   token and a temporary state directory
  3. calibrate     `mimesys-agent calibrate` into the agent's state: the host's one solo
                   measurement -- each stressor's rates (the paced variants' rates come from
                   them), the host's probed peaks, then the solo profile (each stressor alone on
                   one thread, a second and every thread, sampled by the agent); both kept in
                   --out/calibration
  4. collect       `mimesys collect`: the campaign takes the agent's solo profile and its windows
                   as round 0, then a short novelty-guided round
  5. dataset       `mimesys dataset build`
  6. forward       `mimesys forward fit` (first order from the solo profile, correction from the
                   samples) and `mimesys forward score`
  7. teach         `mimesys dataset teach`: the campaign's chains and synthetic phase/burst
                   traces planned by the inverse planner, beside the measured samples
  8. train         `mimesys train` (a small model, CPU) on the measured and taught samples
  9. align         `mimesys align --forward`: DDPO against the forward model on the synthetic
                   traces (the reward is the forward model's prediction; --ddpo-epochs 0 skips it)
 10. export        `mimesys export -o --forward`: the model, finished by the forward model
 11. import        `mimesys import` of a real trace (--trace; by default one from --traces-dir,
                   $MIMESYS_SHARED_TRACES or ../shared/traces beside the checkout) onto this host
 12. record        a real local application (gzip, sqlite, sort) run while
                   `mimesys-agent record` samples the host
 13. evaluate      `mimesys evaluate`: generate plans for both traces with --methods (the
                   diffusion model, inverse, single), replay each on the agent, DTW per metric,
                   PNG overlays
 14. summary       the DTW table and what took how long

A missing part stops the demo at preflight, naming it; no step is ever simulated or skipped
silently. Everything lands under --output (default ./demo-out); the agent's temporary state is
removed at the end.

With --json everything a person reads (the steps, the commands' own output and progress, the
tables) goes to stderr, and stdout carries one JSON object at the end (demo_summary): the
output directory, each step's status and time, the paths written, the mean DTW per trace and
method -- also when a step failed (then "ok" is false and the exit status 1).
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import click

from mimesys.cliopts import json_option, output_option, stderr_fd
from mimesys.lazyload import load_target

REPO = Path(__file__).resolve().parents[2]
# The tests read the same directory through the same variable (tests/conftest.py).
TRACES_DIR_ENV = "MIMESYS_SHARED_TRACES"
DEFAULT_TRACES_DIR = REPO.parent / "shared" / "traces"
DEFAULT_TRACE_NAME = "stats-num_vms_1_7.txt"
DEFAULT_TRACE_FORMAT = "tacc_stats"

# The controller's and the core's parts the demo runs, by what a person would call them -> the
# module that implements them (loaded here: they are this process's own packages).
REQUIRED_PARTS = {
    "collect": "controller.commands.collect:collect",
    "dataset": "controller.commands.dataset:dataset",
    "train": "controller.commands.train:train",
    "align": "controller.commands.align:align",
    "export": "controller.commands.export:export",
    "import": "controller.commands.import_trace:import_trace",
    "evaluate": "controller.commands.evaluate:evaluate",
    "baselines": "controller.baselines.from_dataset:from_dataset",
    "agent-side generation": "mimesys.planners.diffusion:OnnxGenerator",
    "forward": "controller.commands.forward:forward",
    "teach": "controller.teach:teach",
    "steer": "mimesys.planners.steer:ForwardSteer",
    "planners": "mimesys.planners.registry:specs_for",
}
# The agent's commands the demo keeps running beside its own (the others it runs once, and a
# failure there is their own message); asked through the agent's CLI, never imported here.
AGENT_COMMANDS = ("serve", "record")
AGENT_CLI = "agentd.cli"
CONTROLLER_CLI = "controller.cli"


class DemoFailed(click.ClickException):
    """A step failed; the message names the step, the command and where its log is."""


def missing_parts(parts: dict[str, str] = REQUIRED_PARTS) -> list[str]:
    """Every part that cannot be loaded, as 'name (module:attribute): why'."""
    missing = []
    for name, target in parts.items():
        try:
            load_target(target)
        except ImportError as e:
            missing.append(f"{name} ({target}): {e}")
        except AttributeError:
            missing.append(f"{name} ({target}): module has no {target.partition(':')[2]!r}")
    return missing


def missing_agent_commands(commands: Sequence[str] = AGENT_COMMANDS) -> list[str]:
    """Every agent command that does not load, as 'mimesys-agent NAME: why' (`--help` of each,
    run side by side: it loads the command's module and nothing else)."""
    procs = {c: subprocess.Popen([sys.executable, "-m", AGENT_CLI, c, "--help"], cwd=REPO, text=True,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) for c in commands}
    missing = []
    for command, proc in procs.items():
        _, err = proc.communicate()
        if proc.returncode != 0:
            why = (err.strip().splitlines() or [f"exited with status {proc.returncode}"])[-1]
            missing.append(f"mimesys-agent {command}: {why}")
    return missing


@dataclass(frozen=True)
class DemoSettings:
    """Sized for ≤ 12 minutes from a fresh clone on a 2-core host; each knob is a command-line option."""

    # The solo measurement: calibration, then the solo profile with one window per step
    # (`calibrate --profile-hold 1`: 4 × 48 + 1 windows instead of 7 × 48 + 1), disk dead times
    # from two segment pairs, the host's peaks probed without reach pairs (an operator's
    # `mimesys-agent calibrate` measures the reach: three pairs, ~3 min more).
    profile_hold: int = 1
    segment_pairs: int = 2
    probe_seconds: float = 0.25
    # The campaign: round 0 is the solo profile's own windows (no sweep is run), then one novelty
    # round of `round_size` compositions.
    rounds: int = 1
    round_size: int = 16                # compositions per novelty round
    chain_len: int = 16                 # windows per chained plan
    repetitions: int = 2                # every chain runs this many times (spread filter)
    # Samples whose repetitions differ by more than this share of the observed range are
    # dropped as unstable. The campaign default is 0.10; on a small shared VM most samples
    # fail it and the model would see a dozen, so the demo states and uses 0.25.
    spread_threshold: float = 0.25
    train_steps: int = 400              # optimizer steps of the small model (~0.05 s each here)
    teach_synthetic: int = 100          # synthetic phase/burst traces the forward model teaches on (seconds)
    taught_share: float = 0.5           # share of each training batch from taught samples
    train_batch: int = 64
    train_hidden: int = 64              # token width (the library default is 128)
    train_blocks: int = 2               # denoiser blocks (default 3)
    ddpo_epochs: int = 30               # DDPO against the forward model on the synthetic traces (0: none)
    # The methods evaluate replays (each replays both traces); empty: the registry's showcase
    # kinds (the diffusion model beside the forward model's inverse planner and the fixed-level
    # baseline). The others are left to `mimesys evaluate` (each would add two replays, ~1 min).
    methods: str = ""
    app_seconds: int = 24               # length of the recorded application run (every method replays it)
    # windows of the imported trace that are replayed: every method replays it
    import_windows: int = 24
    seed: int = 0


@dataclass(frozen=True)
class DemoPaths:
    """Where the steps write, all under --out (the JSON summary lists those that exist)."""

    calibration: Path
    campaign: Path
    dataset: Path
    taught: Path
    synthetic: Path
    model: Path
    aligned: Path
    onnx: Path
    forward: Path
    imported_trace: Path
    import_report: Path
    recorded_trace: Path
    app_log: Path
    evaluation: Path
    results_json: Path
    results_csv: Path
    agent_log: Path

    @classmethod
    def under(cls, out: Path) -> "DemoPaths":
        traces, evaluation = out / "traces", out / "evaluation"
        return cls(calibration=out / "calibration", campaign=out / "campaign", dataset=out / "dataset.h5",
                   taught=out / "dataset-taught.h5", synthetic=out / "synthetic-traces", model=out / "model",
                   aligned=out / "model-aligned", onnx=out / "model-onnx", forward=out / "forward",
                   imported_trace=traces / "imported.h5", import_report=traces / "import-report.json",
                   recorded_trace=traces / "app-recorded.h5", app_log=traces / "app.log", evaluation=evaluation,
                   results_json=evaluation / "results.json", results_csv=evaluation / "results.csv",
                   agent_log=out / "agent" / "agent.log")

    def existing(self) -> dict[str, str]:
        return {f.name: str(getattr(self, f.name)) for f in dataclasses.fields(self) if getattr(self, f.name).exists()}


@dataclass
class StepRecord:
    number: int
    name: str
    status: str = "pending"
    seconds: float = 0.0
    detail: str = ""


@dataclass
class Demo:
    out: Path
    settings: DemoSettings
    trace_file: Path = DEFAULT_TRACES_DIR / DEFAULT_TRACE_NAME
    trace_format: str = DEFAULT_TRACE_FORMAT
    steps: list[StepRecord] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)
    resume: bool = False
    json_stdout: bool = False     # --json: stdout is the summary's; the steps' commands write to stderr
    prepared: bool = False        # --out is this demo's (a failed preflight leaves an older demo's there)
    agent: LocalAgent = field(init=False)

    def __post_init__(self):
        self.agent = LocalAgent(self.out / "agent")

    @property
    def paths(self) -> DemoPaths:
        return DemoPaths.under(self.out)

    @property
    def child_stdout(self):
        """Where a step's command writes its stdout: ours, or our stderr under --json."""
        return stderr_fd() if self.json_stdout else None

    @contextlib.contextmanager
    def step(self, name: str, what: str, total: int):
        rec = StepRecord(len(self.steps) + 1, name)
        self.steps.append(rec)
        elapsed = time.monotonic() - self.started
        click.secho(f"\n[{rec.number}/{total}] {name}: {what}   (t+{elapsed:.0f}s)", bold=True)
        t0 = time.monotonic()
        try:
            yield rec
        except BaseException as e:
            rec.status, rec.seconds = "FAILED", time.monotonic() - t0
            first = (e.format_message() if isinstance(e, click.ClickException) else repr(e)).splitlines()[0]
            rec.detail = first[:100]
            raise
        rec.status, rec.seconds = "ok", time.monotonic() - t0
        click.echo(f"    done in {rec.seconds:.0f}s{': ' + rec.detail if rec.detail else ''}")

    def run(self, module: str, args: list, *, step: str, env: dict | None = None) -> None:
        """Run `python -m module args...` with its output on the terminal (its progress bars)
        and a failure turned into DemoFailed naming the command."""
        cmd = [sys.executable, "-m", module, *map(str, args)]
        shown = ("mimesys-agent " if module == AGENT_CLI else "mimesys ") + " ".join(map(str, args))
        click.echo(f"    $ {shown}")
        proc = subprocess.Popen(cmd, cwd=REPO, env={**os.environ, **(env or {})}, stdout=self.child_stdout)
        try:
            proc.wait()
        except BaseException:
            # The demo is stopped (^C, SIGTERM): the step gets SIGTERM and time to clean up (a
            # campaign closes its runs, calibrate stops its runner), unlike subprocess.run's SIGKILL.
            stop_child(proc)
            raise
        if proc.returncode != 0:
            raise DemoFailed(f"step {step!r}: `{shown}` exited with status {proc.returncode}")


# -- the local agent ------------------------------------------------------------------------

def stop_child(proc: subprocess.Popen, grace_s: float = 15.0) -> None:
    """SIGTERM, `grace_s` to exit, then SIGKILL."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class LocalAgent:
    """`mimesys-agent serve` on 127.0.0.1 with the real host backend. State, scratch, model
    directory and token live in a temporary directory removed by stop()."""

    out: Path
    proc: subprocess.Popen | None = None
    log: object = None
    NAME = "this-host"            # its name in the fleet file the demo writes
    tmp: Path | None = None
    port: int = 0
    placement: str = "pinned"     # agent.placement: how the runner places a plan's threads

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def token_file(self) -> Path:
        return self.tmp / "token"

    @property
    def config_file(self) -> Path:
        return self.tmp / "agent.toml"

    @property
    def fleet_file(self) -> Path:
        return self.tmp / "fleet.toml"

    def write_config(self) -> None:
        """The throwaway agent's token, configuration and directories, in a new temporary directory."""
        self.tmp = Path(tempfile.mkdtemp(prefix="mimesys-demo-agent-"))
        self.port = free_port()
        fd = os.open(self.token_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(secrets.token_hex(32) + "\n")
        self.config_file.write_text(agent_config(self.tmp, self.port, self.token_file, self.placement))
        for d in ("state", "scratch", "model"):
            (self.tmp / d).mkdir()

    def probe(self) -> tuple[list[str], str | None]:
        """Whether `serve` would start with this configuration and find mimesys-runner, asked of
        the agent's own `check-config --probe`: (the problems it names, the runner it found)."""
        if self.tmp is None:
            self.write_config()
        proc = subprocess.run([sys.executable, "-m", AGENT_CLI, "check-config", "--config", str(self.config_file),
                               "--probe", "--json"], cwd=REPO, capture_output=True, text=True)
        try:
            verdict = json.loads(proc.stdout)
        except ValueError:
            why = (proc.stderr.strip().splitlines() or [""])[-1]
            return [f"mimesys-agent check-config exited with status {proc.returncode}: {why}"], None
        return list(verdict["problems"]), verdict.get("runner")

    def start(self, timeout_s: float = 60.0) -> None:
        if self.tmp is None or not self.config_file.is_file():   # stop() removed an earlier one
            self.write_config()
        self.out.mkdir(parents=True, exist_ok=True)
        self.log = open(self.out / "agent.log", "wb")
        self.proc = subprocess.Popen([sys.executable, "-m", AGENT_CLI, "serve", "--config", str(self.config_file),
                                      "--log-level", "info"], cwd=REPO, stdout=self.log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        wait_healthy(self.proc, self.url, self.token_file.read_text().strip(), self.out / "agent.log", timeout_s)

    def write_fleet(self) -> Path:
        """A fleet file naming this agent, beside its token in the agent's temporary directory (a
        fleet file's token_file must lie in the fleet file's own directory)."""
        self.fleet_file.write_text(
            f'[[agent]]\nurl = "{self.url}"\ntoken_file = "{self.token_file}"\nname = "{self.NAME}"\n')
        return self.fleet_file

    def stop(self) -> None:
        if self.proc is not None:
            stop_child(self.proc)
        if self.log is not None:
            self.log.close()
        if self.tmp is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)


def agent_config(tmp: Path, port: int, token_file: Path, placement: str = "pinned") -> str:
    """The throwaway agent's configuration: the host backend, its directories under `tmp`, 127.0.0.1."""
    return ("# written by `mimesys demo`: a throwaway agent for this host\n"
            "[agent]\n"
            'backend = "host"\n'
            f'placement = "{placement}"\n'
            f'state_dir = "{tmp / "state"}"\n'
            f'scratch_dir = "{tmp / "scratch"}"\n'
            f'model_dir = "{tmp / "model"}"\n'
            "# scratch_budget_mib: the agent's default (every composition fits)\n"
            "[api]\n"
            'bind = "127.0.0.1"\n'
            f"port = {port}\n"
            f'token_file = "{token_file}"\n')


def wait_healthy(proc: subprocess.Popen, url: str, token: str, log_path: Path, timeout_s: float) -> None:
    """Until the agent answers /healthz; DemoFailed with its log's tail if it exits first, or
    naming the log if it does not answer within timeout_s."""
    deadline = time.monotonic() + timeout_s
    while True:
        if proc.poll() is not None:
            tail = log_path.read_text(errors="replace")[-2000:]
            raise DemoFailed(f"the agent exited with status {proc.returncode} while starting:\n{tail}")
        try:
            req = urllib.request.Request(f"{url}/healthz", headers={"Authorization": f"Bearer {token}"})
            with urllib.request.urlopen(req, timeout=2) as r:
                if r.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        if time.monotonic() > deadline:
            raise DemoFailed(f"the agent did not answer {url}/healthz within {timeout_s:.0f} s (log: {log_path})")
        time.sleep(0.3)


# -- the local application ------------------------------------------------------------------

# A real application run in phases the host can feel: compression (CPU), a SQLite database
# committing with fsync (disk), an external sort (CPU + memory), and idle gaps. Each phase is
# bounded by `timeout`, so the run takes about the same time on any host.
APP_SCRIPT = r"""
set -u
work="$1"; phase="$2"
mkdir -p "$work"; cd "$work"
echo "phase: idle"; sleep 3
echo "phase: gzip (CPU)"
timeout "$phase" sh -c 'head -c 2000000000 /dev/urandom | gzip -6 > /dev/null' || true
echo "phase: sqlite inserts, synchronous=FULL (disk)"
timeout "$phase" "$PYTHON" - <<'PY' || true
import os, sqlite3
db = sqlite3.connect("app.sqlite")
db.execute("PRAGMA synchronous=FULL")
db.execute("CREATE TABLE IF NOT EXISTS t (k INTEGER PRIMARY KEY, v BLOB)")
i = 0
while True:
    db.executemany("INSERT INTO t (v) VALUES (?)", [(os.urandom(4096),) for _ in range(64)])
    db.commit()
    i += 64
    if i % 65536 == 0:
        db.execute("DELETE FROM t"); db.commit()
PY
echo "phase: idle"; sleep 3
echo "phase: sort (CPU + memory)"
timeout "$phase" sh -c 'od -An -tu4 -w4 -v /dev/urandom | head -n 20000000 | sort -n -S 512M > /dev/null' || true
echo "phase: gzip on both cores"
timeout "$phase" sh -c 'head -c 2000000000 /dev/urandom | gzip -1 > /dev/null & head -c 2000000000 /dev/urandom | gzip -1 > /dev/null; wait' || true
rm -f app.sqlite app.sqlite-journal
echo "phase: done"
"""


def app_phase_seconds(total: int) -> int:
    """Five bounded phases plus 6 s of idle gaps fit in `total` seconds minus a 4 s margin."""
    return max(2, (total - 6 - 4) // 4)


# -- the steps ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Step:
    """One step of the path: its name, what it does (str.format'ed with the demo's settings `s`
    and `trace_file`), and `run`, which does it and returns what it produced (shown after it)."""

    name: str
    what: str
    run: Callable[[Demo], str]

    def describe(self, d: Demo) -> str:
        return self.what.format(s=d.settings, trace_file=d.trace_file)


def preflight(d: Demo) -> str:
    problems = missing_parts() + missing_agent_commands()
    agent_problems, runner = d.agent.probe()
    problems += [f"the agent (mimesys-agent check-config --probe): {p}" for p in agent_problems]
    if not d.trace_file.is_file():
        problems.append(f"trace to import: {d.trace_file} does not exist (pass --trace or --traces-dir)")
    if problems:
        raise DemoFailed("the demo cannot run; missing:\n  - " + "\n  - ".join(problems))
    _prepare_out(d.out, d.resume)
    d.prepared = True
    return f"runner {runner}"


def start_agent(d: Demo) -> str:
    d.agent.start()
    d.run(AGENT_CLI, ["info", "--config", d.agent.config_file], step="agent")
    return f"{d.agent.url}, log {d.agent.out / 'agent.log'}"


def calibrate(d: Demo) -> str:
    # The host's one solo measurement: each stressor's rates (without them the agent refuses the
    # paced variants), the host's peaks, then the solo profile the campaign and the forward model
    # read. Kept in --out: the agent's state goes with it, and another agent on this host can take
    # both (`mimesys-agent calibrate --import`).
    s = d.settings
    d.run(AGENT_CLI, ["calibrate", "--config", d.agent.config_file, "--reach-repeats", "0",
                      "--probe-seconds", s.probe_seconds, "--segment-pairs", s.segment_pairs,
                      "--profile-hold", s.profile_hold], step="calibrate")
    kept = d.paths.calibration
    kept.mkdir(parents=True, exist_ok=True)
    for name in ("calibration.json", "profile.h5"):
        shutil.copy2(d.agent.tmp / "state" / name, kept / name)
    return f"{kept} (calibration.json, profile.h5)"


def collect(d: Demo) -> str:
    campaign = d.paths.campaign
    fleet = d.agent.write_fleet()
    write_campaign_config(campaign, d.settings)
    d.run(CONTROLLER_CLI, ["collect", campaign, "--rounds", d.settings.rounds, "--fleet", fleet], step="collect")
    return f"coverage reports in {campaign / 'reports'}"


def build_dataset(d: Demo) -> str:
    d.run(CONTROLLER_CLI, ["dataset", "build", d.paths.campaign, "-o", d.paths.dataset], step="dataset")
    return ""


def fit_forward(d: Demo) -> str:
    p = d.paths
    d.run(CONTROLLER_CLI, ["forward", "fit", p.dataset, "-o", p.forward, "--overwrite"], step="forward")
    d.run(CONTROLLER_CLI, ["forward", "score", p.forward, p.dataset], step="forward")
    return f"{p.forward}"


def teach(d: Demo) -> str:
    p = d.paths
    d.run(CONTROLLER_CLI, ["dataset", "teach", p.dataset, "--forward", p.forward,
                           "--synthetic", d.settings.teach_synthetic, "--write-synthetic", p.synthetic,
                           "-o", p.taught], step="teach")
    return f"{p.taught}"


def train(d: Demo) -> str:
    s, p = d.settings, d.paths
    d.run(CONTROLLER_CLI, ["train", p.taught, "-o", p.model, "--steps", s.train_steps,
                           "--batch-size", s.train_batch, "--hidden", s.train_hidden, "--blocks", s.train_blocks,
                           "--device", "cpu", "--seed", s.seed, "--taught-share", s.taught_share, "--overwrite"],
          step="train")
    return f"{p.model}"


def align(d: Demo) -> str:
    s, p = d.settings, d.paths
    if s.ddpo_epochs == 0:
        return "skipped (--ddpo-epochs 0): the trained model is exported as it is"
    traces = sorted(p.synthetic.glob("*.h5"))[:32]
    d.run(CONTROLLER_CLI, ["align", p.model, "--traces", *traces, "--forward", p.forward, "--preset", "forward",
                           "--epochs", s.ddpo_epochs, "--out", p.aligned, "--quiet"], step="align")
    return f"{p.aligned} ({len(traces)} synthetic traces, {s.ddpo_epochs} epochs; the reward is the forward model's)"


def export(d: Demo) -> str:
    p = d.paths
    model = p.aligned if d.settings.ddpo_epochs and (p.aligned / "model.pt").is_file() else p.model
    d.run(CONTROLLER_CLI, ["export", model, "-o", p.onnx, "--forward", p.forward, "--overwrite"], step="export")
    return f"{p.onnx} (from {model.name})"


def import_trace(d: Demo) -> str:
    p, windows = d.paths, d.settings.import_windows
    d.run(CONTROLLER_CLI, ["import", d.trace_file, "--format", d.trace_format, "-o", p.imported_trace,
                           "--fleet", d.agent.fleet_file, "--agent", d.agent.NAME,
                           "--report-json", p.import_report], step="import")
    _truncate_trace(p.imported_trace, windows)
    return f"{p.imported_trace} (first {windows} windows kept)"


def record(d: Demo) -> str:
    p = d.paths
    _record_app(d, p.recorded_trace, p.app_log)
    return f"{p.recorded_trace}, app output {p.app_log}"


def evaluate(d: Demo) -> str:
    from mimesys.planners.registry import specs_for

    p, agent = d.paths, d.agent
    available = {"model": p.onnx, "forward": p.forward, "dataset": p.dataset}
    planners = specs_for(available)                       # every method these make
    wanted = [m.strip() for m in d.settings.methods.split(",") if m.strip()] or list(specs_for(available, showcase=True))
    unknown = [m for m in wanted if m not in planners]
    if unknown:
        raise DemoFailed(f"step 'evaluate': --methods {', '.join(unknown)}: not a method the demo builds "
                         f"(it builds {', '.join(planners)})")
    methods = [a for name in wanted for a in ("--method", f"{name}={planners[name]}")]
    d.run(CONTROLLER_CLI, ["evaluate", "--fleet", agent.fleet_file, "--agent", agent.NAME,
                           "--trace", p.imported_trace, "--trace", p.recorded_trace, *methods,
                           "--seed", d.settings.seed, "-o", p.evaluation], step="evaluate")
    return f"{p.evaluation}"


def summary(d: Demo) -> str:
    _print_results(d.paths.evaluation)
    pngs = sorted(str(p.relative_to(d.out)) for p in d.out.rglob("*.png"))
    click.echo(f"\nPNGs under {d.out}:\n  " + "\n  ".join(pngs) if pngs else "\n(no PNGs were written)")
    return ""


STEPS: tuple[Step, ...] = (
    Step("preflight", "every part of the path is present", preflight),
    Step("agent", "mimesys-agent serve on 127.0.0.1 (host backend, temporary token and state)", start_agent),
    Step("calibrate", "the host's one solo measurement: each stressor alone (rates, then the solo profile) "
                      "and the host's own peaks", calibrate),
    Step("collect", "the campaign: round 0 from the solo profile, {s.rounds} novelty round(s)", collect),
    Step("dataset", "training samples from the campaign", build_dataset),
    Step("forward", "the forward model: first order from the campaign's solo profile, learned correction",
         fit_forward),
    Step("teach", "target-like traces planned by the inverse planner, as training samples", teach),
    Step("train", "a small conditional diffusion model on CPU, measured and taught samples", train),
    Step("align", "DDPO against the forward model on the synthetic traces ({s.ddpo_epochs} epochs)", align),
    Step("export", "ONNX graphs + manifest for agent-side generation, steered by the forward model", export),
    Step("import", "{trace_file.name} mapped onto this host", import_trace),
    Step("record", "a real application (gzip, sqlite, sort) recorded for {s.app_seconds} s", record),
    Step("evaluate", "generate with each method, replay each on the agent, DTW", evaluate),
    Step("summary", "DTW per metric (each on the target's own peak, in [0,1], lower is closer)", summary),
)


def run_steps(d: Demo, steps: Sequence[Step] = STEPS) -> None:
    """Each step in order, timed and recorded in d.steps; the first failure stops the demo."""
    for step in steps:
        with d.step(step.name, step.describe(d), total=len(steps)) as rec:
            rec.detail = step.run(d)


# -- the command ----------------------------------------------------------------------------

@click.command("demo")
@output_option("out", "--out", type=click.Path(file_okay=False, path_type=Path), default=Path("demo-out"),
               show_default=True, help="Where everything is written.")
@click.option("--traces-dir", type=click.Path(file_okay=False, path_type=Path), default=DEFAULT_TRACES_DIR,
              envvar=TRACES_DIR_ENV, show_envvar=True,
              # shown relative: the absolute path is the checkout's, and the man page must not depend on it
              show_default="../shared/traces beside the checkout",
              help="Where the real foreign traces are (the default --trace is read from there).")
@click.option("--trace", "trace_file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              show_default=f"{DEFAULT_TRACE_NAME} in --traces-dir",
              help="A real foreign trace to import onto this host.")
@click.option("--trace-format", default=DEFAULT_TRACE_FORMAT, show_default=True, help="Its importer.")
@click.option("--rounds", type=click.IntRange(0), default=DemoSettings.rounds, show_default=True,
              help="Novelty rounds after round 0 (the solo profile's windows).")
@click.option("--round-size", type=click.IntRange(1), default=DemoSettings.round_size, show_default=True)
@click.option("--repetitions", type=click.IntRange(1), default=DemoSettings.repetitions, show_default=True)
@click.option("--spread-threshold", type=click.FloatRange(0, min_open=True), default=DemoSettings.spread_threshold,
              show_default=True, help="Drop samples whose repetitions differ by more than this share of the range.")
@click.option("--train-steps", type=click.IntRange(1), default=DemoSettings.train_steps, show_default=True)
@click.option("--app-seconds", type=click.IntRange(20), default=DemoSettings.app_seconds, show_default=True,
              help="Length of the recorded application run.")
@click.option("--import-windows", type=click.IntRange(5), default=DemoSettings.import_windows, show_default=True,
              help="Windows of the imported trace to replay.")
@click.option("--ddpo-epochs", type=click.IntRange(0), default=DemoSettings.ddpo_epochs, show_default=True,
              help="Epochs of DDPO against the forward model before the export (0: export the trained model).")
@click.option("--methods", default=DemoSettings.methods,
              show_default="the planner registry's showcase: the diffusion model, the inverse planner, the baseline",
              help="Comma-separated methods to replay (any `mimesys evaluate` builds from the demo's model, forward "
                   "model and dataset).")
@click.option("--profile-hold", type=click.IntRange(1, 16), default=DemoSettings.profile_hold, show_default=True,
              help="Windows per step of the solo profile (2: a window of settling before each reading).")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--resume", is_flag=True, help="Keep a previous demo's output: its campaign resumes where it stopped.")
@json_option(help="Print only one JSON object on stdout, at the end: the output directory, each step's status "
                  "and seconds, the paths written and the mean DTW per trace and method (also when a step "
                  "fails); the steps, the commands' output and the tables go to stderr.")
def demo(out, traces_dir, trace_file, trace_format, rounds, round_size, repetitions, spread_threshold, train_steps,
         app_seconds, import_windows, ddpo_epochs, methods, profile_hold, seed, resume, as_json):
    """Run the whole path on this host: agent, campaign, training, export, a real trace
    imported and a real application recorded, both replayed, DTW against the baselines."""
    settings = DemoSettings(rounds=rounds, round_size=round_size, repetitions=repetitions,
                            spread_threshold=spread_threshold, train_steps=train_steps,
                            app_seconds=app_seconds, import_windows=import_windows, ddpo_epochs=ddpo_epochs,
                            methods=methods, profile_hold=profile_hold, seed=seed)
    out = out.resolve()
    d = Demo(out, settings, trace_file=trace_file or traces_dir / DEFAULT_TRACE_NAME, trace_format=trace_format,
             resume=resume, json_stdout=as_json)
    stdout = sys.stdout
    ok, error = False, None
    # --json: what a person reads goes to stderr, click.echo's included; stdout is the summary's
    with contextlib.redirect_stdout(sys.stderr) if as_json else contextlib.nullcontext():
        click.secho(f"mimesys demo -> {out}", bold=True)
        try:
            run_steps(d)
            ok = True
        except BaseException as e:
            error = e.format_message() if isinstance(e, click.ClickException) else repr(e)
            raise
        finally:
            d.agent.stop()
            _print_steps(d)
            if as_json:
                click.echo(json.dumps(demo_summary(d, ok=ok, error=error), default=str), file=stdout)


def demo_summary(d: Demo, *, ok: bool, error: str | None = None) -> dict:
    """The --json document: what the demo did and wrote, as far as it got (nothing of an older
    demo's output that a failed preflight left in place)."""
    p = d.paths
    failed = next((r for r in d.steps if r.status == "FAILED"), None)
    simulated = None
    if d.prepared and p.results_json.is_file():
        with contextlib.suppress(ValueError, OSError):
            simulated = json.loads(p.results_json.read_text()).get("meta", {}).get("simulated")
    return {"ok": ok, "out": str(d.out), "seconds": round(time.monotonic() - d.started, 1),
            "failed_step": failed.name if failed else None,
            "error": error if error is not None or failed is None else failed.detail,
            "steps": [{"number": r.number, "name": r.name, "status": r.status, "seconds": round(r.seconds, 1),
                       "detail": r.detail} for r in d.steps],
            "paths": p.existing() if d.prepared else {},
            "pngs": sorted(str(x) for x in d.out.rglob("*.png")) if d.prepared and d.out.is_dir() else [],
            "simulated": simulated,
            "mean_dtw": {t: {m: _finite_or_none(_mean(per.values())) for m, per in methods.items()}
                         for t, methods in _dtw_by_trace(p.results_csv).items()}
            if d.prepared and p.results_csv.is_file() else None}


def _finite_or_none(v: float):
    return v if v == v else None


MARKER = ".mimesys-demo"


def write_campaign_config(campaign: Path, s: DemoSettings) -> None:
    """campaign.toml (the campaign's own configuration file, controller/campaign) for a new
    campaign; a resumed one keeps the file it was created with."""
    path = campaign / "campaign.toml"
    if path.exists():
        return
    campaign.mkdir(parents=True, exist_ok=True)
    path.write_text("# written by `mimesys demo` (see DemoSettings in controller/commands/demo.py)\n"
                    'strategy = "novelty"\n'
                    f"round_size = {s.round_size}\n"
                    f"chain_len = {s.chain_len}\n"
                    f"repetitions = {s.repetitions}\n"
                    "# the one-hot sweep runs only where the solo profile cannot stand for round 0\n"
                    "sweep_intensities = [1.0]\n"
                    f"spread_threshold = {s.spread_threshold}\n"
                    f"seed = {s.seed}\n")


def _prepare_out(out: Path, resume: bool) -> None:
    """A fresh output directory; a previous demo's is replaced (or resumed with --resume).
    A non-empty directory that is not a demo's is never touched."""
    if out.exists() and any(out.iterdir()):
        if not (out / MARKER).exists():
            raise DemoFailed(f"{out} exists, is not empty and is not a demo output; pass another --output")
        if not resume:
            click.echo(f"    replacing the previous demo output in {out} (--resume keeps it)")
            shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / MARKER).write_text("written by `mimesys demo`; the next demo replaces this directory\n")


def _truncate_trace(path: Path, windows: int) -> None:
    from mimesys.trace import Trace

    tr = Trace.read(path)
    if tr.T <= windows:
        return
    tr.values = tr.values[:windows]
    if tr.window_start_ns is not None:
        tr.window_start_ns = tr.window_start_ns[:windows]
    tr.provenance = {**tr.provenance, "demo_truncated_to_windows": windows}
    tr.write(path)


def _record_app(d: Demo, trace_path: Path, app_log: Path) -> None:
    """`mimesys-agent record` samples the host while the application runs next to it."""
    s, agent = d.settings, d.agent
    trace_path.parent.mkdir(parents=True, exist_ok=True)
    record_cmd = [sys.executable, "-m", AGENT_CLI, "record", "--config", str(agent.config_file),
                  "--seconds", str(s.app_seconds), "-o", str(trace_path)]
    click.echo(f"    $ mimesys-agent record --seconds {s.app_seconds} -o {trace_path}   (with the app alongside)")
    recorder = subprocess.Popen(record_cmd, cwd=REPO, stdout=d.child_stdout)
    time.sleep(2)  # the recorder's first window starts before the application does
    workdir = agent.tmp / "scratch" / "app"
    with open(app_log, "w") as log:
        app = subprocess.run(["bash", "-c", APP_SCRIPT, "app", str(workdir), str(app_phase_seconds(s.app_seconds))],
                             stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "PYTHON": sys.executable})
    rc = recorder.wait()
    if rc != 0:
        raise DemoFailed(f"step 'record': `mimesys-agent record` exited with status {rc}")
    if app.returncode != 0:
        raise DemoFailed(f"step 'record': the application exited with status {app.returncode} (log {app_log})")


def _print_results(evaluation: Path) -> None:
    """The evaluation's per-(trace, method, metric) rows as one table per trace."""
    path = evaluation / "results.csv"
    if not path.is_file():
        raise DemoFailed(f"step 'summary': {path} not found; `mimesys evaluate` wrote no results")
    by_trace = _dtw_by_trace(path)
    for trace, methods in by_trace.items():
        # one column per resource (the mean of its metrics), so two dozen metrics fit a terminal
        groups = sorted({m.split(".")[0] for per in methods.values() for m in per})
        width = max(12, *(len(m) for m in methods))
        click.secho(f"\n{trace}", bold=True)
        click.echo(f"  {'method':{width}s} " + " ".join(f"{g:>8s}" for g in groups) + f" {'mean':>8s}")
        for method, per in sorted(methods.items(), key=lambda kv: _mean(kv[1].values())):
            cols = [_mean(v for m, v in per.items() if m.split(".")[0] == g) for g in groups]
            click.echo(f"  {method:{width}s} " + " ".join(f"{v:8.3f}" for v in cols) + f" {_mean(per.values()):8.3f}")
    click.echo("  (per metric: results.csv, each scaled by the target's own peak, so traffic where the target had "
               "none counts in full; a resource's column is the mean DTW of its metrics; mean = over all metrics)")
    meta = evaluation / "results.json"
    if meta.is_file():
        simulated = json.loads(meta.read_text()).get("meta", {}).get("simulated")
        if simulated:
            click.secho("NOTE: the agent reported a SIMULATED host; these are not measurements.", fg="yellow")


def _dtw_by_trace(path: Path) -> dict[str, dict[str, dict[str, float]]]:
    """results.csv as {trace: {method: {metric: normalized DTW}}}."""
    by_trace: dict[str, dict[str, dict[str, float]]] = {}
    with path.open() as fh:
        for r in csv.DictReader(fh):  # an empty distance is a metric that could not be scored (reason in the CSV)
            value = float(r["dtw_normalized"]) if r["dtw_normalized"] else float("nan")
            by_trace.setdefault(r["trace"], {}).setdefault(r["method"], {})[r["metric"]] = value
    return by_trace


def _mean(values) -> float:
    finite = [v for v in values if v == v]
    return sum(finite) / len(finite) if finite else float("nan")


def _print_steps(d: Demo) -> None:
    total = time.monotonic() - d.started
    click.secho(f"\nmimesys demo: {total / 60:.1f} min", bold=True)
    for rec in d.steps:
        click.echo(f"  {rec.number:2d}. {rec.name:10s} {rec.status:7s} {rec.seconds:7.0f}s  {rec.detail}")
