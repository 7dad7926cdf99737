"""`mimesys-agent serve`: the daemon (what systemd runs)."""

from __future__ import annotations

import asyncio
import logging
import signal
import ssl

import click
from aiohttp import web

from mimesys.errors import ConfigError

from ._common import config_options, friendly_errors, load

log = logging.getLogger("agentd.serve")


@click.command()
@config_options
@click.option("--bind", default=None, help="Listen address (overrides api.bind).")
@click.option("--port", type=click.IntRange(0, 65535), default=None, help="Listen port (overrides api.port).")
@click.option("--log-level", type=click.Choice(["debug", "info", "warning", "error"]), default="info")
@friendly_errors
def serve(config_path, backend, bind, port, log_level):
    """Run the agent: HTTP API, runs, live telemetry. Sends READY=1 to systemd once listening."""
    import dataclasses

    from .. import notify
    from ..api import create_app
    from ..backend_registry import create_backend
    from ..host_backend import clear_scratch

    where = notify.setup_logging(getattr(logging, log_level.upper()))
    cfg = load(config_path, backend)
    if bind is not None or port is not None:
        api = dataclasses.replace(cfg.api, **{k: v for k, v in (("bind", bind), ("port", port)) if v is not None})
        api.validate("command line")
        cfg = dataclasses.replace(cfg, api=api)
    token = cfg.read_token()
    ssl_ctx = _tls(cfg)
    # A killed agent's runner died with it (PR_SET_PDEATHSIG), but files it had open may remain.
    removed = clear_scratch(cfg.agent.scratch_dir)
    if removed:
        log.warning("removed %d leftover entries from %s (a previous agent was killed mid-run)",
                    removed, cfg.agent.scratch_dir)
    be = create_backend(cfg)
    app = create_app(cfg, be, token=token)
    app.cleanup_ctx.append(notify.watchdog_ctx)
    log.info("mimesys-agent starting: backend=%s simulated=%s config=%s logging=%s", be.info().name,
             be.info().simulated, ", ".join(cfg.sources) or "built-in defaults", where)
    asyncio.run(_serve(app, cfg, ssl_ctx, be))


def _tls(cfg):
    if not cfg.api.tls:
        return None
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    from mimesys.errors import ValidationError
    from mimesys.fsutil import read_secret_file
    try:   # the private key: ours alone (owner, mode), or the agent does not serve with it
        read_secret_file(cfg.api.tls_key, "api.tls_key")
    except ValidationError as e:
        raise ConfigError(str(e)) from None
    try:
        ctx.load_cert_chain(str(cfg.api.tls_cert), str(cfg.api.tls_key))
    except (OSError, ssl.SSLError) as e:
        raise ConfigError(f"api.tls_cert/tls_key ({cfg.api.tls_cert}, {cfg.api.tls_key}): {e}") from None
    return ctx


async def _serve(app: web.Application, cfg, ssl_ctx, backend) -> None:
    from .. import notify

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    runner = web.AppRunner(app, handle_signals=False, access_log=None)
    await runner.setup()
    try:
        site = web.TCPSite(runner, cfg.api.bind, cfg.api.port, ssl_context=ssl_ctx)
        try:
            await site.start()
        except OSError as e:
            raise ConfigError(f"cannot listen on {cfg.api.bind}:{cfg.api.port}: {e.strerror or e}") from None
        addrs = runner.addresses
        backend.serving_on({a[1] for a in addrs})    # its own connections are not the workload
        scheme = "https" if ssl_ctx else "http"
        for a in addrs:
            log.info("listening on %s://%s:%d", scheme, a[0], a[1])
        # Tests and scripts started with --port 0 find the port here.
        print(f"listening on {scheme}://{addrs[0][0]}:{addrs[0][1]}" if addrs else "listening", flush=True)
        notify.notify(f"READY=1\nSTATUS=serving on {cfg.api.bind}:{cfg.api.port}")
        await stop.wait()
        log.info("stopping")
        notify.notify("STOPPING=1\nSTATUS=shutting down")
    finally:
        await runner.cleanup()
