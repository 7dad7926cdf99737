"""Colocation on real mixes: what a latency-sensitive neighbour feels next to each method's
replay, against what it feels next to the real mix the plan was made from (issue 42).

    python bench/colocation_real.py --fidelity WORK --out DIR [--mixes a,b] [--methods single,inverse,knn]
                                    [--seconds 60] [--interval 5]

WORK is a fidelity bench's work directory (bench/fidelity_real.py --out OUT --label L: OUT/L): its
plans (eval-rep0/plans/<mix>__<method>.h5) are replayed here, with the calibration that bench kept
(OUT/calibration.json); with --regenerate the plans are made again by this code from the same
targets, forward model, dataset and diffusion exports (WORK/model-onnx, for diffusion and select;
WORK/model-onnx-<row>, the fidelity bench's ablation rows, e.g. ddpo-forward) (seed 0), into
DIR/plans: every planner the registry can build from those. Everything runs on
this host, on 127.0.0.1.

The neighbour is PostgreSQL under select-only pgbench (--clients, default 2), its own cluster started once;
pgbench reports transactions per second every --interval seconds (-P). Each repeat measures every
mix, and for each mix its conditions one after another, so that a drift of the host's background
hits every condition alike:

    alone           the neighbour, nothing else started (twice)
    mix             next to the real mix (bench/workloads/mixes.py), twice: the floor is one
                    run against the other
    <method>        next to the method's plan replayed (`mimesys-agent replay --no-record`), twice
    <method>@P      the same plan replayed with agent.placement = P (agentd/config.py): "free",
                    the runner's threads move among the CPUs as an application's do; "yield",
                    each pinned to its core until another process keeps it waiting there;
                    "pinned"; without @, the agent's default
    <method>*N      the plan cut into N plans (intensities and memory held / N, no busy target)
                    replayed side by side: the same CPU alone on N times the threads

Degradation of a run, per interval i: (alone_i − with_i) / alone_i × 100 (alone_i: the mean of
the alone runs' interval i), and overall on the run's mean. A method's error: over every (mix
run, replay) pair, |overall degradation difference| in points and the mean |per-interval
difference|; the floor: the two mix runs against each other; "nothing": the alone runs scored
as a replay against the mix runs, what a plan the neighbour does not feel would score (a method
is worth something only under it: where a mix barely touches the neighbour, nothing is under
the bars too). Every run is kept in
DIR/runs/<mix>__<condition>__<n>.json once measured (a rerun resumes); DIR/colocation.json and
DIR/colocation.png hold the summary; one JSON line on stdout.

Host noise (bench/results/colocation-floor/README.md). On the shared 2-vCPU VM the floor was
8.1 points overall and 11.1 per interval while other sessions' test suites ran beside the bench
(bench/results/fidelity/memory-2026-11-28). Steal is not what moves the neighbour (under 0.1 % of
the CPUs on average, 1.3 % in the worst 5-s interval of 40 runs); other sessions' processes are,
and in either direction (this ping-pong neighbour runs faster when the other vCPU is kept busy,
slower when a mix also competes), so no correction undoes them. Undisturbed, the neighbour alone
moves ~3 % between 5-s intervals and 1-4 % between runs, and with the disturbed runs left out the
floor on three memory mixes was 2.7 points overall and 4.7 per interval (6.1 / 8.6 with them).
So the bench now watches the host and measures a disturbed run again:

    --lock PATH        hold this flock (the host's shared lock, e.g. /tmp/mimesys-cpu.lock) around
                       each run, so that work which takes the same lock waits for it
    --max-foreign PCT  every run records, per interval, the hypervisor's steal and the CPU time of
                       every process that is neither the neighbour's nor the workload's (kernel
                       threads left out: the workload's IO runs partly in them), as % of the
                       host's CPUs; a run with an interval where the two add up to more than PCT
                       (default 10) is measured again (--retries times), the disturbed one kept as
                       runs/<mix>__<condition>__<n>.disturbed<j>.json and left out
    --metric M         tps (default), or p50 / p95 / p99: the latency percentile of the
                       transactions that ended in each interval (pgbench -l, kept in every run),
                       degradation then being the latency added, (with − alone)/alone × 100
    --retries N        how often a disturbed run, or one whose workload failed (kept as
                       runs/<mix>__<condition>__<n>.failed<j>.json with its output), is measured
                       again (default 2)
    --repeats N        each condition N times (default 2). With N runs the floor is the mean,
                       over every split of the mix's runs into two disjoint groups of N//2, of the
                       difference between the groups' mean degradations, and a method's error is
                       the mean over every (N//2 mix runs, N//2 replays) pair of groups: with
                       N = 2 the definitions above; both fall about as 1/sqrt(N//2)
"""

