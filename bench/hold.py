"""How closely the runner's hold puts each core on its plan's busy fraction, on this host.

Runs one plan (default: synchronous random 4 KiB reads, then compute, on each thread) with and
without `core_busy_target`, reads each core's busy fraction from /proc/stat (the cpu sampler's
own definition: wall time less idle, iowait and steal) at every runner window's boundary, and prints one JSON line: per core and mode
the mean signed and absolute per-window error against the target. Windows are the runner's
own, so the figure is the hold's, not the sampler's alignment.

    python bench/hold.py [--mix serve|kv] [--runner PATH] [--windows 30] [--label NAME]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from agentd.samplers.cpu import CpuSampler, parse_proc_stat   # noqa: E402
from agentd.schedule import compile_plan                       # noqa: E402
from mimesys.catalog import load_catalog                       # noqa: E402
from mimesys.plan import Plan                                  # noqa: E402

# per mix, per thread: stressor -> fraction of the window
MIXES = {
    # synchronous 4 KiB reads (their CPU is what the device makes of them) before compute:
    # the hold's case
    "serve": [{"disk_rand_read_4k": 0.4, "cpu_simd_dist_256": 0.3},
              {"disk_rand_read_4k_qd64": 0.3, "cpu_int_crc32": 0.3}],
    # compute beside loopback RPC, futex round trips and UDP sends (kv_compress's inverse plan,
    # windows 2-6): held like every window that mixes compute with something else
    "kv": [{"cpu_simd_dist_256": 0.53, "net_tcp_rpc_128": 0.26, "sched_futex_pingpong": 0.02, "net_udp_sink": 0.01},
           {"cpu_simd_dist_256": 0.63, "net_tcp_rpc_128": 0.27, "sched_futex_pingpong": 0.03, "net_udp_sink": 0.01}],
}
# the target each thread's core is held at: what the compute after the IO can still reach
TARGETS = {"serve": [0.6, 0.65]}


def run(runner: Path, plan: Plan, catalog, cpus: list[int], scratch: Path) -> np.ndarray:
    """Per window and core: the busy fraction from /proc/stat between the runner's window
    boundaries (t0 + i·W from its `ready` line, read a millisecond after each)."""
    sched = compile_plan(plan, catalog)
    p = subprocess.Popen([str(runner), "--schedule", "-", "--cpus", ",".join(map(str, cpus)),
                          "--scratch-dir", str(scratch), "--start-delay-ms", "300"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    p.stdin.buffer.write(sched.data)
    p.stdin.close()
    t0 = None
    for line in p.stdout:
        if line.startswith("ready"):
            t0 = int(line.split()[1])
            break
    if t0 is None:
        raise SystemExit(f"runner failed before starting: {p.stderr.read()}")
    drain = threading.Thread(target=lambda: [None for _ in p.stdout], daemon=True)   # keep its pipe flowing
    drain.start()
    window_ns = int(round(float(plan.window_s) * 1e9))
    marks = []
    for i in range(plan.T + 1):
        time.sleep(max(0.0, (t0 + i * window_ns + 1_000_000 - time.monotonic_ns()) / 1e9))
        stat = parse_proc_stat(Path("/proc/stat").read_text())
        marks.append((time.monotonic_ns(), stat))
    if p.wait(timeout=600) != 0:
        raise SystemExit(f"runner failed: {p.stderr.read()}")
    out = np.zeros((plan.T, len(cpus)))
    for w in range(plan.T):
        (ta, a), (tb, b) = marks[w], marks[w + 1]
        d = CpuSampler.derive(a, b, (tb - ta) / 1e9)
        out[w] = [d[f"cpu.util.core{c}"] for c in cpus]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runner", type=Path, default=None, help="mimesys-runner (default: the one the agent finds)")
    ap.add_argument("--windows", type=int, default=30)
    ap.add_argument("--window-s", type=float, default=1.0)
    ap.add_argument("--mix", choices=sorted(MIXES), default="serve")
    ap.add_argument("--label", default="")
    ap.add_argument("--scratch", type=Path, default=Path("/var/tmp"))
    args = ap.parse_args()
    if args.runner is None:
        from agentd.runner import find_runner
        args.runner = find_runner()
    catalog = load_catalog(REPO / "stressors" / "catalog.toml")
    mix = MIXES[args.mix]
    cpus = sorted(os.sched_getaffinity(0))[:len(mix)]
    K, T = len(cpus), args.windows
    a = np.zeros((T, len(catalog), K), np.float32)
    for k in range(K):
        for name, f in mix[k].items():
            a[:, catalog.index(name), k] = f
    target = a.sum(axis=1)                        # as the inverse planner writes it: the column sum
    if args.mix in TARGETS:
        target[:] = TARGETS[args.mix]
    result = {"bench": "hold", "label": args.label, "mix": args.mix, "windows": T, "window_s": args.window_s, "cpus": cpus,
              "target": [round(float(x), 3) for x in target[0]]}
    for mode in ("held", "plain"):
        plan = Plan.from_catalog(a, catalog, window_s=args.window_s, seed=1,
                                 core_busy_target=target.astype(np.float32) if mode == "held" else None)
        busy = run(args.runner, plan, catalog, cpus, args.scratch)
        err = busy[1:] - target[1:len(busy)]          # the first window starts the stressors' connections
        result[mode] = {"bias": [round(float(x), 4) for x in err.mean(axis=0)],
                        "mean_abs": [round(float(x), 4) for x in np.abs(err).mean(axis=0)]}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
