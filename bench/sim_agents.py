"""Serve N simulated agents from one process: the real agent app (agentd.api.create_app)
over the simulated host backend (mimesys.sim.SimBackend), each on its own 127.0.0.1 port.

For fleet tests and controller load tests. Every agent says simulated in /v1/info and in
every trace. Prints one JSON line {"urls": [...], "pid": ...} once all are listening, then
serves until SIGTERM/SIGINT.

    python bench/sim_agents.py --n 25 --token-file tok --state-dir /tmp/agents [--speedup 0]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
from pathlib import Path

# the agent code of the repository this script lives in, not whichever mimesys is installed
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def build_config(state_dir: Path, token_file: Path, n_cpus: int):
    from agentd.config import AgentSection, ApiSection, Config
    agent = AgentSection(backend="sim", state_dir=state_dir, scratch_dir=state_dir / "scratch",
                         model_dir=state_dir / "model")
    return Config(agent=agent, api=ApiSection(bind="127.0.0.1", port=0, token_file=token_file))


async def start_agents(n: int, token: bytes, state_dir: Path, *, speedup: float = 0.0, seed: int = 0,
                       n_cpus: int | list[int] = 4, base_port: int = 0, token_file: Path | None = None):
    """Start n agent apps in this event loop. Returns (urls, runners); `await r.cleanup()` each.
    n_cpus may be a list (one per agent) to build a fleet of differing simulated hosts."""
    from aiohttp import web

    from agentd.api.app import create_app
    from mimesys.catalog import load_catalog
    from mimesys.sim import SimBackend, SimConfig

    catalog = load_catalog()
    runners, urls = [], []
    for i in range(n):
        cpus = n_cpus[i] if isinstance(n_cpus, (list, tuple)) else n_cpus
        sd = Path(state_dir) / f"agent{i}"
        sd.mkdir(parents=True, exist_ok=True)
        cfg = build_config(sd, token_file or sd / "token", cpus)
        backend = SimBackend(SimConfig(n_cpus=cpus, seed=seed + i, speedup=speedup), catalog)
        app = create_app(cfg, backend, token=token, catalog=catalog)
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", base_port + i if base_port else 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]
        runners.append(runner)
        urls.append(f"http://127.0.0.1:{port}")
    return urls, runners


async def serve(n: int, base_port: int, token_file: Path, state_dir: Path, speedup: float, seed: int,
                n_cpus: int) -> None:
    token = token_file.read_bytes().strip()
    urls, runners = await start_agents(n, token, state_dir, speedup=speedup, seed=seed, n_cpus=n_cpus,
                                       base_port=base_port, token_file=token_file)
    print(json.dumps({"urls": urls, "pid": os.getpid()}), flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        for r in runners:
            await r.cleanup()


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1)
    ap.add_argument("--base-port", type=int, default=0, help="0 = ephemeral ports")
    ap.add_argument("--token-file", type=Path, required=True)
    ap.add_argument("--state-dir", type=Path, required=True)
    ap.add_argument("--speedup", type=float, default=0.0, help="0 = unpaced simulated windows")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cpus", type=int, default=4)
    a = ap.parse_args(argv)
    import logging
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    asyncio.run(serve(a.n, a.base_port, a.token_file, a.state_dir, a.speedup, a.seed, a.cpus))


if __name__ == "__main__":
    main()