from __future__ import annotations

import argparse
import fcntl
import itertools
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO / "bench" / "workloads"))

from hostnoise import HostNoise, cpu_times, descendants, host_noise_pct  # noqa: E402
from mixes import PG_BIN, MixRun, start_postgres  # noqa: E402

PROGRESS = re.compile(r"progress: ([0-9.]+) s, ([0-9.]+) tps")




def finish(work: subprocess.Popen | None, seconds: int) -> str:
    """Wait for the workload beside the neighbour (killed 2 minutes past its time): its output."""
    if work is None:
        return ""
    try:
        return work.communicate(timeout=seconds + 120)[0]
    except subprocess.TimeoutExpired:
        work.kill()
        return work.communicate()[0]


def neighbour_tps(conn: list[str], seconds: int, interval: int, server_pid: int | None = None,
                  workload_pid: int | None = None, pin: set[int] | None = None,
                  clients: int = 2) -> tuple[list[float], dict]:
    """pgbench select-only with `clients` connections for `seconds`: transactions per second in
    each interval, and per interval the transactions' latency percentiles (ms; pgbench's
    per-transaction log) and the host's noise (HostNoise: steal and foreign CPU, % of the CPUs).
    `pin`: the CPUs pgbench may run on (the server's are set by pin_server)."""
    with tempfile.TemporaryDirectory() as logdir:
        t0 = time.time()
        p = subprocess.Popen([str(PG_BIN / "pgbench"), *conn, "-S", "-c", str(clients),
                              "-j", str(pgbench_threads(clients)), "-T", str(seconds), "-P", str(interval),
                              "-l", "--log-prefix", f"{logdir}/tx", "postgres"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             preexec_fn=(lambda: os.sched_setaffinity(0, pin)) if pin else None)
        noise = HostNoise([x for x in (server_pid, workload_pid, p.pid) if x], interval)
        noise.start()
        _, err = p.communicate()
        noise.done.set()
        noise.join()
        if p.returncode != 0:
            raise SystemExit(f"pgbench failed ({p.returncode}): {err.strip()[-300:]}")
        tps = [float(m.group(2)) for m in PROGRESS.finditer(err)]
        latency = latency_percentiles(sorted(Path(logdir).glob("tx*")), t0, interval, len(tps))
    return tps, {"latency_ms": latency, "steal_pct": noise.steal_pct, "foreign_pct": noise.foreign_pct}


def pgbench_threads(clients: int) -> int:
    """pgbench's own threads: one for the two clients of a ping-pong neighbour (its measured
    default), one per CPU for more, so that the client is not what caps a saturating neighbour."""
    return 1 if clients <= 2 else min(clients, os.cpu_count() or 1)


def latency_percentiles(logs: list[Path], t0: float, interval: int, n: int) -> dict[str, list[float]]:
    """Per interval from t0: the 50th, 95th and 99th percentile of the latency (ms) of the
    transactions that ended in it (pgbench -l lines: client, tx, latency us, script, epoch s, us)."""
    rows = [np.loadtxt(f, dtype=np.float64, usecols=(2, 4, 5), ndmin=2) for f in logs]
    a = np.concatenate(rows) if rows else np.zeros((0, 3))
    idx = np.floor((a[:, 1] + a[:, 2] / 1e6 - t0) / interval).astype(int)
    out: dict[str, list[float]] = {q: [] for q in LATENCY_Q}
    for i in range(n):
        x = a[idx == i, 0] / 1e3
        for q in LATENCY_Q:
            out[q].append(float(np.percentile(x, int(q))) if len(x) else float("nan"))
    return out


LATENCY_Q = ("50", "95", "99")


def plan_method(condition: str) -> str:
    """The planner a condition's plan comes from: "inverse@free" and "inverse*4" replay inverse's plan."""
    return condition.split("@", 1)[0].split("*", 1)[0]


def split_plan(src: Path, copies: int) -> Path:
    """The plan's work cut into `copies` equal plans (every intensity and the memory held divided
    by `copies`, no per-core busy target: each copy would hold its core to the whole plan's), kept
    beside it: run side by side, they use the CPU the plan uses alone on `copies` times its threads."""
    from dataclasses import replace

    from mimesys.plan import Plan
    dst = src.with_name(f"{src.stem}__x{copies}.h5")
    if not dst.exists():
        plan = Plan.read(src)
        held = None if plan.mem_held_B is None else plan.mem_held_B / copies
        replace(plan, compositions=(plan.compositions / copies).astype(np.float32), core_busy_target=None,
                mem_held_B=held, provenance={**plan.provenance, "split_from": src.name, "copies": copies}).write(dst)
    return dst


def regenerate(work: Path, mixes: list[str], methods: list[str], out: Path) -> Path:
    """Each method's plan for each mix's recorded target, made now through the planner registry
    from what the fidelity bench left in `work` (its forward model, dataset and, where it exported
    one, its diffusion model)."""
    methods = list(dict.fromkeys(plan_method(m) for m in methods))
    import controller.baselines  # noqa: F401  (registers the dataset baselines)
    from mimesys.planners.registry import load_planner, specs_for
    from mimesys.trace import Trace
    available = {"forward": work / "forward", "dataset": work / "dataset.h5"}
    if (work / "model-onnx" / "manifest.json").exists():
        available["model"] = work / "model-onnx"
    specs = specs_for(available)
    # the fidelity bench's diffusion ablation exports (WORK/model-onnx-<row>: ddpo-forward,
    # taught-steered, ...), each a diffusion planner of its own, by its row's name
    specs |= {d.name.removeprefix("model-onnx-"): str(d) for d in sorted(work.glob("model-onnx-*"))
              if (d / "manifest.json").exists()}
    out.mkdir(parents=True, exist_ok=True)
    for m in methods:
        if m not in specs:
            raise SystemExit(f"--methods {m}: not a planner {work} can build (it can: {', '.join(specs)})")
        gen = load_planner(specs[m])
        for mix in mixes:
            path = out / f"{mix}__{m}.h5"
            if not path.exists():
                gen.generate(Trace.read(work.parent / "targets" / f"{mix}.h5"), seed=0).write(path)
    return out


def workload_argv(condition: str, mix: str, seconds: int, plans: Path, config: Path) -> list[str] | None:
    if condition == "alone":
        return None
    if condition == "mix":
        return [sys.executable, str(REPO / "bench/workloads/mixes.py"), mix, "--seconds", str(seconds)]
    head, _, placement = condition.partition("@")
    method, _, copies = head.partition("*")
    if placement:
        config = config.with_name(f"agent-{placement}.toml")
    replay = [sys.executable, "-m", "agentd.cli", "replay", "--no-record", "--no-progress", "--config"]
    if not copies:
        return [*replay, str(config), str(plans / f"{mix}__{method}.h5")]
    # "<method>*N": the plan's work on N times its threads, N replays of a split plan side by side
    # (each with a run lock of its own: the agent's is host-wide), the first failure's status kept
    plan = split_plan(plans / f"{mix}__{method}.h5", int(copies))
    script = ""
    for i in range(int(copies)):
        own = config.with_name(f"{config.stem}-copy{i}.toml")
        if not own.exists():
            own.write_text(config.read_text() + f'run_lock = "{config.parent / f"run-copy{i}.lock"}"\n')
        script += " ".join(shlex.quote(a) for a in [*replay, str(own), str(plan)]) + " & pids=\"$pids $!\"\n"
    script += 'rc=0\nfor p in $pids; do wait "$p"; s=$?; [ "$rc" = 0 ] && rc=$s; done\nexit "$rc"\n'
    return ["sh", "-c", script]


def pin_server(server_pid: int, pin: set[int]) -> None:
    """The neighbour's server and every process of its tree on `pin` only (the backends it forks
    later inherit it)."""
    for p in descendants(cpu_times(), [server_pid]):
        try:
            os.sched_setaffinity(p, pin)
        except ProcessLookupError:      # a short-lived child (a startup helper) already gone
            pass


def measure(conn, condition: str, mix: str, seconds: int, interval: int, plans: Path, config: Path,
            server_pid: int | None = None, pin: set[int] | None = None, clients: int = 2) -> dict:
    argv = workload_argv(condition, mix, seconds, plans, config)
    # stdout too: replay --no-progress says there why its plan did not finish
    work = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True) if argv else None
    try:
        time.sleep(1.0)     # the recording a plan follows started a second before its mix
        tps, noise = neighbour_tps(conn, seconds - 2, interval, server_pid, work.pid if work else None, pin,
                                   clients)
    except BaseException:
        # a stop (^C, SIGTERM) or a failed neighbour: the workload runs in a session of its own,
        # so it would outlive the bench (a replay holding the CPUs for the rest of its plan)
        if work is not None and work.poll() is None:
            os.killpg(work.pid, signal.SIGTERM)
        finish(work, seconds)
        raise
    err = finish(work, seconds)
    failed = {"workload_failed": f"exited {work.returncode}: {err.strip()[-400:]}"} \
        if work is not None and work.returncode != 0 else {}
    return {"mix": mix, "condition": condition, "tps": tps, "interval_s": interval, "clients": clients,
            "at": time.time(),
            "start_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - seconds)), **noise,
            **failed}


