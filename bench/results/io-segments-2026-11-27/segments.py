"""What an IO stressor moves in a segment of a given length, against what a forward model
linear in the share predicts: the device's bytes (/proc/diskstats, the disk sampler's source)
per window, for segments of SHARES of a 1 s window, on one thread and on two at once.

    python segments.py [STRESSOR ...]      # RUNNER=<mimesys-runner> W=4 (windows per level)

Prints, per stressor, threads and share: MB per window, MB/s while the segment ran, and that
rate over the rate of the longest segment (1.0 where bytes follow the share).
"""
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[3]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
from agentd.schedule import compile_plan  # noqa: E402
from mimesys.catalog import load_catalog  # noqa: E402
from mimesys.plan import Plan  # noqa: E402
from runner_helpers import device_of  # noqa: E402

cat = load_catalog()
runner = os.environ.get("RUNNER", str(ROOT / "stressors/build/mimesys-runner"))
W = int(os.environ.get("W", 4))
SCRATCH = Path(os.environ.get("SCRATCH", "/var/tmp"))
SHARES = [0.005, 0.01, 0.02, 0.05, 0.1, 0.3]
DEV = device_of(SCRATCH)


def disk_bytes() -> int:
    for line in Path("/proc/diskstats").read_text().splitlines():
        f = line.split()
        if f[2] == DEV:
            return (int(f[5]) + int(f[9])) * 512      # sectors read + written
    raise SystemExit(f"no {DEV} in /proc/diskstats")


def run(stressor: str, share: float, threads: int) -> np.ndarray:
    a = np.zeros((W + 1, len(cat), threads), np.float32)
    a[1:, cat.index(stressor), :] = share              # window 0: setup settles, not read
    plan = Plan.from_catalog(a, cat, window_s=1.0)
    p = subprocess.Popen([runner, "--schedule", "-", "--cpus", ",".join(map(str, range(threads))),
                          "--scratch-dir", str(SCRATCH), "--start-delay-ms", "300"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    p.stdin.buffer.write(compile_plan(plan, cat).data)
    p.stdin.close()
    reads = []
    for line in p.stdout:
        f = line.split()
        if (f[0] == "start" and int(f[1]) >= 1) or (f[0] == "done" and int(f[1]) == W):
            reads.append(disk_bytes())
    assert p.wait(timeout=600) == 0, p.stderr.read()
    return np.diff(reads)


for stressor in sys.argv[1:] or ["disk_seq_write_direct_1m_qd16", "disk_seq_write_direct_1m_qd4",
                                 "disk_rand_read_4k_qd64", "disk_seq_write_fdatasync"]:
    for threads in (1, 2):
        rows = []
        for share in SHARES:
            b = run(stressor, share, threads)
            rows.append((share, b.mean() / 1e6, b.mean() / 1e6 / (share * threads)))
        ref = rows[-1][2]
        for share, mb, rate in rows:
            print(f"{stressor:32s} threads {threads} share {share:5.3f}  {mb:8.1f} MB/window  "
                  f"{rate:7.0f} MB/s in the segment  {rate / ref:5.2f} of the 0.3 share's", flush=True)
