"""Import a one-day, 1 Hz, 64-series trace from CSV and from a Prometheus query_range file
(issue 22): peak RSS and seconds of `mimesys import` for each, as ONE JSON line.

    PYTHONPATH=. .venv/bin/python bench/import_scale.py [--seconds 86400] [--series 64]

The fixtures are generated into a temporary directory (not timed): a `timestamp` CSV with
columns cpu.util.core0..63, and a query_range answer holding node_cpu_seconds_total for
8 CPUs x 8 modes (64 counter series) at 1 s steps. Each import runs in a fresh child process
(`mimesys import FILE --format F -o OUT.h5 --window 1 --json`), so the peak RSS (the child's
own VmHWM from /proc/self/status, read as it exits) is the import's alone, interpreter and
HDF5 write included. Goal: < 1 GiB and < 60 s each.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
T0 = 1_700_000_000
MODES = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


def write_csv(path: Path, seconds: int, series: int, rng) -> None:
    with path.open("w") as fh:
        fh.write("timestamp," + ",".join(f"cpu.util.core{i}" for i in range(series)) + "\n")
        block = 3600
        for a in range(0, seconds, block):
            n = min(block, seconds - a)
            v = rng.uniform(0, 1, (n, series))
            t = T0 + np.arange(a, a + n, dtype=np.float64)
            rows = np.column_stack([t, v])
            np.savetxt(fh, rows, fmt=["%.0f"] + ["%.4f"] * series, delimiter=",")


def write_prometheus(path: Path, seconds: int, series: int, rng) -> None:
    cpus = max(1, series // len(MODES))
    with path.open("w") as fh:
        fh.write('{"status": "success", "data": {"resultType": "matrix", "result": [')
        first = True
        t = T0 + np.arange(seconds + 1)
        for c in range(cpus):
            for mode in MODES[:series // cpus]:
                counter = np.cumsum(rng.uniform(0, 1.0 / len(MODES), seconds + 1)) + 1000.0
                metric = {"__name__": "node_cpu_seconds_total", "cpu": str(c), "mode": mode,
                          "instance": "node5:9100", "job": "node"}
                fh.write(("" if first else ",") + '{"metric": ' + json.dumps(metric) + ', "values": [')
                fh.write(",".join(f'[{ts},"{v:.3f}"]' for ts, v in zip(t.tolist(), counter.tolist())))
                fh.write("]}")
                first = False
        fh.write("]}}")


# The child: the CLI itself, then its own peak RSS (VmHWM) written to a file as it exits.
CHILD = """
import sys
from controller.cli import main
try:
    main(sys.argv[2:], prog_name="mimesys")
finally:
    hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM:")][0].split()[1]
    open(sys.argv[1], "w").write(hwm)
"""


def import_one(fmt: str, src: Path, out: Path) -> dict:
    hwm_file = out.with_suffix(".hwm")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    t = time.monotonic()
    r = subprocess.run([sys.executable, "-c", CHILD, str(hwm_file), "import", str(src), "--format", fmt,
                        "-o", str(out), "--window", "1", "--json"], capture_output=True, text=True, env=env,
                       timeout=900)
    seconds = time.monotonic() - t
    if r.returncode != 0:
        raise SystemExit(f"import {fmt} failed ({r.returncode}): {r.stderr[-2000:]}")
    doc = json.loads(r.stdout)
    return {"seconds": round(seconds, 2), "peak_rss_MiB": round(int(hwm_file.read_text()) / 1024, 1),
            "windows": doc.get("windows"), "metrics": doc.get("metrics"),
            "input_MiB": round(src.stat().st_size / 2**20, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=int, default=86_400)
    ap.add_argument("--series", type=int, default=64)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory(prefix="import-scale-") as d:
        d = Path(d)
        results = {}
        for fmt, writer, name in (("csv", write_csv, "day.csv"), ("prometheus", write_prometheus, "day.json")):
            src = d / name
            writer(src, args.seconds, args.series, rng)
            results[fmt] = import_one(fmt, src, d / f"{fmt}.h5")
            src.unlink()
    goal = {"rss_MiB": 1024, "seconds": 60}
    ok = all(r["peak_rss_MiB"] < goal["rss_MiB"] and r["seconds"] < goal["seconds"] for r in results.values())
    print(json.dumps({"bench": "import_scale", "seconds_of_trace": args.seconds, "series": args.series,
                      "step_s": 1, **results, "goal": goal, "goal_met": ok, "cpus": os.cpu_count(),
                      "python": sys.version.split()[0]}))


if __name__ == "__main__":
    main()
