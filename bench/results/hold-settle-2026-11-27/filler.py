"""What a busy neighbour on the same core does to an IO stressor: one stressor on CPU 1 for half
of each of five 1 s windows, alone and beside a shell loop pinned to CPU 1 at each given
nice (`idle`: SCHED_IDLE). Prints the ops and bytes the runner reported.

    python filler.py disk_rand_read_4k 0 19 idle
"""
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
from agentd.schedule import compile_plan  # noqa: E402
from mimesys.catalog import load_catalog  # noqa: E402
from runner_helpers import make_plan  # noqa: E402

cat = load_catalog()
runner = os.environ.get("RUNNER", str(ROOT / "stressors/build/mimesys-runner"))
name = sys.argv[1]


def run() -> tuple[int, int]:
    plan = make_plan(cat, {name: 0.5}, T=6, K=1, window_s=1.0)
    p = subprocess.Popen([runner, "--schedule", "-", "--cpus", "1", "--scratch-dir", "/var/tmp",
                          "--start-delay-ms", "300"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    p.stdin.buffer.write(compile_plan(plan, cat).data)
    p.stdin.close()
    ops = nbytes = 0
    for line in p.stdout:
        f = line.split()
        if f[0] == "seg" and int(f[1]) >= 1:       # window 0 warms up
            ops, nbytes = ops + int(f[6]), nbytes + int(f[7])
    assert p.wait(timeout=120) == 0, p.stderr.read()
    return ops, nbytes


print(name, "alone", run(), flush=True)
for nice in sys.argv[2:]:
    how = ["chrt", "-i", "0"] if nice == "idle" else ["nice", "-n", nice]
    spin = subprocess.Popen(["taskset", "-c", "1", *how, "sh", "-c", "while :; do :; done"])
    time.sleep(0.2)
    try:
        print(name, "beside a spinner at nice", nice, run(), flush=True)
    finally:
        spin.kill()
        spin.wait()