def degradations(alone: np.ndarray, tps: list[float], cost: bool = False) -> tuple[float, np.ndarray]:
    """How much worse than alone, in %: throughput lost, or (cost: a latency) time added."""
    x = np.asarray(tps[:len(alone)], np.float64)
    a = alone[:len(x)]
    sgn = -1 if cost else 1
    return float(sgn * (a.mean() - x.mean()) / a.mean() * 100), sgn * (a - x) / a * 100


def series(run: dict, metric: str) -> list[float]:
    """The run's per-interval values of `metric`: tps, or p50/p95/p99 latency."""
    if metric == "tps":
        return run["tps"]
    if "latency_ms" not in run:
        raise SystemExit(f"--metric {metric}: a run of {run['mix']} {run['condition']} was recorded without "
                         f"latencies (before the bench kept them): measure it again")
    return run["latency_ms"][metric[1:]]


def errors(a: tuple[float, np.ndarray], b: tuple[float, np.ndarray]) -> tuple[float, float]:
    n = min(len(a[1]), len(b[1]))
    return abs(a[0] - b[0]), float(np.mean(np.abs(a[1][:n] - b[1][:n])))


def group_mean(degs: list[tuple[float, np.ndarray]]) -> tuple[float, np.ndarray]:
    n = min(len(d[1]) for d in degs)
    return float(np.mean([d[0] for d in degs])), np.mean([d[1][:n] for d in degs], axis=0)


