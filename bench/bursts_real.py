"""Burst structure on real runs of this machine, and the data of the transfer to a second host.

Everything here runs on this machine for real; nothing is simulated. Two hosts:

- host A: this machine as it is (a local agent, `mimesys-agent serve`, host backend).
- host B: a constrained profile of this machine, made with real kernel controls: the agent
  (and everything it starts: the runner, `calibrate`) runs in a cgroup (v1) with a CPU quota
  (--b-quota CPUs for the agent's two plan threads together) and block-device throttles on the
  scratch disk (--b-read-mbps MB/s and --b-read-iops reads/s, direct reads). Its fingerprint's
  `limits` section and its calibration say what it is; its campaign and dataset are its own.

Steps (each skipped when its output exists, so an interrupted run resumes):
  A1 calibrate A; record real application mixes (bench/workloads/mixes.py) at 1 s
  A2 A's solo profile; a short campaign (random strategy); dataset; forward fit
  A3 `mimesys evaluate` of every method on the mixes (DTW + burst structure per method)
  A4 `mimesys forward score --runs`: burst statistics predicted from each plan vs measured
  B1 calibrate B; a campaign on B (the transfer's samples and held-out samples)
  B2 the evaluation's plans run again on B: held-out real runs for B's burst statistics
Then `bench/transfer.py --work OUT` makes the transfer table.

    python bench/bursts_real.py --out bench-out/bursts [--mix-seconds 40]
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO / "bench" / "workloads"))

AGENT, CTL = [sys.executable, "-m", "agentd.cli"], [sys.executable, "-m", "controller.cli"]
CGROUP = "mimesys-hostb"
DISK = "254:0"   # the scratch disk (vda) on this VM; checked against /tmp's device below


def sh(cmd, **kw):
    print(time.strftime("%H:%M:%S"), "$", " ".join(map(str, cmd)), file=sys.stderr, flush=True)
    return subprocess.run([str(c) for c in cmd], cwd=REPO, check=True, **kw)


def retry(cmd, tries: int = 6):
    """A resumable command (collect) again after a failure: on a host shared with other helpers'
    runs a step may lose the host's run lock."""
    for i in range(tries):
        try:
            return sh(cmd)
        except subprocess.CalledProcessError:
            if i == tries - 1:
                raise
            time.sleep(10)


def tmp_disk() -> str:
    st = os.stat(tempfile_dir())
    return f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}"


def tempfile_dir() -> str:
    import tempfile
    return tempfile.gettempdir()


def make_cgroup(quota_cpus: float, read_mbps: float, read_iops: int) -> None:
    cpu, blk = Path("/sys/fs/cgroup/cpu") / CGROUP, Path("/sys/fs/cgroup/blkio") / CGROUP
    cpu.mkdir(exist_ok=True)
    blk.mkdir(exist_ok=True)
    (cpu / "cpu.cfs_period_us").write_text("100000")
    (cpu / "cpu.cfs_quota_us").write_text(str(int(quota_cpus * 100000)))
    dev = tmp_disk()
    (blk / "blkio.throttle.read_bps_device").write_text(f"{dev} {int(read_mbps * 1e6)}")
    (blk / "blkio.throttle.read_iops_device").write_text(f"{dev} {int(read_iops)}")


def join_cgroup() -> None:
    """preexec_fn: the child joins host B's cgroups before it runs anything."""
    pid = str(os.getpid())
    for ctrl in ("cpu", "blkio"):
        Path(f"/sys/fs/cgroup/{ctrl}/{CGROUP}/cgroup.procs").write_text(pid)


def start_agent(out: Path, constrained: bool):
    from controller.commands import demo
    agent = demo.LocalAgent(out)
    if constrained:
        real = demo.subprocess.Popen
        demo.subprocess.Popen = functools.partial(real, preexec_fn=join_cgroup)
        try:
            agent.start()
        finally:
            demo.subprocess.Popen = real
    else:
        agent.start()
    return agent


def collect(agent, camp: Path, ds: Path, rounds: int, size: int, seed: int) -> None:
    if not ds.exists():
        f = agent.write_fleet()
        retry([*CTL, "collect", camp, "--fleet", f, "--rounds", rounds, "--round-size", size, "--strategy", "random",
            "--chain-len", 16, "--repetitions", 2, "--sweep-intensities", "0.5,1.0", "--spread-threshold", 0.3,
            "--seed", seed, "--no-progress"])
        sh([*CTL, "dataset", "build", camp, "-o", ds])


