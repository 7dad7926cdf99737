"""GPU telemetry on a real GPU: what the agent's NVML sampler records against a known load.

Run where an NVIDIA GPU and PyTorch are (the device machine lent to some sessions); on a host
without one it prints the sampler's reason and exits 0 with "gpu": null.

A child process drives the GPU on a schedule it logs itself (wall-clock edges of every phase):
after a lead-in of idle, phases of bf16 matrix products at a duty cycle (1.0 = back to back,
0.5 = products for 10 ms of every 20 ms) each followed by idle, and 4 GiB of device memory
held only while a phase runs. Meanwhile, in this process, the product's own recording loop
(agentd.commands.record._record, the real host backend, every sampler) records at --interval,
and `nvidia-smi --query-gpu ... -lms 100` records independently beside it.

Reported (one JSON line, and --out/gpu_real.json, the trace, nvidia-smi's CSV and a PNG):
- per phase level: the agent's mean gpu0.util over samples whose window lies inside the phase
  (0.3 s from its edges), and over the settled idle samples;
- gpu0.mem_used_B during phases vs idle, against the 4 GiB the child holds;
- the agent vs nvidia-smi: mean |difference| of util at the nearest nvidia-smi row;
- burst structure (mimesys.bursts, peak 1.0): the recorded gpu0.util vs the schedule's own
  series (the child's logged level at each window's midpoint), their relative errors.

    python bench/gpu_real.py --out OUT [--interval 0.1]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

LEAD_S = 3.0
# (seconds of work, duty level, seconds idle after): different lengths, so the burst and idle
# medians are not one number
SCHEDULE = ((2.0, 1.0, 3.0), (4.0, 0.5, 5.0), (6.0, 1.0, 2.0), (3.0, 0.5, 4.0), (5.0, 1.0, 3.0))
HOLD_BYTES = 4 << 30


def drive_gpu(log: Path) -> None:
    """The child: the schedule on GPU 0; one JSON line per phase {start, end, level}."""
    import torch
    dev = torch.device("cuda:0")
    a = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
    torch.cuda.synchronize()
    with open(log, "w") as fh:
        fh.write(json.dumps({"ready": time.time()}) + "\n")
        fh.flush()
        time.sleep(LEAD_S)
        for work, level, idle in SCHEDULE:
            held = torch.empty(HOLD_BYTES // 2, dtype=torch.bfloat16, device=dev).fill_(1)
            t0 = time.time()
            while time.time() - t0 < work:
                if level >= 1.0:
                    a @ b
                    torch.cuda.synchronize()
                else:
                    c0 = time.time()
                    while time.time() - c0 < 0.020 * level:
                        a @ b
                        torch.cuda.synchronize()
                    time.sleep(max(0.0, 0.020 - (time.time() - c0)))
            torch.cuda.synchronize()
            t1 = time.time()
            del held
            torch.cuda.empty_cache()
            fh.write(json.dumps({"start": t0, "end": t1, "level": level}) + "\n")
            fh.flush()
            time.sleep(idle)


def read_smi(path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """nvidia-smi's CSV -> (unix seconds, util fraction, memory used bytes)."""
    ts, util, mem = [], [], []
    for line in path.read_text().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 4:
            continue
        try:
            t = datetime.strptime(parts[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
            ts.append(t), util.append(float(parts[1]) / 100), mem.append(float(parts[3]) * 2**20)
        except ValueError:
            continue
    return np.array(ts), np.array(util), np.array(mem)


async def record(out: Path, seconds: float, interval: float) -> Path:
    from agentd.commands.record import _record
    from agentd.config import config_from_dict
    cfg = config_from_dict({"agent": {"state_dir": str(out / "rec-state"), "scratch_dir": str(out / "rec-scratch")}})
    path = out / "gpu_record.h5"
    await _record(cfg, path, int(round(seconds / interval)), interval, False, 60.0)
    return path


def analyse(trace, phases: list[dict], smi, interval: float) -> dict:
    from mimesys import bursts
    names = [m.name for m in trace.metrics]
    if "gpu0.util" not in names:
        return {"gpu": None, "reason": next((m.reason for m in trace.metrics if m.name.startswith("gpu")), "no gpu metric")}
    util = trace.values[:, names.index("gpu0.util")].astype(float)
    mem = trace.values[:, names.index("gpu0.mem_used_B")].astype(float)
    mid = np.asarray(trace.window_start_ns, np.float64) / 1e9 + interval / 2
    level = np.zeros_like(mid)       # the schedule's own level at each midpoint
    settled = np.full(mid.shape, np.nan)
    for p in phases:
        inside = (mid >= p["start"]) & (mid < p["end"])
        level[inside] = p["level"]
        settled[(mid >= p["start"] + 0.3) & (mid < p["end"] - 0.3)] = p["level"]
    first, last = phases[0]["start"], phases[-1]["end"]
    near_edge = np.zeros(mid.shape, bool)
    for p in phases:
        near_edge |= (np.abs(mid - p["start"]) < 0.3) | (np.abs(mid - p["end"]) < 0.3)
    idle = np.isnan(settled) & ~near_edge & (mid > first - LEAD_S + 0.3) & (mid < last + 2.7)
    per_level = {}
    for lv in sorted({p["level"] for p in phases}):
        sel = settled == lv
        per_level[f"{lv:g}"] = {"samples": int(sel.sum()), "agent_util_mean": round(float(np.nanmean(util[sel])), 4),
                                "agent_util_p10": round(float(np.nanpercentile(util[sel], 10)), 4)}
    doc = {"per_level": per_level,
           "idle": {"samples": int(idle.sum()), "agent_util_mean": round(float(np.nanmean(util[idle])), 4),
                    "agent_util_max": round(float(np.nanmax(util[idle])), 4)},
           "mem_used_GiB": {"in_phases": round(float(np.nanmean(mem[~np.isnan(settled)])) / 2**30, 3),
                            "idle": round(float(np.nanmean(mem[idle])) / 2**30, 3),
                            "held_by_the_load": HOLD_BYTES / 2**30}}
    t_smi, u_smi, m_smi = smi
    if t_smi.size:
        j = np.clip(np.searchsorted(t_smi, mid), 1, t_smi.size - 1)
        j = np.where(np.abs(t_smi[j - 1] - mid) < np.abs(t_smi[j] - mid), j - 1, j)
        close = np.abs(t_smi[j] - mid) <= interval
        d = np.abs(util[close] - u_smi[j[close]])
        doc["vs_nvidia_smi"] = {"paired_samples": int(close.sum()), "util_mean_abs_diff": round(float(np.nanmean(d)), 4),
                                "util_corr": round(float(np.corrcoef(util[close], u_smi[j[close]])[0, 1]), 4),
                                "mem_used_mean_abs_diff_MiB": round(float(np.nanmean(
                                    np.abs(mem[close] - m_smi[j[close]]))) / 2**20, 1)}
    span = (mid > first - LEAD_S) & (mid < last + 3)
    rec = bursts.burst_stats(util[span], interval, 1.0)
    ref = bursts.burst_stats(level[span], interval, 1.0, peak_from="the load's logged schedule")
    doc["bursts"] = {"recorded": rec.to_dict(), "schedule": ref.to_dict(),
                     "relative_errors": {k: round(v, 4) for k, v in bursts.relative_errors(ref, rec, interval).items()}}
    doc["_series"] = (mid, util, mem, level)
    return doc


def plot(path: Path, series, phases, smi) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    mid, util, mem, level = series
    t0 = mid[0]
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(10, 5), sharex=True)
    for p in phases:
        for ax in (ax1, ax2):
            ax.axvspan(p["start"] - t0, p["end"] - t0, color="0.9")
    ax1.step(mid - t0, level, where="mid", color="0.5", lw=1, label="the load's schedule (duty level)")
    ax1.plot(mid - t0, util, lw=1.2, label="agent gpu0.util (NVML sampler)")
    if smi[0].size:
        ax1.plot(smi[0] - t0, smi[1], ".", ms=2, label="nvidia-smi utilization.gpu")
    ax1.set_ylabel("fraction")
    ax1.legend(fontsize=7, loc="upper right")
    ax2.plot(mid - t0, mem / 2**30, lw=1.2, label="agent gpu0.mem_used_B")
    if smi[0].size:
        ax2.plot(smi[0] - t0, smi[2] / 2**30, ".", ms=2, label="nvidia-smi memory.used")
    ax2.set_ylabel("GiB")
    ax2.set_xlabel("seconds")
    ax2.legend(fontsize=7, loc="upper right")
    fig.suptitle("GPU telemetry against a known load (real GPU)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--interval", type=float, default=0.1)
    ap.add_argument("--drive", type=Path, help=argparse.SUPPRESS)   # the child
    args = ap.parse_args()
    if args.drive:
        drive_gpu(args.drive)
        return
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    from mimesys.hostpaths import HostPaths
    from agentd.samplers.gpu import GpuSampler
    sampler = GpuSampler(HostPaths.from_env())
    specs = sampler.probe()
    sampler.close()
    if not any(s.available for s in specs):
        print(json.dumps({"bench": "gpu_real", "gpu": None, "reason": specs[0].reason, "simulated": False}))
        return
    smi_csv = out / "nvidia_smi.csv"
    smi = None
    if shutil.which("nvidia-smi"):
        smi = subprocess.Popen(["nvidia-smi", "--query-gpu=timestamp,utilization.gpu,utilization.memory,memory.used",
                                "--format=csv,noheader,nounits", "-lms", "100"], stdout=open(smi_csv, "w"))
    log = out / "load_phases.jsonl"
    child = subprocess.Popen([sys.executable, __file__, "--out", str(out), "--drive", str(log)])
    deadline = time.time() + 120
    while not (log.exists() and log.read_text().strip()) and time.time() < deadline and child.poll() is None:
        time.sleep(0.2)
    seconds = LEAD_S + sum(w + i for w, _, i in SCHEDULE) + 2.0
    trace_path = asyncio.run(record(out, seconds, args.interval))
    child.wait(60)
    if smi:
        smi.terminate()
        smi.wait(10)
    from mimesys.trace import Trace
    trace = Trace.read(trace_path)
    phases = [json.loads(x) for x in log.read_text().splitlines() if '"level"' in x]
    smi_data = read_smi(smi_csv) if smi_csv.exists() else (np.zeros(0),) * 3
    doc = analyse(trace, phases, smi_data, args.interval)
    series = doc.pop("_series", None)
    if series is not None:
        plot(out / "gpu_real.png", series, phases, smi_data)
    gpu_name = ""
    if smi:
        gpu_name = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                                  capture_output=True, text=True).stdout.strip()
    doc = {"bench": "gpu_real", "gpu_name": gpu_name, "host": os.uname().nodename, "cpus": os.cpu_count(),
           "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "interval_s": args.interval,
           "samples": trace.T, "schedule": [list(s) for s in SCHEDULE], "lead_s": LEAD_S, **doc, "simulated": False}
    line = json.dumps(doc)
    (out / "gpu_real.json").write_text(line + "\n")
    print(line)


if __name__ == "__main__":
    main()