def floor_errors(degs: list, k: int) -> list[tuple[float, float]]:
    """errors() between the means of every two disjoint groups of k runs."""
    idx = range(len(degs))
    return [errors(group_mean([degs[i] for i in a]), group_mean([degs[i] for i in b]))
            for a in itertools.combinations(idx, k) for b in itertools.combinations(idx, k)
            if a < b and not set(a) & set(b)]


def cross_errors(xs: list, ys: list, k: int) -> list[tuple[float, float]]:
    """errors() between the mean of every group of k of xs and of every group of k of ys."""
    return [errors(group_mean(list(a)), group_mean(list(b)))
            for a in itertools.combinations(xs, k) for b in itertools.combinations(ys, k)]


def summarize(runs: dict, mixes: list[str], methods: list[str], metric: str = "tps") -> dict:
    out = {"by_mix": {}, "methods": {}, "metric": metric}
    cost = metric != "tps"
    for mix in mixes:
        alone = [np.asarray(series(r, metric)) for r in runs[mix]["alone"]]
        n = min(len(a) for a in alone)
        base = np.mean([a[:n] for a in alone], axis=0)
        deg = {c: [degradations(base, series(r, metric), cost) for r in rs] for c, rs in runs[mix].items()}
        k = max(1, len(deg["mix"]) // 2)
        fl = floor_errors(deg["mix"], k)
        floor = float(np.mean([p[0] for p in fl])), float(np.mean([p[1] for p in fl]))
        every = [r for rs in runs[mix].values() for r in rs]
        row = {("alone_tps" if metric == "tps" else f"alone_{metric}_ms"): float(base.mean()),
               "mix_degradation_pct": [d[0] for d in deg["mix"]],
               "floor": {"overall_pp": floor[0], "per_interval_pp": floor[1]}, "group_k": k,
               # steal + foreign CPU in the worst interval: the most over the runs kept, and the mean
               "host_noise_pct": {"max": max(host_noise_pct(r) for r in every),
                                  "mean": float(np.mean([host_noise_pct(r) for r in every]))},
               "mix_series_pct": [d[1].tolist() for d in deg["mix"]], "methods": {}}
        # "nothing": the neighbour's alone runs scored as if they were a replay, i.e. what a plan
        # the neighbour does not feel would score. Where the real mix barely touches the neighbour
        # this is under the bars too, and a method is worth something only below it.
        nothing = cross_errors(deg["mix"], deg["alone"], min(k, len(deg["alone"])))
        row["nothing"] = {"overall_pp": float(np.mean([p[0] for p in nothing])),
                          "per_interval_pp": float(np.mean([p[1] for p in nothing]))}
        for m in methods:
            pairs = cross_errors(deg["mix"], deg[m], min(k, len(deg[m])))
            row["methods"][m] = {"degradation_pct": [d[0] for d in deg[m]],
                                 "overall_pp": float(np.mean([p[0] for p in pairs])),
                                 "per_interval_pp": float(np.mean([p[1] for p in pairs])),
                                 "series_pct": [d[1].tolist() for d in deg[m]]}
        out["by_mix"][mix] = row
    for m in ["floor", "nothing", *methods]:
        get = (lambda r, m=m: r[m]) if m in ("floor", "nothing") else (lambda r, m=m: r["methods"][m])
        out["methods"][m] = {k: float(np.mean([get(out["by_mix"][x])[k] for x in mixes]))
                             for k in ("overall_pp", "per_interval_pp")}
    return out


def plot(summary: dict, path: Path, methods: list[str]) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    mixes = list(summary["by_mix"])
    fig, axes = plt.subplots(len(mixes), 1, figsize=(9, 2.4 * len(mixes)), squeeze=False)
    for ax, mix in zip(axes[:, 0], mixes):
        row = summary["by_mix"][mix]
        for i, s in enumerate(row["mix_series_pct"]):
            ax.plot(s, color="black", lw=1.6 - 0.6 * i, label="real mix" if i == 0 else None)
        for j, m in enumerate(methods):
            e = row["methods"][m]
            for i, s in enumerate(e["series_pct"]):
                ax.plot(s, color=f"C{j}", lw=1.0, ls="-" if i == 0 else "--",
                        label=f"{m}: {e['overall_pp']:.1f} / {e['per_interval_pp']:.1f} pp" if i == 0 else None)
        ax.set_title(f"{mix}: floor {row['floor']['overall_pp']:.1f} / {row['floor']['per_interval_pp']:.1f} pp, "
                     f"nothing {row['nothing']['overall_pp']:.1f} / {row['nothing']['per_interval_pp']:.1f} pp "
                     f"(overall / per interval)", fontsize=9)
        ax.set_ylabel("degradation %")
        ax.legend(fontsize=7, loc="upper right")
    axes[-1, 0].set_xlabel("interval")
    fig.tight_layout()
    fig.savefig(path, dpi=90)


class held:
    """flock on `path` (None: nothing) for the with-block."""

    def __init__(self, path: Path | None):
        self.path, self.fh = path, None

    def __enter__(self):
        if self.path is not None:
            self.fh = open(self.path, "a")
            fcntl.flock(self.fh, fcntl.LOCK_EX)

    def __exit__(self, *exc):
        if self.fh is not None:
            self.fh.close()


def main() -> None:
    # A stop (SIGTERM) unwinds like ^C: the neighbour's cluster and the running mix are stopped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fidelity", type=Path, required=True, help="a fidelity bench's work directory (OUT/LABEL)")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--mixes", default="kv_grow,sort_xz,pg_sort,sqlite_index")
    ap.add_argument("--methods", default="single,inverse,knn")
    ap.add_argument("--seconds", type=int, default=60)
    ap.add_argument("--interval", type=int, default=5)
    ap.add_argument("--metric", choices=["tps", "p50", "p95", "p99"], default="tps",
                    help="what the neighbour's degradation is taken on: throughput, or a latency percentile")
    ap.add_argument("--repeats", type=int, default=2, help="runs of each condition per mix (default 2)")
    ap.add_argument("--lock", type=Path, help="a flock to hold around each run (the host's shared lock)")
    ap.add_argument("--max-foreign", type=float, default=10.0,
                    help="measure a run again when steal + other processes' CPU took more than this %% of the "
                         "CPUs in an interval")
    ap.add_argument("--retries", type=int, default=2, help="how often a disturbed or failed run is measured again")
    ap.add_argument("--pin", help="CPUs (e.g. 0) to pin the neighbour to, server and client: what it feels is then "
                                  "the share of those CPUs the load takes, not how the load wakes the others")
    ap.add_argument("--clients", type=int, default=2,
                    help="the neighbour's pgbench clients (default 2: a ping-pong that leaves CPU idle; more, e.g. "
                         "8, saturate the CPUs: a throughput-bound server that feels every share of CPU a load takes)")
    ap.add_argument("--regenerate", action="store_true",
                    help="make the plans again with this code (into DIR/plans) instead of the fidelity bench's")
    args = ap.parse_args()
    mixes, methods = args.mixes.split(","), args.methods.split(",")
    plans = regenerate(args.fidelity, mixes, methods, args.out / "plans") if args.regenerate \
        else args.fidelity / "eval-rep0" / "plans"
    for mix in mixes:
        for m in map(plan_method, methods):
            if not (plans / f"{mix}__{m}.h5").exists():
                raise SystemExit(f"no plan {plans / f'{mix}__{m}.h5'}: run bench/fidelity_real.py with that mix "
                                 f"and method first")
    calibration = args.fidelity.parent / "calibration.json"
    if not calibration.exists():
        raise SystemExit(f"no {calibration}: the fidelity bench keeps its agent's calibration there")
    out = args.out
    (out / "runs").mkdir(parents=True, exist_ok=True)
    agent = (out / "agent").resolve()     # the agent's config takes absolute paths only
    for d in ("state", "scratch"):
        (agent / d).mkdir(parents=True, exist_ok=True)
    (agent / "state" / "calibration.json").write_bytes(calibration.read_bytes())
    config = agent / "agent.toml"
    config.write_text(f'[agent]\nbackend = "host"\nstate_dir = "{agent / "state"}"\n'
                      f'scratch_dir = "{agent / "scratch"}"\n')
    for placement in {m.partition("@")[2] for m in methods} - {""}:
        # a condition "<method>@<placement>" replays that method's plan with agent.placement set
        config.with_name(f"agent-{placement}.toml").write_text(config.read_text() + f'placement = "{placement}"\n')
    run = MixRun(Path("/var/tmp"))
    server, conn = start_postgres(run)
    pin = {int(c) for c in args.pin.split(",")} if args.pin else None
    try:
        if pin:
            pin_server(server.pid, pin)
        subprocess.run([str(PG_BIN / "pgbench"), *conn, "-i", "-q", "-s", "4", "postgres"], capture_output=True,
                       check=True)
        runs: dict = {}
        conditions = ["alone", "mix", *methods]
        total, done, t0 = len(mixes) * len(conditions) * args.repeats, 0, time.monotonic()
        # repeat-major: a run stopped part-way has measured every mix equally often, so it is
        # summarized with --repeats of what is complete (every run is kept, nothing is measured again)
        for n in range(args.repeats):
            for mix in mixes:
                for c in conditions:
                    path = out / "runs" / f"{mix}__{c}__{n}.json"
                    for j in range(args.retries + 1):
                        if path.exists():
                            break
                        with held(args.lock):
                            r = measure(conn, c, mix, args.seconds, args.interval, plans, config, server.pid, pin,
                                        args.clients)
                        if "workload_failed" in r:
                            # the run says nothing of the plan's effect; kept with why, measured again
                            path.with_suffix(f".failed{j}.json").write_text(json.dumps(r))
                            if j == args.retries:
                                raise SystemExit(f"{c} for {mix} #{n} failed {j + 1} times, last: "
                                                 f"{r['workload_failed']}")
                            print(f"  {mix} {c} #{n}: the workload {r['workload_failed']}: measured again",
                                  file=sys.stderr, flush=True)
                            continue
                        noisy = host_noise_pct(r)
                        if noisy > args.max_foreign and j < args.retries:
                            print(f"  {mix} {c} #{n}: steal + other processes took {noisy:.1f} % of the CPUs "
                                  f"(> {args.max_foreign}): measured again", file=sys.stderr, flush=True)
                            path.with_suffix(f".disturbed{j}.json").write_text(json.dumps(r))
                        else:
                            path.write_text(json.dumps(r))
                    kept = json.loads(path.read_text())
                    if kept.get("clients", 2) != args.clients:
                        raise SystemExit(f"{path} was measured with a neighbour of {kept.get('clients', 2)} "
                                         f"clients, not --clients {args.clients}: another --out for this design")
                    runs.setdefault(mix, {}).setdefault(c, []).append(kept)
                    done += 1
                    print(f"[{done}/{total}] {mix} {c} #{n}  ({time.monotonic() - t0:.0f} s)", file=sys.stderr,
                          flush=True)
    finally:
        run.kill([server])
        run.close()
    summary = summarize(runs, mixes, methods, args.metric)
    summary.update({"bench": "colocation_real", "fidelity": str(args.fidelity), "plans": str(plans),
                    "seconds": args.seconds, "repeats": args.repeats, "max_foreign_pct": args.max_foreign,
                    "lock": str(args.lock) if args.lock else None, "pin": sorted(pin) if pin else None,
                    "interval_s": args.interval, "neighbour": f"PostgreSQL select-only pgbench, {args.clients} clients",
                    "simulated": False})
    (out / "colocation.json").write_text(json.dumps(summary, indent=1))
    plot(summary, out / "colocation.png", methods)
    print(json.dumps({"bench": "colocation_real", "methods": summary["methods"]}))


if __name__ == "__main__":
    main()
