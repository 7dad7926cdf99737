"""The inference server (`mimesys serve --model PLANNER`): generate plans from traces over HTTP,
and profile a generated plan on an agent while streaming its trace back.

One app factory (create_app), one route table, thin handlers; errors become HTTP statuses
in the core's errors middleware (mimesys/api/middleware.py, the same mapping as the agent's), bearer-token auth on every
route. Bodies and frames are msgpack (mimesys/wire.py).

| method | path | body -> reply |
|---|---|---|
| GET  | /healthz | -> {ok: true} |
| GET  | /v1/info | -> model manifest summary, methods, profiling agent |
| POST | /v1/generate | {trace, seed?, method?} -> {plan, windows, method, provenance} |
| POST | /v1/generate/series | {traces: [trace], seed?, method?} -> {plans: [plan], windows: [T]} |
| WS   | /v1/profile | first client frame {trace, seed?, method?}; then frames: {type: "plan", plan},
|      |             | {type: "header", ...agent's header}, {type: "window", ...} per executed window,
|      |             | {type: "end", state: "done", trace} or {type: "end", state: "failed", error} |

Plans and traces travel as raw arrays (Plan.to_wire, Trace.to_wire), never as HDF5 files: an HDF5
body is refused with 415 naming the format (mimesys/api/bodies.py).

`method` names one of the served planners (/v1/info lists them): the one `--model` names (the
default), and, when the server was given a dataset, every dataset baseline of the planner
registry. Each is built by the registry (mimesys/planners/registry.py), behind its activity guard.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from pathlib import Path

from aiohttp import WSMsgType, web

from mimesys import wire
from mimesys.api import bodies
from mimesys.api.responses import reply
from mimesys.api.middleware import MAX_BODY, auth_middleware, errors_middleware
from mimesys.errors import ConfigError, Conflict, NotImplementedYet, ValidationError
from mimesys.planners.base import Generator
from mimesys.planners.registry import kinds, load_planner
from mimesys.trace import Trace

log = logging.getLogger(__name__)
MAX_SERIES = 64
MAX_WINDOWS = 86_400        # a day of 1-s windows per request, as the agent's runs.generate_max_windows
MAX_CONCURRENT = 2          # requests decoding or generating at once; more get 409 (retry)


@dataclass
class ServerState:
    model_dir: str                          # the planner spec `--model` gave
    methods: dict[str, Generator]           # the first is the default
    manifest: dict                          # the first planner's, where it has one
    agent: object | None = None            # controller.fleet.AgentClient for /v1/profile
    busy: asyncio.Lock = field(default_factory=asyncio.Lock)   # one profile run at a time
    max_windows: int = MAX_WINDOWS          # trace windows one request may ask plans for (a series: in all)
    decoding: asyncio.Semaphore = field(default_factory=lambda: asyncio.Semaphore(MAX_CONCURRENT))


STATE = web.AppKey("inference_state", ServerState)


def _method(state: ServerState, obj: dict) -> tuple[str, Generator]:
    name = obj.get("method") or next(iter(state.methods))
    if not isinstance(name, str) or name not in state.methods:
        raise ValidationError(f"method {name!r} not served here; available: {', '.join(state.methods)}")
    return name, state.methods[name]


async def _generate_one(gen: Generator, trace: Trace, seed: int):
    if trace.T == 0:
        raise ValidationError("trace: has no windows")
    return await asyncio.to_thread(gen.generate, trace, seed=seed)


async def _body(request: web.Request, data: bytes, **fields) -> dict:
    """A request body decoded off the loop (a body of up to max_body_bytes is work)."""
    return await asyncio.to_thread(bodies.body_map, data, max_bytes=request.app[MAX_BODY], **fields)


def _windows_left(st: ServerState, used: int, trace: Trace, where: str) -> int:
    if used + trace.T > st.max_windows:
        raise ValidationError(f"{where}: {used + trace.T} windows in this request; this server plans at most "
                              f"{st.max_windows} per request")
    return used + trace.T


class _Slot:
    """One of MAX_CONCURRENT decode-and-generate slots, refused (409) rather than queued: a queue
    of waiting requests would hold their bodies in memory."""

    def __init__(self, st: ServerState):
        self.st = st

    async def __aenter__(self):
        if self.st.decoding.locked():
            raise Conflict(f"{MAX_CONCURRENT} requests are being served; retry")
        await self.st.decoding.acquire()

    async def __aexit__(self, *exc):
        self.st.decoding.release()


# -- handlers ----------------------------------------------------------------------
async def healthz(request: web.Request) -> web.Response:
    return reply({"ok": True})


async def info(request: web.Request) -> web.Response:
    st = request.app[STATE]
    m = st.manifest
    sampler = m.get("sampler") or {}
    return reply({"model_dir": st.model_dir, "methods": list(st.methods), "metric_names": m.get("metric_names"),
                  "catalog_names": m.get("catalog_names"), "catalog_hash": m.get("catalog_hash"),
                  "threads": m.get("threads"), "window_s": m.get("window_s"),
                  "sampler": {k: sampler[k] for k in ("steps", "guidance", "eta") if k in sampler},
                  "simulated_training_data": m.get("simulated_training_data", False),
                  "training_host_fingerprint": m.get("training_host_fingerprint", {}),
                  "profiling_agent": getattr(st.agent, "url", None)})


async def generate(request: web.Request) -> web.Response:
    st = request.app[STATE]
    async with _Slot(st):
        obj = await _body(request, await request.read(), allowed=("trace", "seed", "method"), required=("trace",))
        name, gen = _method(st, obj)
        trace = await asyncio.to_thread(bodies.trace_field, obj)
        _windows_left(st, 0, trace, "trace")
        plan = await _generate_one(gen, trace, bodies.seed_field(obj) or 0)
    return reply({"plan": plan.to_wire(), "windows": plan.T, "method": name,
                  "provenance": plan.provenance})


async def generate_series(request: web.Request) -> web.Response:
    st = request.app[STATE]
    async with _Slot(st):
        obj = await _body(request, await request.read(), allowed=("traces", "seed", "method"), required=("traces",))
        name, gen = _method(st, obj)
        traces = obj["traces"]
        if not isinstance(traces, list) or not traces or len(traces) > MAX_SERIES:
            raise ValidationError(f"traces: expected a list of 1..{MAX_SERIES} traces (raw arrays, Trace.to_wire)")
        seed = bodies.seed_field(obj) or 0
        decoded, used = [], 0
        for i, data in enumerate(traces):      # every trace checked before any is planned
            trace = await asyncio.to_thread(bodies.trace_field, {f"traces[{i}]": data}, name=f"traces[{i}]")
            used = _windows_left(st, used, trace, f"traces[{i}]")
            decoded.append(trace)
        plans, windows = [], []
        for i, trace in enumerate(decoded):
            try:
                plan = await _generate_one(gen, trace, seed + i)
            except ValidationError as e:
                raise ValidationError(f"traces[{i}]: {e}") from None
            plans.append(plan.to_wire())
            windows.append(plan.T)
    return reply({"plans": plans, "windows": windows, "method": name})


async def profile(request: web.Request) -> web.WebSocketResponse:
    st = request.app[STATE]
    ws = web.WebSocketResponse(max_msg_size=request.app[MAX_BODY])
    await ws.prepare(request)
    try:
        if st.agent is None:
            raise NotImplementedYet("this server has no profiling agent (start it with --agent URL --agent-token-file F)")
        msg = await ws.receive(timeout=60)
        if msg.type != WSMsgType.BINARY:
            raise ValidationError("first frame must be a binary msgpack map {trace, seed?, method?}")
        async with _Slot(st):
            obj = await _body(request, msg.data, allowed=("trace", "seed", "method", "repetitions"), required=("trace",))
            name, gen = _method(st, obj)
            trace = await asyncio.to_thread(bodies.trace_field, obj)
            _windows_left(st, 0, trace, "trace")
            plan = await _generate_one(gen, trace, bodies.seed_field(obj) or 0)
        await ws.send_bytes(wire.pack({"type": "plan", "plan": plan.to_wire(), "method": name}))
        if st.busy.locked():
            raise ValidationError("another profile run is in progress on this server's agent; retry later")
        async with st.busy:
            from mimesys.backend import RunOptions
            queue: asyncio.Queue = asyncio.Queue()
            run = asyncio.create_task(st.agent.run(plan, RunOptions(record=False), on_window=queue.put_nowait))
            while not (run.done() and queue.empty()):
                getter = asyncio.create_task(queue.get())
                done, _ = await asyncio.wait({getter, run}, return_when=asyncio.FIRST_COMPLETED)
                if getter in done:
                    await ws.send_bytes(wire.pack(wire.window_frame(getter.result())))
                else:
                    getter.cancel()
            result = run.result()
        await ws.send_bytes(wire.pack({"type": "end", "state": "done", "agent": st.agent.url,
                                       "simulated": bool(result.trace.simulated),
                                       "trace": result.trace.to_wire()}))
    except Exception as e:  # every failure ends the stream with its reason; bugs are logged
        if not isinstance(e, (ValidationError, NotImplementedYet, Conflict, asyncio.TimeoutError)) and \
                type(e).__name__ not in ("AgentError", "RunFailed", "AgentBusy", "FleetError"):
            log.exception("profile failed")
        if not ws.closed:
            await ws.send_bytes(wire.pack({"type": "end", "state": "failed", "error": str(e) or type(e).__name__}))
    finally:
        await ws.close()
    return ws


def setup_routes(app: web.Application) -> None:
    app.add_routes([web.get("/healthz", healthz), web.get("/v1/info", info), web.post("/v1/generate", generate),
                    web.post("/v1/generate/series", generate_series), web.get("/v1/profile", profile)])


def create_app(model_dir: Path | str, *, token: bytes, dataset: Path | str | None = None,
               agent_url: str | None = None, agent_token: str | None = None, agent=None,
               max_body_bytes: int = 256 << 20) -> web.Application:
    """model_dir: a planner spec (a model export, a forward model, KIND:INPUTS); with a dataset,
    its baselines are served too. `agent`: an AgentClient for /v1/profile (from a fleet file);
    or agent_url + agent_token."""
    main = load_planner(model_dir)
    methods: dict[str, Generator] = {main.name: main}
    if dataset is not None:
        from controller.model.data import load_training_data
        from controller.baselines import BASELINE_GROUP
        data = load_training_data(dataset)          # read once, shared by every baseline
        methods.update({k: load_planner(k, dataset=data) for k in kinds(group=BASELINE_GROUP)})
    if agent is None and agent_url:
        if not agent_token:
            raise ConfigError("--agent needs --agent-token-file")
        from controller.fleet import AgentClient
        agent = AgentClient(agent_url, agent_token)
    app = web.Application(middlewares=[errors_middleware, auth_middleware(token, False)],
                          client_max_size=max_body_bytes)
    app[MAX_BODY] = max_body_bytes
    app[STATE] = ServerState(str(model_dir), methods, dict(getattr(main, "manifest", None) or {}), agent)

    async def close_agent(app):
        yield
        if agent is not None:
            await agent.close()

    app.cleanup_ctx.append(close_agent)
    setup_routes(app)
    return app


def plan_png(target: Trace, plan, png: Path, executed: Trace | None = None, metrics: list[str] | None = None) -> None:
    """Target metrics (and the executed ones, when profiled) over time, plus the plan's busy
    fraction per resource class: the PNG comparison the client commands write."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = metrics or [n for n in ("cpu.util", "mem.bw_Bps", "llc.miss_per_s", "disk.read_Bps", "disk.write_Bps",
                                    "net.tx_Bps") if n in target.names] or target.names[:6]
    fig, axes = plt.subplots(len(names) + 1, 1, figsize=(9, 1.8 * (len(names) + 1)), sharex=True)
    sim = " (SIMULATED)" if target.simulated or (executed is not None and executed.simulated) else ""
    for ax, n in zip(axes, names):
        ax.plot(target.column(n), "k-", lw=1.5, label="target")
        if executed is not None and n in executed.names:
            ax.plot(executed.column(n)[: target.T], "C1-", lw=1.2, label="executed" + sim)
        ax.set_ylabel(n, fontsize=8)
        ax.legend(fontsize=7, loc="upper right")
    comps = plan.compositions                                   # [T, M, K]
    classes: dict[str, list[int]] = {}
    for m, name in enumerate(plan.catalog_names):
        classes.setdefault(name.split("_")[0], []).append(m)
    for cls, rows in classes.items():
        axes[-1].plot(comps[:, rows, :].sum(axis=(1, 2)) / plan.K, label=cls)
    axes[-1].set_ylabel("plan: busy per thread", fontsize=8)
    axes[-1].set_xlabel("window")
    axes[-1].legend(fontsize=7, ncol=5, loc="upper right")
    fig.suptitle(f"{plan.provenance.get('generator', 'plan')}: target vs {'executed' if executed else 'plan'}{sim}")
    fig.tight_layout()
    fig.savefig(png, dpi=100)
    plt.close(fig)