async def rerun_plans(agent, plans: list[Path], outdir: Path) -> None:
    """Each plan run once more on `agent`; plans/ and executed/ under outdir, as evaluate writes."""
    from mimesys.backend import RunOptions
    from mimesys.plan import Plan
    from controller.fleet import AgentClient
    client = AgentClient(agent.url, agent.token_file.read_text().strip())
    (outdir / "plans").mkdir(parents=True, exist_ok=True)
    (outdir / "executed").mkdir(parents=True, exist_ok=True)
    try:
        for p in plans:
            if (outdir / "executed" / p.name).exists():
                continue
            print(time.strftime("%H:%M:%S"), "run on B:", p.name, file=sys.stderr, flush=True)
            res = await client.run_when_host_free(Plan.read(p), RunOptions(repetitions=1, warmup_windows=1, record=False,
                                                                            seed=0))
            shutil.copy(p, outdir / "plans" / p.name)
            res.trace.write(outdir / "executed" / p.name)
    finally:
        await client.close()


def agent_info(agent) -> dict:
    from controller.fleet import AgentClient

    async def info():
        c = AgentClient(agent.url, agent.token_file.read_text().strip())
        try:
            return await c.info()
        finally:
            await c.close()
    return asyncio.run(info())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=Path("bench-out/bursts"))
    ap.add_argument("--mixes", default="burst_serve,db_bulk")
    ap.add_argument("--mix-seconds", type=int, default=40)
    ap.add_argument("--a-rounds", type=int, default=2)
    ap.add_argument("--a-round-size", type=int, default=48)
    ap.add_argument("--b-rounds", type=int, default=4)
    ap.add_argument("--b-round-size", type=int, default=64)
    ap.add_argument("--b-quota", type=float, default=0.8, help="host B: CPU quota, in CPUs")
    ap.add_argument("--b-read-mbps", type=float, default=60.0)
    ap.add_argument("--b-read-iops", type=int, default=1500)
    ap.add_argument("--b-methods", default="inverse,single", help="whose plans are run again on B")
    ap.add_argument("--only", choices=("A", "B"), default=None)
    args = ap.parse_args()

    from fidelity_real import record_mix
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    a_dir, b_dir = out / "hostA", out / "hostB"
    mixes = args.mixes.split(",")
    log = {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "args": {k: str(v) for k, v in vars(args).items()}}

    if args.only in (None, "A"):
        a_dir.mkdir(exist_ok=True)
        agent = start_agent(a_dir / "agent", constrained=False)
        try:
            sh([*AGENT, "calibrate", "--config", agent.config_file])
            shutil.copy(agent.tmp / "state" / "calibration.json", a_dir / "calibration.json")
            tdir = a_dir / "targets"
            tdir.mkdir(exist_ok=True)
            for mix in mixes:
                if not (tdir / f"{mix}.h5").exists():
                    record_mix(agent, mix, args.mix_seconds, tdir / f"{mix}.h5")
            camp, ds = a_dir / "campaign", a_dir / "dataset.h5"
            collect(agent, camp, ds, args.a_rounds, args.a_round_size, seed=1)
            fm = a_dir / "forward"
            if not (fm / "manifest.json").exists():
                sh([*CTL, "forward", "fit", ds, "-o", fm, "--calibration", a_dir / "calibration.json", "--overwrite"])
            ev = a_dir / "eval"
            if not (ev / "results.json").exists():
                f = agent.write_fleet()
                sh([*CTL, "evaluate", "--fleet", f, *[x for m in mixes for x in ("--trace", tdir / f"{m}.h5")],
                    "--method", f"inverse=inverse:{fm}", "--method", "single", "--method", "nearest", "--method", "knn",
                    "--dataset", ds, "-o", ev])
            with open(a_dir / "forward_score.json", "w") as fh:
                sh([*CTL, "forward", "score", fm, ds, "--runs", ev, "--json"], stdout=fh)
            (a_dir / "fingerprint.json").write_text(json.dumps(agent_info(agent).get("fingerprint"), indent=1))
        finally:
            agent.stop()

    if args.only in (None, "B"):
        b_dir.mkdir(exist_ok=True)
        make_cgroup(args.b_quota, args.b_read_mbps, args.b_read_iops)
        agent = start_agent(b_dir / "agent", constrained=True)
        try:
            cal = b_dir / "calibration.json"
            if not cal.exists():
                sh([*AGENT, "calibrate", "--config", agent.config_file], preexec_fn=join_cgroup)
                shutil.copy(agent.tmp / "state" / "calibration.json", cal)
            else:
                shutil.copy(cal, agent.tmp / "state" / "calibration.json")
            collect(agent, b_dir / "campaign", b_dir / "dataset.h5", args.b_rounds, args.b_round_size, seed=2)
            wanted = args.b_methods.split(",")
            plans = [p for p in sorted((a_dir / "eval" / "plans").glob("*.h5")) if p.stem.split("__")[-1] in wanted]
            asyncio.run(rerun_plans(agent, plans, b_dir / "runs"))
            (b_dir / "fingerprint.json").write_text(json.dumps(agent_info(agent).get("fingerprint"), indent=1))
        finally:
            agent.stop()
    log["finished"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    (out / "bursts_real_log.json").write_text(json.dumps(log, indent=1))


if __name__ == "__main__":
    main()
