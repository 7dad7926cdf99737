"""Paced variants on this host: a plan with one level per block (0.25, 0.5, 0.75 of the
base's calibrated one-thread rate through `<base>_pace25|50|75`, then 1.0 = the base flat
out), replayed through the agent's host backend and measured by the agent's own samplers
every 100 ms (plan windows of 0.1 s): achieved / level per 100 ms sample.

Steps: (1) calibrate the four bases on one thread with `agentd.calibrator.measure` and
install the result as the agent's calibration (state_dir/calibration.json), exactly what
`mimesys-agent calibrate --only BASE` does; (2) run the plan through HostBackend.execute
(the agent's runner + samplers); (3) run the same plan through the runner alone, whose own
byte counts give the rate where the agent exposes no metric (mem.bw_Bps needs a PMU).
Device counters are host-wide: other jobs' IO adds to them (the load average is printed).

Prints ONE JSON line; writes it to --out with a PNG next to it.

    python bench/reach_pace.py [--out bench/results/reach/pace.json] [--windows-per-level 10]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mimesys.backend import RunOptions  # noqa: E402
from agentd.calibrator import measure, pace_rates  # noqa: E402
from mimesys.calibration import write  # noqa: E402
from mimesys.catalog import load_catalog  # noqa: E402
from mimesys.plan import Plan  # noqa: E402
from agentd.runner import RunnerConfig, WindowDone, start_runner  # noqa: E402

# base → the agent metric that shows its rate (None: not exposed without a PMU)
BASES = {"disk_seq_write_direct_1m_qd4": "disk.write_Bps", "disk_seq_read_1m_qd4": "disk.read_Bps",
         "net_tcp_loopback": "net.lo.tx_Bps", "mem_stream_triad_256M": "mem.bw_Bps"}
LEVELS = (0.25, 0.5, 0.75, 1.0)
GAP = 3   # idle windows between bases (IO in flight drains, counters settle)


def build_plan(catalog, per_level: int, window_s: float):
    blocks = []   # (base, level, first window)
    rows = []
    for base in BASES:
        for level in LEVELS:
            name = base if level == 1.0 else f"{base}_pace{int(level * 100)}"
            blocks.append((base, level, len(rows)))
            rows += [catalog.index(name)] * per_level
        rows += [None] * GAP
    a = np.zeros((len(rows), len(catalog), 1), np.float32)
    for t, m in enumerate(rows):
        if m is not None:
            a[t, m, 0] = 1.0
    return Plan.from_catalog(a, catalog, window_s=window_s, seed=0, provenance={"by": "bench/reach_pace.py"}), blocks


async def when_host_free(make, what: str, wait_s: float = 900):
    """Run make() once the host's run lock is free (other jobs on this machine run plans too)."""
    from mimesys.errors import HostBusy
    loop = asyncio.get_running_loop()
    end = loop.time() + wait_s
    while True:
        try:
            return await make()
        except HostBusy as e:
            if loop.time() > end:
                raise SystemExit(f"{what}: host busy for {wait_s:.0f} s: {e}")
            print(f"{what}: waiting for the host's run lock: {e}", file=sys.stderr)
            await asyncio.sleep(1.0)


async def agent_pass(cfg_path: Path, plan: Plan):
    from agentd.config import load_config
    from agentd.host_backend import HostBackend
    be = HostBackend.from_config(load_config(cfg_path))
    try:
        be.check_plan(plan)
        names = [m.name for m in be.metric_schema()]

        async def once():
            rows = {}
            async for w in be.execute(plan, RunOptions(record=False)):
                rows[w.window] = w.values
            return rows
        return names, await when_host_free(once, "agent pass")
    finally:
        await be.close()


async def runner_pass(plan: Plan, cpus, scratch: str, paces: dict):
    from agentd.hostlock import host_run_lock

    async def once():
        with host_run_lock(owner="bench/reach_pace.py runner pass"):
            return await _runner_pass(plan, cpus, scratch, paces)
    return await when_host_free(once, "runner pass")


