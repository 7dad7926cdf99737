"""Thin request handlers: parse (mimesys/api/bodies.py), call the run manager / monitor hub / backend,
pack the reply. Errors are raised, never formatted here (mimesys/api/middleware.py maps them)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time

from aiohttp import WSMsgType, web

from mimesys import __version__, tracestream
from mimesys.api import bodies
from mimesys.api.responses import reply
from mimesys.errors import Conflict, MimesysError, NotImplementedYet, ValidationError

from . import scrape
from .state import BACKEND, CATALOG, CONFIG, GENERATOR, LOOP_LAG, MONITOR, RUNS, STARTED_AT

log = logging.getLogger(__name__)


async def read_body(request: web.Request) -> bytes:
    return await request.read()  # bounded by client_max_size (413 above it)


# -- info, health, metrics ---------------------------------------------------------
async def info(request: web.Request) -> web.Response:
    app = request.app
    backend, cfg = app[BACKEND], app[CONFIG]
    binfo = backend.info()
    states = getattr(backend, "sampler_states", None)
    runs = app[RUNS]
    running = runs.book.running()
    return reply({
        "version": __version__,
        "backend": binfo.name,
        "simulated": bool(binfo.simulated),
        "fingerprint": binfo.fingerprint,
        "calibration": binfo.calibration,
        "schema": [m.to_dict() for m in backend.metric_schema()],
        "catalog": app[CATALOG].to_dict(),
        "samplers": states() if callable(states) else {},
        "alignment": backend.alignment_stats() if hasattr(backend, "alignment_stats") else {},
        "max_threads": runs.limits.max_threads,
        "current_run": running.run_id if running is not None else None,
        "limits": {"max_body_bytes": cfg.api.max_body_bytes, "max_ws_message_bytes": cfg.api.max_ws_message_kib * 1024,
                   "max_repetitions": cfg.runs.max_repetitions, "max_warmup_windows": cfg.runs.max_warmup_windows},
        "monitor_interval_s": cfg.monitor.interval_s,
        "uptime_s": time.monotonic() - app[STARTED_AT],
        "event_loop_lag_max_s": app[LOOP_LAG].max_s,
    })


async def healthz(request: web.Request) -> web.Response:
    return reply({"ok": True})


async def metrics(request: web.Request) -> web.Response:
    body = await request.app[scrape.SCRAPES].render(request.app)   # capped, off the run executor
    # A scrape keeps the host sampled until a few intervals after the last one (one sample per
    # interval however many scrape; a refused scrape holds nothing).
    request.app[MONITOR].hold(max(60.0, 4 * request.app[CONFIG].monitor.interval_s))
    return web.Response(body=body, headers={"Content-Type": scrape.CONTENT_TYPE})


# -- runs ---------------------------------------------------------------------------
async def create_run(request: web.Request) -> web.Response:
    cfg, runs = request.app[CONFIG], request.app[RUNS]
    # Decoding a body of up to max_body_bytes is work: off the loop, like everything below.
    obj = await asyncio.to_thread(bodies.body_map, await read_body(request), allowed=("plan", "options"),
                                  required=("plan",), max_bytes=cfg.api.max_body_bytes)
    options = bodies.run_options(obj, max_repetitions=cfg.runs.max_repetitions,
                                 max_warmup_windows=cfg.runs.max_warmup_windows)
    plan = await asyncio.to_thread(bodies.plan_field, obj, max_threads=runs.limits.max_threads)
    run = await runs.start(plan, options)
    return reply({"run_id": run.run_id, "windows_total": run.windows_total}, status=201)


async def get_run(request: web.Request) -> web.Response:
    return reply(request.app[RUNS].book.status(request.match_info["run_id"]))


async def delete_run(request: web.Request) -> web.Response:
    state = await request.app[RUNS].cancel(request.match_info["run_id"])
    return reply({"state": state.value})


async def get_run_trace(request: web.Request) -> web.StreamResponse:
    """The recorded trace as a stream of bounded msgpack messages (mimesys/tracestream.py), read
    from the run's file a chunk at a time off the loop: HDF5 stays on this host's disk."""
    run_id = request.match_info["run_id"]
    path = request.app[RUNS].book.trace_path(run_id)
    messages = tracestream.iter_messages(path, f"the trace of run {run_id}")
    try:
        first = await asyncio.to_thread(next, messages)    # a bad file fails before the status is sent
        resp = web.StreamResponse(headers={"Content-Type": tracestream.CONTENT_TYPE})
        await resp.prepare(request)
        msg = first
        while msg is not None:
            await resp.write(msg)
            msg = await asyncio.to_thread(next, messages, None)
        await resp.write_eof()
        return resp
    finally:
        await asyncio.to_thread(messages.close)


async def get_profile(request: web.Request) -> web.StreamResponse:
    """The host's solo profile as `calibrate` recorded it with the agent's calibration
    (agentd/profile_recorder.py), as bounded msgpack messages; 404 naming why when there is
    none this host can use."""
    from ..profile_recorder import stored_profile

    app = request.app
    trace = await asyncio.to_thread(stored_profile, app[CONFIG].agent.state_dir, app[CATALOG], app[BACKEND].info())
    resp = web.StreamResponse(headers={"Content-Type": tracestream.CONTENT_TYPE})
    await resp.prepare(request)
    for msg in tracestream.trace_messages(trace):
        await resp.write(msg)
    await resp.write_eof()
    return resp


async def _websocket(request: web.Request) -> web.WebSocketResponse:
    cfg = request.app[CONFIG]
    ws = web.WebSocketResponse(max_msg_size=cfg.api.max_ws_message_kib * 1024, heartbeat=30.0)
    await ws.prepare(request)
    return ws


async def _drain_incoming(ws: web.WebSocketResponse) -> None:
    """Clients only ever send close/ping; anything else is ignored, oversized is closed by aiohttp."""
    async for msg in ws:
        if msg.type == WSMsgType.ERROR:
            break


async def _pump(ws: web.WebSocketResponse, frames) -> None:
    """Send frames until they end or the client goes away."""
    receiver = asyncio.create_task(_drain_incoming(ws))
    try:
        async for frame in frames:
            if receiver.done() or ws.closed:
                break
            await ws.send_bytes(frame)
    except (ConnectionResetError, asyncio.CancelledError):
        pass
    finally:
        receiver.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await receiver
        if not ws.closed:
            with contextlib.suppress(Exception):
                await ws.close()


async def run_trace_ws(request: web.Request) -> web.WebSocketResponse:
    log_ = request.app[RUNS].book.frames(request.match_info["run_id"])  # 404 before upgrading
    ws = await _websocket(request)
    await _pump(ws, log_.follow())
    return ws


async def monitor_ws(request: web.Request) -> web.WebSocketResponse:
    hub = request.app[MONITOR]
    sub = hub.subscribe()  # 503 before upgrading when full
    try:
        ws = await _websocket(request)

        async def frames():
            yield hub.header()
            while True:
                frame = await sub.get()
                if frame is None:
                    return
                yield frame

        await _pump(ws, frames())
    finally:
        hub.unsubscribe(sub)
    return ws


# -- generation ---------------------------------------------------------------------
class GenerationCancelled(Exception):
    """The client of a /v1/generate request went away: its generation stops at the next window."""


async def generate(request: web.Request) -> web.Response:
    """Bounded: a window cap, one request at a time, refused while a run measures this host (it
    would compete for the CPUs the run measures), and stopped when its client goes away."""
    cfg, runs, holder = request.app[CONFIG], request.app[RUNS], request.app[GENERATOR]
    if (running := runs.book.running()) is not None:
        raise Conflict(f"run {running.run_id} is measuring this host; generate when it has ended")
    if holder["busy"].locked():
        raise Conflict("another /v1/generate request is running; one at a time")
    async with holder["busy"]:
        obj = await asyncio.to_thread(bodies.body_map, await read_body(request), allowed=("trace", "seed"),
                                      required=("trace",), max_bytes=cfg.api.max_body_bytes)
        seed = bodies.seed_field(obj)
        trace = await asyncio.to_thread(bodies.trace_field, obj)
        if trace.T == 0:
            raise ValidationError("trace: has no windows")
        if trace.T > cfg.runs.generate_max_windows:
            raise ValidationError(f"trace: {trace.T} windows; /v1/generate takes at most "
                                  f"{cfg.runs.generate_max_windows} (runs.generate_max_windows)")
        generator = await _generator(request.app)
        stop = threading.Event()

        def progress(done: int, total: int) -> None:
            if stop.is_set():
                raise GenerationCancelled

        def work():
            plan = generator.generate(trace, seed=seed if seed is not None else 0, progress=progress)
            return plan, plan.to_wire()     # raw arrays: HDF5 never crosses the API

        # Its own thread, not the default executor that finishes runs and decodes bodies.
        fut = asyncio.get_running_loop().run_in_executor(holder["executor"], work)
        try:
            while True:
                done, _ = await asyncio.wait({fut}, timeout=0.2)
                if done:
                    break
                transport = request.transport
                if transport is None or transport.is_closing():
                    stop.set()
                    log.info("/v1/generate: client went away; generation stopped")
                    raise asyncio.CancelledError
        except asyncio.CancelledError:
            stop.set()
            with contextlib.suppress(BaseException):
                await asyncio.wait({fut})     # hold the one-at-a-time lock until the thread is free
            raise
        plan, data = fut.result()
        out = {"plan": data, "windows": plan.T}
        try:  # a model trained for another catalog or host still answers, but says so
            runs.validate(plan)
        except MimesysError as e:
            out["warning"] = f"this plan would not run on this agent: {e}"
        return reply(out)


async def _generator(app: web.Application):
    """The local model, loaded on first use and kept. 501 until one is installed."""
    holder = app[GENERATOR]
    if holder.get("generator") is not None:
        return holder["generator"]
    model_dir = app[CONFIG].agent.model_dir
    if not (model_dir / "manifest.json").is_file():
        raise NotImplementedYet(f"no generation model installed: {model_dir}/manifest.json not found; export "
                                f"one with `mimesys export` (or fit a forward model with `mimesys forward fit`) "
                                f"and copy the directory to {model_dir}")
    try:
        from mimesys.planners import load_planner
    except ImportError as e:
        raise NotImplementedYet(f"this agent build has no local generator (mimesys.planners: {e})") from None
    async with holder["lock"]:
        if holder.get("generator") is None:
            try:
                holder["generator"] = await asyncio.to_thread(load_planner, model_dir)
            except Exception as e:
                log.error("loading the model from %s failed: %s", model_dir, e)
                raise NotImplementedYet(f"the model in {model_dir} could not be loaded: {e}") from None
    return holder["generator"]
