"""Controller scale: one collection campaign fanned out over >= 100 SIMULATED agents.

The agents are the real agent app over the simulated host backend, `--agents` of them on
distinct 127.0.0.1 ports, served by `--procs` separate processes (bench/sim_agents.py),
each window paced to window_s / `--speedup` of wall time. The controller (this process)
runs `mimesys collect`'s code path: probe, bind, round 0 sweep, then one proposal round big
enough to give every agent `--chains-per-agent` chains, streaming every window over
WebSockets and appending every chain to the crash-safe store (fsync per chain).

Prints ONE JSON line: agents, samples, samples_per_s (all samples / wall time of the whole
collect call, proposals included), profile_samples_per_s (samples / time spent running
chains), controller_cpu_percent (this process's CPU time / wall time x 100; 100 = one core),
and the host's load. The agents share this machine's CPUs with the controller, so the
figures are a floor for the controller on a machine of its own.

    python bench/collect_scale.py [--agents 100] [--procs 4] [--speedup 20] [--strategy random]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TOKEN = "scale-token-0123456789abcdef"


def spawn_agents(work: Path, n: int, procs: int, speedup: float) -> tuple[list, list[str]]:
    tok = work / "token"
    tok.write_text(TOKEN)
    tok.chmod(0o600)
    per = [n // procs + (1 if i < n % procs else 0) for i in range(procs)]
    children, urls = [], []
    for i, k in enumerate(per):
        p = subprocess.Popen([sys.executable, str(ROOT / "bench" / "sim_agents.py"), "--n", str(k), "--token-file",
                              str(tok), "--state-dir", str(work / f"agents{i}"), "--speedup", str(speedup),
                              "--seed", str(1000 * i)], stdout=subprocess.PIPE, text=True, cwd=ROOT)
        children.append(p)
    for p in children:
        urls += json.loads(p.stdout.readline())["urls"]
    (work / "fleet.toml").write_text("".join(f'[[agent]]\nurl = "{u}"\ntoken_file = "token"\n' for u in urls))
    return children, urls


async def collect(work: Path, args) -> dict:
    from controller.campaign.campaign import Campaign
    from controller.campaign.run import run_campaign
    from controller.fleet import Fleet

    round_size = args.agents * args.chains_per_agent * args.chain_len
    # round0 "sweep": with --strategy novelty, round 0's samples are executed chains too (from the solo
    # profile they would arrive without running anything, and say nothing of the fleet's throughput)
    camp = Campaign.open(work / "camp", {"strategy": args.strategy, "round_size": round_size,
                                         "chain_len": args.chain_len, "repetitions": args.repetitions,
                                         "sweep_intensities": [1.0], "round0": "sweep"})
    me = psutil.Process()
    cpu0, t0 = me.cpu_times(), time.monotonic()
    async with Fleet.from_file(work / "fleet.toml") as fl:
        summaries = await run_campaign(camp, fl, 1, progress=args.progress)
    wall = time.monotonic() - t0
    cpu1 = me.cpu_times()
    camp.close()
    cpu_s = (cpu1.user - cpu0.user) + (cpu1.system - cpu0.system)
    samples = sum(s.samples for s in summaries)
    profile_s = sum(s.profile_seconds for s in summaries)
    return {"samples": samples, "wall_s": round(wall, 2), "samples_per_s": round(samples / wall, 1),
            "profile_samples_per_s": round(samples / profile_s, 1) if profile_s else None,
            "controller_cpu_percent": round(100.0 * cpu_s / wall, 1),
            "rounds": [{"round": s.round, "samples": s.samples, "seconds": s.seconds,
                        "profile_seconds": s.profile_seconds} for s in summaries]}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--agents", type=int, default=100)
    ap.add_argument("--procs", type=int, default=4, help="processes serving the agents")
    ap.add_argument("--speedup", type=float, default=20.0, help="simulated windows per window_s of wall time")
    ap.add_argument("--chains-per-agent", type=int, default=2)
    ap.add_argument("--chain-len", type=int, default=16)
    ap.add_argument("--repetitions", type=int, default=3)
    ap.add_argument("--strategy", choices=["random", "novelty"], default="random",
                    help="random keeps proposal cost out of the way; novelty measures it too")
    ap.add_argument("--progress", action="store_true")
    args = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="collect-scale-"))
    children, urls = spawn_agents(work, args.agents, args.procs, args.speedup)
    try:
        load0 = os.getloadavg()[0]
        res = asyncio.run(collect(work, args))
    finally:
        for p in children:
            p.send_signal(signal.SIGTERM)
        for p in children:
            p.wait(timeout=30)
    print(json.dumps({"bench": "collect_scale", "simulated": True, "agents": len(urls),
                      "agent_processes": args.procs, "speedup": args.speedup, "strategy": args.strategy,
                      "repetitions": args.repetitions, "chain_len": args.chain_len, **res,
                      "host_cpus": os.cpu_count(), "loadavg_1m_before": round(load0, 2),
                      "loadavg_1m_after": round(os.getloadavg()[0], 2), "workdir": str(work)}))


if __name__ == "__main__":
    main()
