"""Client commands for the inference server (`mimesys serve`):

- `mimesys generate-from-file --server URL --file TRACE -o plan.h5 [--png plan.png]`
- `mimesys profile-from-file --server URL --file TRACE -o metrics.png [--plan plan.h5] [--trace executed.h5]`

Both read a mimesys trace (HDF5); import foreign formats first with `mimesys import`. Their
stdout is one JSON object whether or not --json is given (they printed it before --json
existed, and scripts read it); --json is accepted so that every command takes it.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import click

from mimesys.cliopts import json_option
from mimesys.errors import MimesysError
from mimesys.exitstatus import click_error

from .serve import read_token


def _common(f):
    f = click.option("--seed", type=int, default=0, show_default=True)(f)
    f = click.option("--method", default=None,
                     help="One of the planners the server serves (its /v1/info lists them; default: the one it "
                          "was started with).")(f)
    f = click.option("--token-file", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
                     help="Server token (default: $MIMESYS_TOKEN).")(f)
    f = click.option("--file", "trace_path", required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path),
                     help="Target trace (mimesys HDF5).")(f)
    f = click.option("--server", default="http://127.0.0.1:8000", show_default=True, help="Inference server URL.")(f)
    f = json_option(help="Print only one JSON object on stdout (the default already: this command's "
                         "result is JSON; --json is accepted as everywhere). Progress goes to stderr.")(f)
    return f


async def _post(server: str, token: str, path: str, body: dict) -> dict:
    import aiohttp

    from mimesys import wire
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=600)) as s:
        async with s.post(server.rstrip("/") + path, data=wire.pack(body),
                          headers={"Authorization": f"Bearer {token}", "Content-Type": wire.CONTENT_TYPE}) as r:
            obj = wire.unpack(await r.read(), where=f"reply from {server}{path}")
            if r.status != 200:
                raise click.ClickException(f"{server}{path}: HTTP {r.status}: {obj.get('error', obj)}")
            return obj


@click.command("generate-from-file")
@_common
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False, path_type=Path), help="Plan (HDF5).")
@click.option("--png", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Plot of the target and the plan [OUTPUT with .png].")
def generate_from_file(server, trace_path, token_file, method, seed, output, png, as_json):
    """Ask the server for a plan reproducing TRACE; write it and a PNG."""
    from mimesys.plan import Plan
    from mimesys.trace import Trace
    from controller.inference_server import plan_png

    token = read_token(token_file)
    try:
        trace = Trace.read(trace_path)
        # Raw arrays both ways: HDF5 stays a file format (the server refuses it with 415).
        obj = asyncio.run(_post(server, token, "/v1/generate", _body({"trace": trace.to_wire(), "seed": seed}, method)))
        plan = Plan.from_wire(obj.get("plan"), f"plan from {server}")
        plan.write(output)
        png = png or output.with_suffix(".png")
        plan_png(trace, plan, png)
    except MimesysError as e:
        raise click_error(e) from e
    click.echo(json.dumps({"plan": str(output), "png": str(png), "windows": plan.T, "method": obj["method"]}))


@click.command("profile-from-file")
@_common
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="PNG comparing target and executed metrics.")
@click.option("--plan", "plan_out", type=click.Path(dir_okay=False, path_type=Path), default=None, help="Also write the plan.")
@click.option("--trace", "trace_out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write the executed trace.")
def profile_from_file(server, trace_path, token_file, method, seed, output, plan_out, trace_out, as_json):
    """Generate a plan for TRACE on the server, run it on the server's agent, and compare."""
    from mimesys.plan import Plan
    from mimesys.trace import Trace
    from controller.evaluate.dtw import compare
    from controller.inference_server import plan_png

    token = read_token(token_file)
    try:
        target = Trace.read(trace_path)
        plan_wire, method, executed = asyncio.run(_profile(server, token, target.to_wire(), seed, method, target.T))
        plan = Plan.from_wire(plan_wire, f"plan from {server}")
        executed = Trace.from_wire(executed, f"executed trace from {server}")
        if plan_out:
            plan.write(plan_out)
        if trace_out:
            executed.write(trace_out)
        plan_png(target, plan, output, executed=executed)
        dtw = {k: (None if v.distance != v.distance else round(v.distance, 4))
               for k, v in compare(target, executed, [n for n in target.names if n in executed.names]).items()}
    except MimesysError as e:
        raise click_error(e) from e
    click.echo(json.dumps({"png": str(output), "windows": plan.T, "method": method,
                           "simulated": bool(executed.simulated), "dtw": dtw}))


def _body(body: dict, method: str | None) -> dict:
    """The request, naming the method only when asked (else the server's default)."""
    return body if method is None else {**body, "method": method}


async def _profile(server: str, token: str, trace: dict, seed: int, method: str | None, windows: int):
    import aiohttp

    from mimesys import wire
    url = server.rstrip("/").replace("http", "ws", 1) + "/v1/profile"
    plan = None
    async with aiohttp.ClientSession() as s:
        async with s.ws_connect(url, headers={"Authorization": f"Bearer {token}"}, max_msg_size=1 << 30) as ws:
            await ws.send_bytes(wire.pack(_body({"trace": trace, "seed": seed}, method)))
            with click.progressbar(length=windows, label="profiling", file=sys.stderr) as bar:
                async for msg in ws:
                    if msg.type != aiohttp.WSMsgType.BINARY:
                        break
                    frame = wire.unpack(msg.data, where="profile frame")
                    if frame.get("type") == "plan":
                        plan, method = frame["plan"], frame.get("method", method)
                    elif frame.get("type") == "window":
                        bar.update(1)
                    elif frame.get("type") == "end":
                        if frame.get("state") != "done":
                            raise click.ClickException(f"profiling failed: {frame.get('error')}")
                        return plan, method, frame["trace"]
    raise click.ClickException(f"{url}: the stream ended without a result")