async def _runner_pass(plan: Plan, cpus, scratch: str, paces: dict):
    handle = await start_runner(plan, RunnerConfig(cpus=cpus, scratch_dir=scratch, pace_Bps=paces))
    out = {}
    async for ev in handle.events():
        if isinstance(ev, WindowDone):
            m = int(np.argmax(ev.ran_ns[:, 0]))
            out[ev.window] = float(ev.bytes[m, 0]) / plan.window_s if ev.ran_ns[m, 0] > 0 else 0.0
    ex = await handle.wait()
    if not ex.ok:
        raise SystemExit(f"runner failed: {ex.status} {ex.detail}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "reach" / "pace.json")
    ap.add_argument("--windows-per-level", type=int, default=10)
    ap.add_argument("--window-s", type=float, default=0.1)
    ap.add_argument("--cpu", type=int, default=(os.cpu_count() or 1) - 1)
    ap.add_argument("--scratch-dir", default="/var/tmp")
    args = ap.parse_args()
    catalog = load_catalog()
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="reach-pace-") as tmp:
        tmp = Path(tmp)
        cal = asyncio.run(measure(RunnerConfig(cpus=(args.cpu,), scratch_dir=args.scratch_dir), window_s=0.5,
                                  all_threads=False, only=list(BASES), catalog=catalog))
        write(cal, tmp / "state" / "calibration.json")
        paces = pace_rates(catalog, cal)
        (tmp / "scratch").mkdir()
        cfg = tmp / "agent.toml"
        cfg.write_text(f'[agent]\nstate_dir = "{tmp}/state"\nscratch_dir = "{tmp}/scratch"\ncpus = [{args.cpu}]\n')
        plan, blocks = build_plan(catalog, args.windows_per_level, args.window_s)
        names, rows = asyncio.run(agent_pass(cfg, plan))
        runner_rates = asyncio.run(runner_pass(plan, (args.cpu,), args.scratch_dir, paces))
    results = {}
    for base, level, first in blocks:
        rate1 = cal["stressors"][base]["one_thread"]["bytes_per_s"]
        target = level * rate1
        ws = range(first, first + args.windows_per_level)
        metric = BASES[base]
        col = names.index(metric) if metric in names else None
        agent = [float(rows[w][col]) for w in ws] if col is not None else []
        exposed = bool(agent) and all(np.isfinite(agent))
        samples = agent if exposed else [runner_rates[w] for w in ws]
        ratio = np.array(samples) / target
        results.setdefault(base, {})[str(level)] = {
            "target_Bps": round(target), "measured_by": metric if exposed else "runner bytes (agent metric not exposed)",
            "achieved_mean": round(float(ratio.mean()), 4), "achieved_min": round(float(ratio.min()), 4),
            "achieved_max": round(float(ratio.max()), 4),
            "all_100ms_within_10pct": bool(np.all(np.abs(ratio - 1) <= 0.10)),
            "mean_within_10pct": bool(abs(ratio.mean() - 1) <= 0.10),
            "runner_achieved_mean": round(float(np.mean([runner_rates[w] for w in ws]) / target), 4),
            "per_100ms": [round(float(x), 4) for x in ratio]}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    png = args.out.with_suffix(".png")
    plot(results, png)
    out = {"bench": "reach_pace", "window_s": args.window_s, "windows_per_level": args.windows_per_level,
           "cpu": args.cpu, "pace_Bps": {k: round(v) for k, v in paces.items()},
           "base_one_thread_Bps": {b: round(cal["stressors"][b]["one_thread"]["bytes_per_s"]) for b in BASES},
           "results": results, "loadavg_before": [round(x, 2) for x in load_before],
           "loadavg_after": [round(x, 2) for x in os.getloadavg()], "png": str(png)}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(out))


def plot(results: dict, png: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, len(results), figsize=(4 * len(results), 3.6), sharey=True)
    for ax, (base, levels) in zip(np.atleast_1d(axes), results.items()):
        x0 = 0
        for level, r in levels.items():
            xs = np.arange(x0, x0 + len(r["per_100ms"]))
            ax.plot(xs, r["per_100ms"], "o-", ms=3, label=f"level {level}")
            x0 += len(xs)
        ax.axhspan(0.9, 1.1, color="g", alpha=0.12)
        ax.axhline(1.0, color="k", lw=0.6)
        ax.set_title(f"{base}\n({next(iter(levels.values()))['measured_by']})", fontsize=8)
        ax.set_xlabel("100 ms sample")
    np.atleast_1d(axes)[0].set_ylabel("achieved / level")
    np.atleast_1d(axes)[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    main()
