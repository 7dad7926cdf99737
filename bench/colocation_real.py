"""Colocation on real mixes: what a latency-sensitive neighbour feels next to each method's
replay, against what it feels next to the real mix the plan was made from (issue 42).

    python bench/colocation_real.py --fidelity WORK --out DIR [--mixes a,b] [--methods single,inverse,knn]
                                    [--seconds 60] [--interval 5]

WORK is a fidelity bench's work directory (bench/fidelity_real.py --out OUT --label L: OUT/L): its
plans (eval-rep0/plans/<mix>__<method>.h5) are replayed here, with the calibration that bench kept
(OUT/calibration.json); with --regenerate the plans are made again by this code from the same
targets, forward model and dataset (seed 0), into DIR/plans. Everything runs on this host, on
127.0.0.1.

The neighbour is PostgreSQL under select-only pgbench (2 clients), its own cluster started once;
pgbench reports transactions per second every --interval seconds (-P). For each mix, interleaved
so that a drift of the host's background hits every condition alike:

    alone           the neighbour, nothing else started (twice)
    mix             next to the real mix (bench/workloads/mixes.py), twice: the floor is one
                    run against the other
    <method>        next to the method's plan replayed (`mimesys-agent replay --no-record`), twice

Degradation of a run, per interval i: (alone_i − with_i) / alone_i × 100 (alone_i: the mean of
the alone runs' interval i), and overall on the run's mean. A method's error: over every (mix
run, replay) pair, |overall degradation difference| in points and the mean |per-interval
difference|; the floor: the two mix runs against each other. Every run is kept in
DIR/runs/<mix>__<condition>__<n>.json once measured (a rerun resumes); DIR/colocation.json and
DIR/colocation.png hold the summary; one JSON line on stdout.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench" / "workloads"))

from mixes import PG_BIN, MixRun, start_postgres  # noqa: E402

PROGRESS = re.compile(r"progress: ([0-9.]+) s, ([0-9.]+) tps")


def neighbour_tps(conn: list[str], seconds: int, interval: int) -> list[float]:
    """pgbench select-only for `seconds`: transactions per second in each interval."""
    p = subprocess.run([str(PG_BIN / "pgbench"), *conn, "-S", "-c", "2", "-j", "1", "-T", str(seconds),
                        "-P", str(interval), "postgres"], capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"pgbench failed ({p.returncode}): {p.stderr.strip()[-300:]}")
    return [float(m.group(2)) for m in PROGRESS.finditer(p.stderr)]


def regenerate(work: Path, mixes: list[str], methods: list[str], out: Path) -> Path:
    """Each method's plan for each mix's recorded target, made now through the planner registry."""
    import controller.baselines  # noqa: F401  (registers the dataset baselines)
    from mimesys.planners.registry import load_planner
    from mimesys.trace import Trace
    out.mkdir(parents=True, exist_ok=True)
    for m in methods:
        spec = f"inverse:{work / 'forward'}" if m == "inverse" else m
        gen = load_planner(spec, dataset=str(work / "dataset.h5"))
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
    return [sys.executable, "-m", "agentd.cli", "replay", str(plans / f"{mix}__{condition}.h5"), "--config",
            str(config), "--no-record", "--no-progress"]


def measure(conn, condition: str, mix: str, seconds: int, interval: int, plans: Path, config: Path) -> dict:
    argv = workload_argv(condition, mix, seconds, plans, config)
    work = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True) if argv else None
    try:
        time.sleep(1.0)     # the recording a plan follows started a second before its mix
        tps = neighbour_tps(conn, seconds - 2, interval)
    finally:
        err = ""
        if work is not None:
            try:
                _, err = work.communicate(timeout=seconds + 120)
            except subprocess.TimeoutExpired:
                work.kill()
                _, err = work.communicate()
    if work is not None and work.returncode != 0:
        raise SystemExit(f"{condition} for {mix} exited {work.returncode}: {err.strip()[-400:]}")
    return {"mix": mix, "condition": condition, "tps": tps, "interval_s": interval, "at": time.time()}


def degradations(alone: np.ndarray, tps: list[float]) -> tuple[float, np.ndarray]:
    x = np.asarray(tps[:len(alone)], np.float64)
    a = alone[:len(x)]
    return float((a.mean() - x.mean()) / a.mean() * 100), (a - x) / a * 100


def errors(a: tuple[float, np.ndarray], b: tuple[float, np.ndarray]) -> tuple[float, float]:
    n = min(len(a[1]), len(b[1]))
    return abs(a[0] - b[0]), float(np.mean(np.abs(a[1][:n] - b[1][:n])))


def summarize(runs: dict, mixes: list[str], methods: list[str]) -> dict:
    out = {"by_mix": {}, "methods": {}}
    for mix in mixes:
        alone = [np.asarray(r["tps"]) for r in runs[mix]["alone"]]
        n = min(len(a) for a in alone)
        base = np.mean([a[:n] for a in alone], axis=0)
        deg = {c: [degradations(base, r["tps"]) for r in rs] for c, rs in runs[mix].items() if c != "alone"}
        floor = errors(*deg["mix"][:2])
        row = {"alone_tps": float(base.mean()), "mix_degradation_pct": [d[0] for d in deg["mix"]],
               "floor": {"overall_pp": floor[0], "per_interval_pp": floor[1]},
               "mix_series_pct": [d[1].tolist() for d in deg["mix"]], "methods": {}}
        for m in methods:
            pairs = [errors(x, y) for x in deg["mix"] for y in deg[m]]
            row["methods"][m] = {"degradation_pct": [d[0] for d in deg[m]],
                                 "overall_pp": float(np.mean([p[0] for p in pairs])),
                                 "per_interval_pp": float(np.mean([p[1] for p in pairs])),
                                 "series_pct": [d[1].tolist() for d in deg[m]]}
        out["by_mix"][mix] = row
    for m in ["floor", *methods]:
        get = (lambda r: r["floor"]) if m == "floor" else (lambda r, m=m: r["methods"][m])
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
        ax.set_title(f"{mix}: floor {row['floor']['overall_pp']:.1f} / {row['floor']['per_interval_pp']:.1f} pp "
                     f"(overall / per interval)", fontsize=9)
        ax.set_ylabel("degradation %")
        ax.legend(fontsize=7, loc="upper right")
    axes[-1, 0].set_xlabel("interval")
    fig.tight_layout()
    fig.savefig(path, dpi=90)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fidelity", type=Path, required=True, help="a fidelity bench's work directory (OUT/LABEL)")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--mixes", default="kv_grow,sort_xz,pg_sort,sqlite_index")
    ap.add_argument("--methods", default="single,inverse,knn")
    ap.add_argument("--seconds", type=int, default=60)
    ap.add_argument("--interval", type=int, default=5)
    ap.add_argument("--regenerate", action="store_true",
                    help="make the plans again with this code (into DIR/plans) instead of the fidelity bench's")
    args = ap.parse_args()
    mixes, methods = args.mixes.split(","), args.methods.split(",")
    plans = regenerate(args.fidelity, mixes, methods, args.out / "plans") if args.regenerate \
        else args.fidelity / "eval-rep0" / "plans"
    for mix in mixes:
        for m in methods:
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
    run = MixRun(Path("/var/tmp"))
    server, conn = start_postgres(run)
    try:
        subprocess.run([str(PG_BIN / "pgbench"), *conn, "-i", "-q", "-s", "4", "postgres"], capture_output=True,
                       check=True)
        runs: dict = {}
        conditions = ["alone", "mix", *methods]
        total, done, t0 = len(mixes) * len(conditions) * 2, 0, time.monotonic()
        for mix in mixes:
            for n in range(2):
                for c in conditions:
                    path = out / "runs" / f"{mix}__{c}__{n}.json"
                    if not path.exists():
                        path.write_text(json.dumps(measure(conn, c, mix, args.seconds, args.interval, plans, config)))
                    runs.setdefault(mix, {}).setdefault(c, []).append(json.loads(path.read_text()))
                    done += 1
                    print(f"[{done}/{total}] {mix} {c} #{n}  ({time.monotonic() - t0:.0f} s)", file=sys.stderr,
                          flush=True)
    finally:
        run.kill([server])
        run.close()
    summary = summarize(runs, mixes, methods)
    summary.update({"bench": "colocation_real", "fidelity": str(args.fidelity), "plans": str(plans),
                    "seconds": args.seconds,
                    "interval_s": args.interval, "neighbour": "PostgreSQL select-only pgbench, 2 clients",
                    "simulated": False})
    (out / "colocation.json").write_text(json.dumps(summary, indent=1))
    plot(summary, out / "colocation.png", methods)
    print(json.dumps({"bench": "colocation_real", "methods": summary["methods"]}))


if __name__ == "__main__":
    main()
