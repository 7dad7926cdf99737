"""How exactly one core lands on a per-window busy target, window by window, as the agent's cpu
sampler counts it (/proc/stat read at each window's start): a held window (IO, then the compute
tail the runner sizes) against a pure duty cycle (compute alone, as `single` runs).

    python exact.py held duty extra      # RUNNER=<mimesys-runner> T=60 CONT=1 IO=<stressor> IOF=0.15 LO HI SEED

held:  IO for IOF of each window, compute (target − IOF), the target held by the runner
duty:  compute for the target's fraction, nothing else, no hold
extra: IO for IOF and compute for the whole target, no hold
Targets: uniform in [LO, HI]; CONT=1 continuous, else whole hundredths (a 100-tick total
represents those exactly, which flatters the duty cycle). Prints mean |executed − target| over
windows 3.. (the hold has learned by then), the mean signed error, and each window in hundredths.
"""
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[3]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
from agentd.samplers.cpu import CpuSampler, parse_proc_stat  # noqa: E402
from agentd.schedule import compile_plan  # noqa: E402
from mimesys.catalog import load_catalog  # noqa: E402
from mimesys.plan import Plan  # noqa: E402

env = os.environ.get
cat = load_catalog()
runner = env("RUNNER", str(ROOT / "stressors/build/mimesys-runner"))
T, CPU = int(env("T", 60)), 1
IO, IOF = env("IO", "disk_rand_read_4k"), float(env("IOF", 0.15))
tg = np.random.default_rng(int(env("SEED", 0))).uniform(float(env("LO", 0.3)), float(env("HI", 0.95)), T)
if not env("CONT"):
    tg = np.round(tg, 2)


def run(plan: Plan) -> np.ndarray:
    p = subprocess.Popen([runner, "--schedule", "-", "--cpus", str(CPU), "--scratch-dir", "/var/tmp",
                          "--start-delay-ms", "300"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    p.stdin.buffer.write(compile_plan(plan, cat).data)
    p.stdin.close()
    reads = []
    for line in p.stdout:
        f = line.split()
        if f[0] == "start" or (f[0] == "done" and int(f[1]) == plan.T - 1):
            reads.append(parse_proc_stat(Path("/proc/stat").read_text()))
    assert p.wait(timeout=600) == 0, p.stderr.read()
    return np.array([CpuSampler.derive(reads[i], reads[i + 1], 0.0)[f"cpu.util.core{CPU}"]
                     for i in range(len(reads) - 1)])


def plan(kind: str) -> Plan:
    a = np.zeros((T, len(cat), 1), np.float32)
    if kind != "duty":
        a[:, cat.index(IO), 0] = IOF
    a[:, cat.index("cpu_int_crc32"), 0] = np.maximum(tg - IOF, 0) if kind == "held" else tg
    busy = tg[:, None].astype(np.float32) if kind == "held" else None
    return Plan.from_catalog(a, cat, window_s=1.0, core_busy_target=busy)


for kind in sys.argv[1:] or ["held", "duty"]:
    e = run(plan(kind))[3:] - tg[3:]
    print(kind, "mean|e|", round(float(np.mean(np.abs(e))), 4), "bias", round(float(np.mean(e)), 4),
          " ".join(f"{int(round(x * 100)):+d}" for x in e), flush=True)
