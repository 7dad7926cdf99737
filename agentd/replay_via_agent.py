"""`replay --via-agent`: hand the plan to this host's running agent instead of executing it in
this process. The agent (the systemd unit, with CAP_PERFMON) runs and measures the plan, so a
user without that capability still gets every metric the host offers; the command after `--`
runs here, as the caller. URL, token and TLS come from the agent's own config file."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import ssl
import time
from pathlib import Path

from mimesys import tracestream, wire
from mimesys.errors import AuthError, ConfigError, MimesysError

from .runas import interrupt

MAX_REPLY = 1 << 30   # the recorded trace of a long run (values); the agent bounds what it writes


def local_url(cfg) -> tuple[str, object]:
    """(base URL, aiohttp ssl argument) of the agent this config describes, seen from this host."""
    host = cfg.api.bind
    if host in ("0.0.0.0", "", "*"):
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    if ":" in host:
        host = f"[{host}]"
    if cfg.api.tls:
        # The agent's own certificate is the trust anchor: `tls init` makes a self-signed one.
        ctx = ssl.create_default_context(cafile=str(cfg.api.tls_cert))
        return f"https://{host}:{cfg.api.port}", ctx
    return f"http://{host}:{cfg.api.port}", None


def read_token(path: Path) -> str:
    try:
        tok = Path(path).read_text().strip()
    except PermissionError:
        raise AuthError(f"{path}: permission denied reading the agent's token; members of group mimesys may "
                        f"read it on a packaged host (adduser $USER mimesys, then log in again)") from None
    except OSError as e:
        raise ConfigError(f"{path}: cannot read the agent's token: {e.strerror or e}") from None
    if not tok:
        raise ConfigError(f"{path}: the agent's token file is empty")
    return tok


async def replay_via_agent(cfg, plan, command: list[str], repetitions: int, seed, *, output: Path | None,
                           spawn, prepare=None, max_repetitions: int | None = None) -> dict:
    """Run `plan` on the local agent (repeated until `command` exits, or `repetitions` times),
    start `command` through `spawn(command)` (a coroutine returning a process) once the first
    window has executed, and fetch the trace into `output`. Returns the same result keys as the
    in-process replay (trace is the path written, or None)."""
    import aiohttp

    url, ssl_arg = local_url(cfg)
    headers = {"Authorization": f"Bearer {read_token(cfg.api.token_file)}", "Content-Type": wire.CONTENT_TYPE}
    reps = (max_repetitions or cfg.runs.max_repetitions) if command else repetitions
    options = {"repetitions": int(reps), "record": output is not None}
    if seed is not None:
        options["seed"] = int(seed)
    proc = None
    cmd_wall = None
    windows = 0
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=10)
    try:
        async with aiohttp.ClientSession(headers=headers, timeout=timeout) as s:
            async with s.get(f"{url}/v1/info", ssl=ssl_arg) as r:
                info = wire.unpack(await r.read(), where="agent reply")
                if r.status != 200:
                    raise AuthError(f"the agent at {url} refused /v1/info ({r.status}): {info.get('error') or info}")
            if prepare is not None:
                plan = prepare(plan, info.get("fingerprint") or {}, int(info.get("max_threads") or 0))
            async with s.post(f"{url}/v1/runs", data=wire.pack({"plan": plan.to_wire(), "options": options}),
                              ssl=ssl_arg) as r:
                body = wire.unpack(await r.read(), where="agent reply")
                if r.status != 201:
                    raise MimesysError(f"the agent at {url} refused the plan ({r.status}): "
                                       f"{body.get('error') or body}")
                run_id = body["run_id"]
            async def stop_when_done(p):
                # The command ended: so does the workload (the agent records what ran until then).
                await p.wait()
                async with s.delete(f"{url}/v1/runs/{run_id}", ssl=ssl_arg):
                    pass

            live = {"proc": None, "cmd_started": None, "stopper": None, "windows": 0}
            follow = asyncio.create_task(_follow(s, url, ssl_arg, run_id, command, spawn, stop_when_done, live))
            # Ctrl-C / SIGTERM are ours, not asyncio.run's task cancellation (which an HTTP client
            # in the middle of a read may absorb): stop the agent's run, pass the signal on to the
            # command, and report the replay as interrupted.
            interrupted = asyncio.Event()
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, interrupted.set)
            try:
                waiter = asyncio.create_task(interrupted.wait())
                await asyncio.wait({follow, waiter}, return_when=asyncio.FIRST_COMPLETED)
                waiter.cancel()
                if interrupted.is_set() and not follow.done():
                    follow.cancel()
                    await asyncio.gather(follow, return_exceptions=True)
                    await _cancel_run(s, url, ssl_arg, run_id)
                    proc = live["proc"]
                    if proc is not None:
                        interrupt(proc)
                    end = {"state": "interrupted", "error": "interrupted (SIGINT/SIGTERM)"}
                else:
                    try:
                        windows, end = follow.result()
                    except BaseException:
                        # The stream broke: without this the agent would go on running the plan
                        # up to max_repetitions times for nobody.
                        await _cancel_run(s, url, ssl_arg, run_id)
                        raise
                proc, cmd_started, stopper = live["proc"], live["cmd_started"], live["stopper"]
                windows = live["windows"]
                if proc is not None:
                    await proc.wait()
                    cmd_wall = time.monotonic() - cmd_started
                    await asyncio.gather(stopper, return_exceptions=True)
            finally:
                for sig in (signal.SIGINT, signal.SIGTERM):
                    loop.remove_signal_handler(sig)
            if output is not None and windows:
                async with s.get(f"{url}/v1/runs/{run_id}/trace.msgpack", ssl=ssl_arg) as r:
                    if r.status == 200:
                        trace = await tracestream.read_stream(r.content.iter_chunked(1 << 16),
                                                              f"the agent's trace of run {run_id}", max_bytes=MAX_REPLY)
                        await asyncio.to_thread(trace.write, output)   # replay may run as root: atomic, mimesys.h5io
                    else:
                        output = None
    except aiohttp.ClientError as e:
        raise MimesysError(f"cannot reach the local agent at {url} ({e}); is mimesys-agent.service running? "
                           f"(without --via-agent the plan runs in this process)") from None
    # The command ended the run (DELETE): for the replay that is the normal end.
    state = end["state"]
    if command and proc is not None and state == "cancelled":
        state = "done"
    return {"trace_path": output if windows else None, "windows": windows, "state": state,
            "error": None if state == "done" else end.get("error"), "run_id": run_id,
            "exit_status": proc.returncode if proc is not None else None, "wall_s": cmd_wall or 0.0,
            "agent": url}


async def _cancel_run(s, url, ssl_arg, run_id) -> None:
    with contextlib.suppress(Exception):
        async with s.delete(f"{url}/v1/runs/{run_id}", ssl=ssl_arg):
            pass


async def _follow(s, url, ssl_arg, run_id, command, spawn, stop_when_done, live: dict):
    """Count the run's windows as they stream (into state, so an interrupted follow still says how
    many ran); start the command after the first one. Returns (windows, end frame)."""
    import aiohttp
    end = {"state": "failed", "error": "the agent closed the stream without an end frame"}
    async with s.ws_connect(f"{url}/v1/runs/{run_id}/trace", ssl=ssl_arg, max_msg_size=64 << 20) as ws:
        async for msg in ws:
            if msg.type != aiohttp.WSMsgType.BINARY:
                break
            frame = wire.unpack(msg.data, where="trace frame")
            if frame.get("type") == "window":
                live["windows"] += 1
                if command and live["proc"] is None:
                    live["cmd_started"] = time.monotonic()
                    live["proc"] = await spawn(command)
                    live["stopper"] = asyncio.create_task(stop_when_done(live["proc"]))
            elif frame.get("type") == "end":
                end = {"state": frame.get("state"), "error": frame.get("error")}
                break
    return live["windows"], end
