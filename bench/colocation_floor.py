"""The colocation bench's floor (issue 42): where the neighbour's noise comes from on this host,
and how far other measurement designs lower the floor (the real mix against itself).

    python bench/colocation_floor.py measure --out DIR --mix sqlite_index --runs alone,mix,alone,mix \
                                             [--neighbour pg|redis] [--seconds 60]
    python bench/colocation_floor.py score --out DIR [--json FILE] [--png FILE]

measure runs the neighbour of bench/colocation_real.py (PostgreSQL select-only pgbench, 2 clients;
or, with --neighbour redis, redis-benchmark GET with 2 clients) alone or next to a real mix
(bench/workloads/mixes.py), the same way that bench does (the mix starts, the neighbour a second
later for --seconds - 2), and records everything once, per second:

- the neighbour's transactions (pgbench's per-transaction log, -l: completions and latencies;
  redis-benchmark's live throughput lines) and pgbench's -P 5 progress lines (what the bench uses),
- /proc/stat (busy, idle, iowait, steal), /proc/pressure/cpu,
- the CPU time of the neighbour's processes (server tree and client), of the mix's process tree,
  and the rest (busy CPU less those two: other processes, the kernel, this sampler).

Each run is one JSON file DIR/runs/<neighbour>__<mix>__<condition>__<n>.json (a run already there
is not measured again; runs are numbered per mix and condition in the order given). The
neighbour's server is started once per measure call. Hold the host's lock around it:
`flock /tmp/mimesys-cpu.lock python bench/colocation_floor.py measure ...`.

score scores every design from the same runs: the floor (the mix's runs against each other, every
pair, and means of k runs against means of k others) under the current design and the
alternatives (steal-corrected throughput, the nearest alone run as baseline, latency percentiles,
CPU time per transaction, ...), plus the alone runs' spread between intervals and between runs.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench" / "workloads"))

from mixes import PG_BIN, MixRun, free_port, start_postgres  # noqa: E402

sys.path.insert(0, str(REPO / "bench"))
from colocation_real import finish, pin_server  # noqa: E402
from hostnoise import cpu_times, descendants  # noqa: E402

PROGRESS = re.compile(r"progress: ([0-9.]+) s, ([0-9.]+) tps")
CLK = os.sysconf("SC_CLK_TCK")


# -- sampling -----------------------------------------------------------------------------------
def _stat() -> list[int]:
    with open("/proc/stat") as fh:
        f = fh.readline().split()[1:]
    # user nice system idle iowait irq softirq steal guest guest_nice
    return [int(x) for x in f[:8]]


def _psi() -> float:
    with open("/proc/pressure/cpu") as fh:
        return int(fh.readline().split("total=")[1]) / 1e6


class Sampler(threading.Thread):
    """Every `period` seconds: time, /proc/stat, CPU pressure, CPU time of the neighbour's and
    the workload's process trees."""

    def __init__(self, neighbour_roots, workload_root, period=0.5):
        super().__init__(daemon=True)
        self.n_roots, self.w_root, self.period = neighbour_roots, workload_root, period
        self.rows: list[list[float]] = []
        self.stop = threading.Event()

    def run(self):
        prev: dict[int, float] | None = None
        foreign = 0.0
        while not self.stop.is_set():
            t = time.time()
            st = _stat()
            procs = cpu_times(reaped=True)
            nt = descendants(procs, self.n_roots())
            wt = descendants(procs, [self.w_root] if self.w_root else [])
            n = sum(procs[p][1] for p in nt)
            w = sum(procs[p][1] for p in wt)
            # user processes outside the neighbour, the workload and this process (kernel threads
            # left out): their own CPU time (not their reaped children's: a parent reaping would
            # count its child twice), a process new since the last look in full. The runs of
            # 2026-11-29 10:42-10:50 counted reaped children too (an overcount): their guard is
            # the `other` rule in disturbed()
            own = cpu_times()
            cur = {p: own[p][1] for p, (pp, _) in procs.items()
                   if p in own and p not in nt and p not in wt and p not in (os.getpid(), 2) and pp != 2}
            if prev is not None:
                foreign += sum(c - prev.get(p, 0.0) for p, c in cur.items() if c >= prev.get(p, 0.0))
            prev = cur
            self.rows.append([t, *[x / CLK for x in st], _psi(), n, w, foreign])
            self.stop.wait(self.period - (time.time() - t) % self.period)


