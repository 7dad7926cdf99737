"""What a neighbour feels from how a load sleeps and wakes, not only how much CPU it takes (issue 42).

    python bench/wake_pattern.py --out DIR [--conditions alone,duty:300000:700000,mix:kv_grow,...]
                                 [--repeats 2] [--seconds 30] [--config AGENT_TOML]

The neighbour is bench/colocation_real.py's (PostgreSQL select-only pgbench, 2 clients, its own
cluster started once; transactions per second per 5-s interval, with that bench's host watch).
Next to it, one condition at a time, interleaved over --repeats rounds:

    alone                the neighbour by itself
    duty:ON_US:OFF_US    on every CPU a thread pinned there that spins ON_US microseconds, then
                         sleeps OFF_US, over and over (a C loop built here with cc): the same CPU
                         share cut into long or short pieces
    mix:NAME             a real mix of bench/workloads/mixes.py
    replay:PLAN          a plan replayed by the agent (`mimesys-agent replay --no-record`, --config)

For each run it records, per second, every CPU's busy fraction (/proc/stat: wall − idle − iowait −
steal) and how often each CPU entered an idle state (/sys/devices/system/cpu/cpu*/cpuidle, the
agent's cpuidle sampler's quantity). DIR/runs/<condition>__<n>.json per run (kept: a rerun
resumes); DIR/wake_pattern.json the summary: per condition the neighbour's mean tps and its
change against alone (%; positive = faster), the load's mean busy fraction and idle entries per
second per CPU. One JSON line on stdout. Hold the host's lock: `--lock /tmp/mimesys-cpu.lock`.
"""

from __future__ import annotations

import argparse
import glob
import json
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO / "bench" / "workloads"))

from colocation_real import finish, held, neighbour_tps  # noqa: E402
from hostnoise import CLK  # noqa: E402
from mixes import PG_BIN, MixRun, start_postgres  # noqa: E402

DUTY_C = r"""
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>
static double on, off, secs;
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
static void *loop(void *arg) {
    cpu_set_t set; CPU_ZERO(&set); CPU_SET((int)(long)arg, &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set);
    prctl(PR_SET_TIMERSLACK, 1ul);
    volatile unsigned long x = 0;
    double end = now() + secs;
    while (now() < end) {
        double s = now();
        while (now() - s < on) x++;
        struct timespec ts = {(time_t)off, (long)((off - (time_t)off) * 1e9)};
        if (off > 0) nanosleep(&ts, 0);
    }
    return 0;
}
int main(int argc, char **argv) {
    if (argc != 4) return 2;
    on = atof(argv[1]) * 1e-6; off = atof(argv[2]) * 1e-6; secs = atof(argv[3]);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    pthread_t t[256];
    for (long i = 0; i < n && i < 256; i++) pthread_create(&t[i], 0, loop, (void *)i);
    for (long i = 0; i < n && i < 256; i++) pthread_join(t[i], 0);
    return 0;
}
"""


def build_duty(dir_: Path) -> Path:
    src, exe = dir_ / "duty.c", dir_ / "duty"
    src.write_text(DUTY_C)
    subprocess.run(["cc", "-O2", "-pthread", "-o", str(exe), str(src)], check=True)
    return exe


def per_cpu() -> tuple[list[float], list[int]]:
    """Per CPU: busy seconds (wall − idle − iowait − steal, from /proc/stat) and idle entries."""
    busy, entries = [], []
    with open("/proc/stat") as fh:
        for line in fh:
            if not line.startswith("cpu"):
                break
            head, *f = line.split()
            if head == "cpu":
                continue
            v = [int(x) for x in f[:8]]
            busy.append((sum(v) - v[3] - v[4] - v[7]) / CLK)
            cpu = head[3:]
            entries.append(sum(int(Path(p).read_text()) for p in
                               glob.glob(f"/sys/devices/system/cpu/cpu{cpu}/cpuidle/state*/usage")))
    return busy, entries


class CpuWatch(threading.Thread):
    """Once a second: every CPU's busy fraction and idle entries per second."""

    def __init__(self):
        super().__init__(daemon=True)
        self.busy: list[list[float]] = []
        self.entries: list[list[float]] = []
        self.done = threading.Event()

    def run(self) -> None:
        t, (b, e) = time.monotonic(), per_cpu()
        while not self.done.wait(1.0):
            t2, (b2, e2) = time.monotonic(), per_cpu()
            self.busy.append([(y - x) / (t2 - t) for x, y in zip(b, b2)])
            self.entries.append([(y - x) / (t2 - t) for x, y in zip(e, e2)])
            t, b, e = t2, b2, e2


def load_argv(condition: str, seconds: int, duty: Path, config: Path | None) -> list[str] | None:
    kind, _, rest = condition.partition(":")
    if kind == "alone":
        return None
    if kind == "duty":
        on, off = rest.split(":")
        return [str(duty), on, off, str(seconds)]
    if kind == "mix":
        return [sys.executable, str(REPO / "bench/workloads/mixes.py"), rest, "--seconds", str(seconds)]
    if kind == "replay":
        if config is None:
            raise SystemExit("replay:PLAN needs --config (the agent's configuration)")
        return [sys.executable, "-m", "agentd.cli", "replay", rest, "--config", str(config), "--no-record",
                "--no-progress"]
    raise SystemExit(f"unknown condition {condition!r}: alone, duty:ON_US:OFF_US, mix:NAME or replay:PLAN")


def measure(conn, server_pid: int, condition: str, seconds: int, duty: Path, config: Path | None) -> dict:
    argv = load_argv(condition, seconds, duty, config)
    watch = CpuWatch()
    watch.start()
    work = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True) if argv else None
    try:
        time.sleep(1.0)
        tps, noise = neighbour_tps(conn, seconds - 2, 5, server_pid, work.pid if work else None)
    finally:
        watch.done.set()      # the CPUs while the neighbour ran (a replayed plan may run on past it)
        watch.join()
        err = finish(work, seconds)
    if work is not None and work.returncode != 0:
        raise SystemExit(f"{condition} exited {work.returncode}: {err.strip()[-400:]}")
    return {"condition": condition, "tps": tps, "busy": watch.busy, "idle_entries_per_s": watch.entries,
            "start_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - seconds)), **noise}


def summarize(runs: dict[str, list[dict]]) -> dict:
    alone = np.mean([np.mean(r["tps"]) for r in runs.get("alone", [])]) if runs.get("alone") else float("nan")
    out = {}
    for c, rs in runs.items():
        tps = [float(np.mean(r["tps"])) for r in rs]
        # the load's own pattern: the neighbour's seconds are in these figures too, alike in every condition
        busy = np.mean([np.mean(r["busy"], axis=0) for r in rs], axis=0)
        ent = np.mean([np.mean(r["idle_entries_per_s"], axis=0) for r in rs], axis=0)
        out[c] = {"tps": tps, "tps_vs_alone_pct": [(t - alone) / alone * 100 for t in tps],
                  "busy_per_cpu": busy.round(3).tolist(), "idle_entries_per_s_per_cpu": ent.round(0).tolist(),
                  "host_noise_max_pct": float(max(max(np.add(r["steal_pct"], r["foreign_pct"]), default=0.0)
                                                  for r in rs))}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--conditions", default="alone,duty:300000:700000,duty:3000:7000,duty:300:700,duty:40:40,"
                                            "mix:kv_grow")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--seconds", type=int, default=30)
    ap.add_argument("--config", type=Path, help="the agent's configuration, for replay:PLAN")
    ap.add_argument("--lock", type=Path, help="a flock to hold around each run (the host's shared lock)")
    args = ap.parse_args()
    conditions = args.conditions.split(",")
    (args.out / "runs").mkdir(parents=True, exist_ok=True)
    run = MixRun(Path("/var/tmp"))
    runs: dict[str, list[dict]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        duty = build_duty(Path(tmp))
        server, conn = start_postgres(run)
        try:
            subprocess.run([str(PG_BIN / "pgbench"), *conn, "-i", "-q", "-s", "4", "postgres"], capture_output=True,
                           check=True)
            for n in range(args.repeats):
                for c in conditions:
                    path = args.out / "runs" / f"{c.replace('/', '_').replace(':', '-')}__{n}.json"
                    if not path.exists():
                        with held(args.lock):
                            r = measure(conn, server.pid, c, args.seconds, duty, args.config)
                        path.write_text(json.dumps(r))
                        print(f"{c} #{n}: {np.mean(r['tps']):.0f} tps, idle entries/s per CPU "
                              f"{np.mean(r['idle_entries_per_s'], axis=0).round(0).tolist()}", file=sys.stderr,
                              flush=True)
                    runs.setdefault(c, []).append(json.loads(path.read_text()))
        finally:
            run.kill([server])
            run.close()
    summary = {"bench": "wake_pattern", "seconds": args.seconds, "repeats": args.repeats, "simulated": False,
               "neighbour": "PostgreSQL select-only pgbench, 2 clients", "conditions": summarize(runs)}
    (args.out / "wake_pattern.json").write_text(json.dumps(summary, indent=1))
    print(json.dumps({"bench": "wake_pattern", "tps_vs_alone_pct": {
        c: round(float(np.mean(v["tps_vs_alone_pct"])), 1) for c, v in summary["conditions"].items()}}))


if __name__ == "__main__":
    main()