# -- neighbours ---------------------------------------------------------------------------------
class PgNeighbour:
    name = "pg"

    def __init__(self, run: MixRun, pin: set[int] | None = None):
        self.run, self.pin = run, pin
        self.server, self.conn = start_postgres(run)
        if pin:
            # the server and its backends (forked later: they inherit it) and the client on these CPUs only
            self.name = "pg-pin" + "-".join(map(str, sorted(pin)))
            pin_server(self.server.pid, pin)
        subprocess.run([str(PG_BIN / "pgbench"), *self.conn, "-i", "-q", "-s", "4", "postgres"],
                       capture_output=True, check=True)
        self.client = None

    def roots(self):
        return [self.server.pid] + ([self.client.pid] if self.client and self.client.poll() is None else [])

    def measure(self, seconds: int) -> dict:
        logdir = Path(tempfile.mkdtemp(dir=self.run.dir))
        os.chmod(logdir, 0o777)
        t0 = time.time()
        self.client = subprocess.Popen([str(PG_BIN / "pgbench"), *self.conn, "-S", "-c", "2", "-j", "1", "-T",
                                        str(seconds), "-P", "5", "-l", "--log-prefix", str(logdir / "tx"),
                                        "postgres"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                       preexec_fn=(lambda: os.sched_setaffinity(0, self.pin)) if self.pin else None)
        _, err = self.client.communicate()
        if self.client.returncode != 0:
            raise SystemExit(f"pgbench failed ({self.client.returncode}): {err.strip()[-300:]}")
        ends, lat = [], []
        for f in logdir.glob("tx*"):
            a = np.loadtxt(f, dtype=np.float64, usecols=(2, 4, 5), ndmin=2)
            ends.append(a[:, 1] + a[:, 2] / 1e6)
            lat.append(a[:, 0] / 1e3)       # ms
            f.unlink()
        ends, lat = np.concatenate(ends), np.concatenate(lat)
        o = np.argsort(ends)
        return {"t0": t0, "progress_tps": [float(m.group(2)) for m in PROGRESS.finditer(err)],
                **per_second(ends[o], lat[o], t0, seconds)}


class RedisNeighbour:
    name = "redis"
    LINE = re.compile(r"rps=([0-9.]+) \(overall: ([0-9.inf]+)\) avg_msec=([0-9.]+)")

    def __init__(self, run: MixRun):
        self.run = run
        self.port = free_port()
        self.server = subprocess.Popen(["redis-server", "--bind", "127.0.0.1", "--port", str(self.port), "--save", "",
                                        "--appendonly", "no", "--dir", str(run.dir), "--logfile", str(run.dir / "n.log")],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        for _ in range(100):
            if subprocess.run(["redis-cli", "-p", str(self.port), "ping"], capture_output=True).stdout.strip() == b"PONG":
                break
            time.sleep(0.1)
        subprocess.run(["redis-cli", "-p", str(self.port), "DEBUG", "POPULATE", "10000", "key", "64"],
                       capture_output=True, check=True)
        self.client = None

    def roots(self):
        return [self.server.pid] + ([self.client.pid] if self.client and self.client.poll() is None else [])

    def measure(self, seconds: int) -> dict:
        t0 = time.time()
        self.client = subprocess.Popen(["redis-benchmark", "-p", str(self.port), "-t", "get", "-c", "2", "-r", "10000",
                                        "-d", "64", "-n", "1000000000"], stdout=subprocess.PIPE,
                                       stderr=subprocess.DEVNULL)
        rows, buf = [], b""
        timer = threading.Timer(seconds, self.client.terminate)
        timer.start()
        prev = t0
        while True:
            c = self.client.stdout.read1(4096)
            if not c:
                break
            buf += c
            *lines, buf = buf.split(b"\r")
            for ln in lines:
                m = self.LINE.search(ln.decode(errors="replace"))
                if m:
                    t = time.time()
                    rows.append((t, float(m.group(1)) * (t - prev), float(m.group(3))))
                    prev = t
        self.client.wait()
        timer.cancel()
        a = np.asarray(rows)
        # requests in each second: rps of each ~250 ms report times its span, by report time
        n = int(seconds)
        idx = np.floor(a[:, 0] - t0).astype(int)
        ok = (idx >= 0) & (idx < n)
        count = np.bincount(idx[ok], weights=a[ok, 1], minlength=n)[:n]
        lat = np.bincount(idx[ok], weights=a[ok, 2], minlength=n)[:n] / np.maximum(np.bincount(idx[ok], minlength=n)[:n], 1)
        return {"t0": t0, "progress_tps": [], "count": count.tolist(), "lat_mean_ms": lat.tolist()}

    def close(self):
        pass


def per_second(ends: np.ndarray, lat: np.ndarray, t0: float, seconds: int) -> dict:
    """Per second of the run: transactions completed, mean and percentile latencies (ms); per
    5-s and 10-s interval: latency percentiles."""
    n = int(seconds)
    idx = np.floor(ends - t0).astype(int)
    out = {"count": np.bincount(idx[(idx >= 0) & (idx < n)], minlength=n)[:n].tolist()}
    lat_mean = []
    for s in range(n):
        x = lat[idx == s]
        lat_mean.append(float(x.mean()) if len(x) else float("nan"))
    out["lat_mean_ms"] = lat_mean
    for w in (5, 10):
        pct = {q: [] for q in (50, 95, 99)}
        for s in range(0, n - n % w, w):
            x = lat[(idx >= s) & (idx < s + w)]
            for q in pct:
                pct[q].append(float(np.percentile(x, q)) if len(x) else float("nan"))
        out[f"lat_p_{w}s"] = {str(q): v for q, v in pct.items()}
    return out


# -- measure ------------------------------------------------------------------------------------
# --disturb: another session's work beside the bench, as the fidelity runs of 2026-11-28 had it (test
# suites): one CPU busy for 3 s out of every 7, started at a random phase.
DISTURB = "sleep {phase}; while :; do timeout 3 sh -c 'while :; do :; done'; sleep 4; done"


def measure_one(neigh, condition: str, mix: str, seconds: int, disturb: bool = False) -> dict:
    argv = None if condition == "alone" else [sys.executable, str(REPO / "bench/workloads/mixes.py"), mix,
                                              "--seconds", str(seconds)]
    start = time.time()
    dist = subprocess.Popen(["sh", "-c", DISTURB.format(phase=round(float(np.random.uniform(0, 7)), 1))],
                            start_new_session=True) if disturb else None
    work = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True) if argv else None
    sampler = Sampler(neigh.roots, work.pid if work else None)
    sampler.start()
    try:
        time.sleep(1.0)
        res = neigh.measure(seconds - 2)
    finally:
        err = finish(work, seconds)
        sampler.stop.set()
        sampler.join()
        if dist is not None:
            os.killpg(dist.pid, 15)
            dist.wait()
    if work is not None and work.returncode != 0:
        raise SystemExit(f"mix {mix} exited {work.returncode}: {err.strip()[-400:]}")
    return {"neighbour": neigh.name, "mix": mix, "condition": condition, "seconds": seconds, "disturbed": disturb,
            "start_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(start)),
            "samples_cols": ["t", "user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal", "psi_some",
                             "neighbour_cpu", "workload_cpu", "foreign_cpu"],
            "samples": sampler.rows, **res}


def cmd_measure(args) -> None:
    (args.out / "runs").mkdir(parents=True, exist_ok=True)
    run = MixRun(Path("/var/tmp"))
    pin = {int(c) for c in args.pin.split(",")} if args.pin else None
    neigh = PgNeighbour(run, pin) if args.neighbour == "pg" else RedisNeighbour(run)
    seen: dict[str, int] = {}
    try:
        for c in args.runs.split(","):
            k = seen[c] = seen.get(c, -1) + 1
            path = args.out / "runs" / f"{neigh.name}__{args.mix}__{c}__{k}.json"
            if path.exists():
                continue
            r = measure_one(neigh, c, args.mix, args.seconds, args.disturb)
            path.write_text(json.dumps(r))
            print(f"{r['start_utc']} {path.name}: {np.mean(r['count']):.0f}/s", file=sys.stderr, flush=True)
    finally:
        run.kill([neigh.server])
        run.close()


# -- score --------------------------------------------------------------------------------------
def load(out: Path) -> list[dict]:
    runs = [json.loads(p.read_text()) for p in sorted((out / "runs").glob("*.json"))]
    for r in runs:
        r["_name"] = f"{r['neighbour']}__{r['mix']}__{r['condition']}"
    return sorted(runs, key=lambda r: r["t0"])


def interval_series(r: dict, w: int) -> dict[str, np.ndarray]:
    """Per w-second interval of the neighbour's run: throughput, steal and other fractions,
    neighbour CPU seconds per transaction, latency."""
    cnt = np.asarray(r["count"], np.float64)
    n = len(cnt) // w
    tput = cnt[:n * w].reshape(n, w).sum(1) / w
    s = np.asarray(r["samples"], np.float64)
    cols = {c: i for i, c in enumerate(r["samples_cols"])}
    edges = r["t0"] + np.arange(n + 1) * w

    def at(col):
        return np.interp(edges, s[:, 0], s[:, cols[col]])

    d = {c: np.diff(at(c)) for c in r["samples_cols"][1:]}
    total = sum(d[c] for c in ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal"))
    busy = total - d["idle"] - d["iowait"] - d["steal"]
    out = {"tput": tput, "steal": d["steal"] / total, "psi": d["psi_some"] / w,
           "other": np.clip(busy - d["neighbour_cpu"] - d["workload_cpu"], 0, None) / total,
           "ncpu": d["neighbour_cpu"] / total, "wcpu": d["workload_cpu"] / total,
           "foreign": d["foreign_cpu"] / total if "foreign_cpu" in d else np.full(n, np.nan),
           "cpu_per_tx": d["neighbour_cpu"] / np.maximum(tput * w, 1) * 1e6,     # µs
           "lat_mean": np.asarray([np.nanmean(r["lat_mean_ms"][i * w:(i + 1) * w]) for i in range(n)])}
    if f"lat_p_{w}s" in r:
        for q, v in r[f"lat_p_{w}s"].items():
            out[f"p{q}"] = np.asarray(v[:n])
    return out


# Each design: (name, the per-interval value a run is scored on, "higher is better"?).
# Degradation is (base − with)/base × 100 for throughput-like values, (with − base)/base × 100
# for cost-like ones (latency, CPU per transaction), so that a slower neighbour is positive.
DESIGNS = {
    "tps (current)": (lambda s: s["tput"], True),
    "tps / (1 - steal)": (lambda s: s["tput"] / (1 - s["steal"]), True),
    "tps / (1 - steal - other)": (lambda s: s["tput"] / np.clip(1 - s["steal"] - s["other"], 0.05, None), True),
    "latency p50": (lambda s: s["p50"], False),
    "latency p95": (lambda s: s["p95"], False),
    "latency p99": (lambda s: s["p99"], False),
    "neighbour CPU per tx": (lambda s: s["cpu_per_tx"], False),
}


def degradation(base: np.ndarray, x: np.ndarray, higher: bool) -> tuple[float, np.ndarray]:
    n = min(len(base), len(x))
    b, x = base[:n], x[:n]
    sgn = 1 if higher else -1
    return float(sgn * (b.mean() - x.mean()) / b.mean() * 100), sgn * (b - x) / b * 100


def floor_pairs(degs: list[tuple[float, np.ndarray]], k: int = 1) -> tuple[float, float, int]:
    """Mean over every split of the runs into two disjoint groups of k: |difference of the groups'
    mean overall degradation| and mean |difference of their mean per-interval series|."""
    idx = range(len(degs))
    o, p, m = [], [], 0
    for a in itertools.combinations(idx, k):
        for b in itertools.combinations([i for i in idx if i not in a], k):
            if a > b:
                continue
            n = min(len(degs[i][1]) for i in a + b)
            ma = np.mean([degs[i][0] for i in a]), np.mean([degs[i][1][:n] for i in a], axis=0)
            mb = np.mean([degs[i][0] for i in b]), np.mean([degs[i][1][:n] for i in b], axis=0)
            o.append(abs(ma[0] - mb[0]))
            p.append(float(np.nanmean(np.abs(ma[1] - mb[1]))))
            m += 1
    return (float(np.mean(o)), float(np.mean(p)), m) if m else (float("nan"), float("nan"), 0)


def score(runs: list[dict], w: int) -> dict:
    out: dict = {"interval_s": w, "groups": {}}
    groups: dict[tuple[str, str], dict[str, list[dict]]] = {}
    for r in runs:
        groups.setdefault((r["neighbour"], r["mix"]), {}).setdefault(r["condition"], []).append(r)
    for (nb, mix), conds in groups.items():
        alone, mixr = conds.get("alone", []), conds.get("mix", [])
        g: dict = {"alone_runs": len(alone), "mix_runs": len(mixr)}
        if alone:
            S = [interval_series(r, w) for r in alone]
            n = min(len(s["tput"]) for s in S)
            T = np.asarray([s["tput"][:n] for s in S])
            g["alone"] = {
                "mean_tps": float(T.mean()),
                # within a run: interval-to-interval relative spread (CV), mean over runs
                "interval_cv_pct": float(np.mean(T.std(1, ddof=1) / T.mean(1)) * 100),
                "interval_cv_steal_corrected_pct": float(np.mean([
                    np.std(s["tput"][:n] / (1 - s["steal"][:n]), ddof=1) / np.mean(s["tput"][:n] / (1 - s["steal"][:n]))
                    for s in S]) * 100),
                # between runs: CV of the run means
                "run_cv_pct": float(T.mean(1).std(ddof=1) / T.mean() * 100) if len(T) > 1 else float("nan"),
                "steal_pct_mean": float(np.mean([s["steal"].mean() for s in S]) * 100),
                "steal_pct_max_interval": float(np.max([s["steal"].max() for s in S]) * 100),
                "other_pct_mean": float(np.mean([s["other"].mean() for s in S]) * 100),
                "psi_some_mean": float(np.mean([s["psi"].mean() for s in S])),
                "corr_tps_steal": float(np.corrcoef(np.concatenate([s["tput"] for s in S]),
                                                    np.concatenate([s["steal"] for s in S]))[0, 1]),
                "corr_tps_other": float(np.corrcoef(np.concatenate([s["tput"] for s in S]),
                                                    np.concatenate([s["other"] for s in S]))[0, 1]),
                "run_means_tps": T.mean(1).tolist(),
                "cpu_per_tx_us": float(np.mean([np.mean(s["cpu_per_tx"]) for s in S])),
            }
        if alone and len(mixr) >= 2:
            SA = [interval_series(r, w) for r in alone]
            SM = [interval_series(r, w) for r in mixr]
            g["mix"] = {"steal_pct_mean": float(np.mean([s["steal"].mean() for s in SM]) * 100),
                        "workload_cpu_pct": float(np.mean([s["wcpu"].mean() for s in SM]) * 100),
                        "neighbour_cpu_pct": float(np.mean([s["ncpu"].mean() for s in SM]) * 100),
                        "workload_cpu_run_means_pct": [float(s["wcpu"].mean() * 100) for s in SM]}
            designs = {}
            for name, (f, higher) in DESIGNS.items():
                try:
                    va = [f(s) for s in SA]
                    vm = [f(s) for s in SM]
                except KeyError:
                    continue
                n = min(len(v) for v in va)
                base = np.mean([v[:n] for v in va], axis=0)
                degs = [degradation(base, v, higher) for v in vm]
                row = {"degradation_pct": [d[0] for d in degs]}
                for k in range(1, len(degs) // 2 + 1):
                    o, p, m = floor_pairs(degs, k)
                    row[f"k{k}"] = {"overall_pp": o, "per_interval_pp": p, "splits": m}
                designs[name] = row
                if name == "tps (current)":
                    # the nearest alone run in time (before or after) as each mix run's baseline
                    degs_n = []
                    for r, v in zip(mixr, vm):
                        j = int(np.argmin([abs(a["t0"] - r["t0"]) for a in alone]))
                        degs_n.append(degradation(va[j], v, True))
                    rown = {"degradation_pct": [d[0] for d in degs_n]}
                    for k in range(1, len(degs_n) // 2 + 1):
                        o, p, m = floor_pairs(degs_n, k)
                        rown[f"k{k}"] = {"overall_pp": o, "per_interval_pp": p, "splits": m}
                    designs["tps, nearest alone run as baseline"] = rown
            g["designs"] = designs
        out["groups"][f"{nb}__{mix}"] = g
    return out


def plot(runs: list[dict], path: Path) -> None:
    """Per group: every run's 5-s throughput relative to the alone runs' mean, steal and the
    other processes' CPU beside the alone runs."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    groups: dict[str, list[dict]] = {}
    for r in runs:
        groups.setdefault(f"{r['neighbour']}__{r['mix']}", []).append(r)
    fig, axes = plt.subplots(len(groups), 2, figsize=(12, 2.8 * len(groups)), squeeze=False)
    for (g, rs), (a1, a2) in zip(groups.items(), axes):
        alone = [interval_series(r, 5) for r in rs if r["condition"] == "alone"]
        base = np.mean([s["tput"].mean() for s in alone])
        for r in rs:
            s = interval_series(r, 5)
            c = "black" if r["condition"] == "alone" else "C3"
            a1.plot(s["tput"] / base * 100, color=c, lw=1, alpha=0.8)
            if r["condition"] == "alone":
                a2.plot(s["steal"] * 100, color="C0", lw=1)
                a2.plot(s["other"] * 100, color="C1", lw=1)
        a1.set_title(f"{g}: 5-s throughput, % of the alone mean (black alone, red next to the mix)", fontsize=8)
        a2.set_title(f"{g} alone runs: steal (blue) and other processes' CPU (orange), % of 2 CPUs", fontsize=8)
        a1.set_xlabel("interval")
        a2.set_xlabel("interval")
    fig.tight_layout()
    fig.savefig(path, dpi=80)


def disturbed(runs: list[dict], w: int = 5, points: float = 10.0) -> list[str]:
    """Runs disturbed by the host: an interval in which the CPU outside the neighbour and the
    workload (other processes, the kernel, steal; /proc/stat) rose more than `points` % of the
    CPUs above the median of the same neighbour, mix and condition's runs there: the mix's own
    kernel work recurs in every run of it, another session's work does not."""
    out, groups = [], {}
    for r in runs:
        groups.setdefault(r["_name"], []).append(r)
    for rs in groups.values():
        o = [interval_series(r, w) for r in rs]
        n = min(len(x["other"]) for x in o)
        x = np.asarray([v["other"][:n] + v["steal"][:n] for v in o]) * 100
        med = np.median(x, axis=0)
        for r, row in zip(rs, x):
            if np.max(row - med) > points:
                out.append(f"{r['_name']}__{r['t0']:.0f}")
    return out


def cmd_score(args) -> None:
    runs = load(args.out)
    bad = disturbed(runs)
    kept = [r for r in runs if f"{r['_name']}__{r['t0']:.0f}" not in bad]
    res = {"bench": "colocation_floor", "runs": len(runs),
           "utc": [runs[0]["start_utc"], runs[-1]["start_utc"]] if runs else [],
           "run_list": [[r["start_utc"], r["_name"]] for r in runs],
           "by_interval": {str(w): score(runs, w) for w in (5, 10)},
           "disturbed": bad,
           "guarded_by_interval": {str(w): score(kept, w) for w in (5, 10)}}
    text = json.dumps(res, indent=1)
    (args.json or (args.out / "floor.json")).write_text(text)
    if args.png:
        plot(runs, args.png)
    print("disturbed runs:", bad)
    for w, sc in [*[(f"{w}", v) for w, v in res["by_interval"].items()],
                  *[(f"{w} (disturbed runs left out)", v) for w, v in res["guarded_by_interval"].items()]]:
        print(f"== {w}-s intervals")
        for gname, g in sc["groups"].items():
            a = g.get("alone")
            if a:
                print(f"{gname}: alone {g['alone_runs']} runs {a['mean_tps']:.0f}/s, interval CV {a['interval_cv_pct']:.1f} % "
                      f"(steal-corr {a['interval_cv_steal_corrected_pct']:.1f}), run CV {a['run_cv_pct']:.1f} %, "
                      f"steal {a['steal_pct_mean']:.2f} % (max {a['steal_pct_max_interval']:.1f}), other "
                      f"{a['other_pct_mean']:.1f} %, r(tps,steal) {a['corr_tps_steal']:+.2f}, "
                      f"r(tps,other) {a['corr_tps_other']:+.2f}")
            for dn, d in g.get("designs", {}).items():
                ks = "  ".join(f"k{k}: {d[f'k{k}']['overall_pp']:.1f}/{d[f'k{k}']['per_interval_pp']:.1f}"
                               for k in range(1, 9) if f"k{k}" in d)
                print(f"   {dn:38s} deg {', '.join(f'{x:.1f}' for x in d['degradation_pct'])}  | {ks}")


def main() -> None:
    # A stop (SIGTERM) unwinds like ^C: the neighbour's cluster and the running mix are stopped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("measure")
    m.add_argument("--out", type=Path, required=True)
    m.add_argument("--mix", required=True)
    m.add_argument("--runs", default="alone,mix,alone,mix")
    m.add_argument("--neighbour", choices=["pg", "redis"], default="pg")
    m.add_argument("--seconds", type=int, default=60)
    m.add_argument("--pin", help="CPUs (e.g. 0) to pin the PostgreSQL neighbour to, server and client")
    m.add_argument("--disturb", action="store_true",
                   help="run a bursty 1-CPU load beside every run (another session's tests, simulated)")
    s = sub.add_parser("score")
    s.add_argument("--out", type=Path, required=True)
    s.add_argument("--json", type=Path)
    s.add_argument("--png", type=Path)
    args = ap.parse_args()
    cmd_measure(args) if args.cmd == "measure" else cmd_score(args)


if __name__ == "__main__":
    main()
