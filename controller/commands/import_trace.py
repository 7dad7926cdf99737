"""`mimesys import FILE --format FORMAT -o trace.h5 [--fleet F --agent NAME | --target-host JSON] [--window S]`: a foreign trace
into a mimesys trace, optionally mapped onto a target host, with a report of what was
mapped, scaled and dropped. Nothing is written when the input is malformed."""

from __future__ import annotations

import asyncio
import inspect
import json
import math
from pathlib import Path

import click

from mimesys.errors import ConfigError, MimesysError
from controller import importers
from controller.mapping import CORE_STRATEGIES, HostProfile, MappingOptions, map_trace, parse_peaks
from mimesys.cliopts import json_option, renamed_option
from mimesys.exitstatus import click_error

from ._agents import agent_options, one_agent


def agent_host(client) -> HostProfile:
    """The target host an agent describes (its /v1/info)."""
    async def fetch():
        try:
            return await client.info()
        finally:
            await client.close()

    return HostProfile.from_info(asyncio.run(fetch()), origin=client.name)


def load_host(host: str, token_file: Path | None, allow_plain_http: bool = False) -> HostProfile:
    """A saved JSON file (/v1/info answer or host fingerprint), or (the pre-fleet form) an agent URL."""
    if host.startswith(("http://", "https://")):
        return agent_host(one_agent(None, host, token_file, allow_plain_http=allow_plain_http))
    if not Path(host).is_file():
        raise ConfigError(f"--target-host {host!r}: neither an agent URL (http://...) nor a readable JSON file")
    return HostProfile.from_file(host)


@click.command("import")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path), required=False)
@click.option("--format", "fmt", default=None, type=click.Choice(importers.names()),
              help="Source format (with --url: prometheus).")
@click.option("--url", default=None, help="Fetch from a running Prometheus server instead of FILE "
                                          "(with --start, --end, --step).")
@click.option("--start", default=None, help="--url: first sample time (Unix seconds or ISO 8601).")
@click.option("--end", default=None, help="--url: last sample time (Unix seconds or ISO 8601).")
@click.option("--step", default=None, help="--url: seconds between samples (or 15s, 1m, 1h); the default window.")
@click.option("--page-points", default=10_000, type=click.IntRange(1, 11_000), show_default=True,
              help="--url: samples per series per query_range request.")
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False, path_type=Path), help="Trace (HDF5) to write.")
@renamed_option("--target-host", "host", "--host",
                help="Target host from a saved /v1/info or fingerprint JSON. Without it "
                     "(or --fleet/--agent) the trace keeps its source layout.")
@agent_options
@click.option("--window", "window_s", default=None, type=float, help="Window length W in seconds (default: the format's).")
@click.option("--machine", default=None, help="The one host to import: alibaba machine_id, prometheus instance label.")
@click.option("--cores", "core_strategy", default="preserve-total", type=click.Choice(CORE_STRATEGIES),
              show_default=True, help="How source cores map onto the target's (see controller/mapping.py).")
@click.option("--source-peak", multiple=True, metavar="METRIC=VALUE", help="The source host's peak of a metric.")
@click.option("--target-peak", multiple=True, metavar="METRIC=VALUE", help="Override a target host peak.")
@click.option("--report-json", default=None, type=click.Path(dir_okay=False, path_type=Path),
              help="Also write the import report as JSON.")
@json_option(help="Print only one JSON object on stdout: the trace written, its windows, metrics and window, "
                  "the target host and the import report (messages go to stderr).")
def import_trace(file, fmt, url, start, end, step, page_points, output, host, fleet_file, agent, token_file,
                 allow_plain_http, window_s, machine, core_strategy, source_peak, target_peak, report_json, as_json):
    """Import FILE (a foreign trace) as a mimesys trace, mapped onto a target host when one is named:
    an agent of a fleet (--fleet FILE [--agent NAME]) or a saved JSON (--target-host)."""
    try:
        if url is not None:
            fmt = fmt or "prometheus"
            if fmt != "prometheus" or file is not None:
                raise ConfigError("--url reads a Prometheus server: no FILE, and --format prometheus if any")
            if None in (start, end, step):
                raise ConfigError("--url needs --start, --end and --step")
        elif file is None or fmt is None:
            raise ConfigError("give FILE and --format FORMAT (or --url URL --start --end --step)")
        entry = importers.get(fmt)
        kwargs = {}
        params = inspect.signature(entry.load).parameters
        if window_s is not None:
            kwargs["window_s"] = window_s
        if machine is not None:
            if "machine" not in params:
                raise ConfigError(f"--machine does not apply to the {fmt} format (one host per file)")
            kwargs["machine"] = machine
        options = MappingOptions(core_strategy, parse_peaks(source_peak, "--source-peak"))
        overrides = parse_peaks(target_peak, "--target-peak")
        if host and (fleet_file or agent):
            raise ConfigError("name the target host once: --target-host JSON, or --fleet/--agent")
        if fleet_file or agent:
            target = agent_host(one_agent(fleet_file, agent, token_file, allow_plain_http=allow_plain_http))
        else:
            target = load_host(host, token_file, allow_plain_http) if host else None
        target = target.with_peaks(overrides) if target is not None else None
        if url is not None:
            from controller.importers.prometheus import fetch
            trace, report = fetch(url, _time(start, "--start"), _time(end, "--end"), _seconds(step),
                                  machine=machine, page_points=page_points, window_s=window_s)
        else:
            trace, report = entry.load(file, **kwargs)
        if target is not None:
            trace = map_trace(trace, target, options, report)
        trace.provenance["import_report"] = report.to_dict()
        trace.write(output)
        if report_json:
            from mimesys.fsutil import atomic_write_text
            atomic_write_text(report_json, json.dumps(report.to_dict(), indent=2))
    except MimesysError as e:
        raise click_error(e) from None
    click.echo(report.render(), err=as_json)
    where = f" mapped onto {target.origin} ({target.cpus} CPUs{', simulated' if target.simulated else ''})" if target else ""
    click.echo(f"wrote {output}: {trace.T} windows x {len(trace.metrics)} metrics, W = {trace.window_s:g} s{where}",
               err=as_json)
    if as_json:
        click.echo(json.dumps({
            "trace": str(output), "format": fmt, "windows": trace.T, "metrics": len(trace.metrics),
            "window_s": trace.window_s, "simulated": bool(trace.simulated),
            "target": None if target is None else {"origin": target.origin, "cpus": target.cpus,
                                                   "simulated": bool(target.simulated)},
            "report_json": str(report_json) if report_json else None, "report": report.to_dict()}, default=str))


def _time(text: str, opt: str) -> float:
    """Unix seconds or ISO 8601 (a time without a zone is UTC, as Prometheus reads it)."""
    import datetime
    try:
        v = float(text)
    except ValueError:
        pass
    else:
        if not math.isfinite(v):
            raise ConfigError(f"{opt} {text!r}: expected Unix seconds or an ISO 8601 time")
        return v
    try:
        t = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ConfigError(f"{opt} {text!r}: expected Unix seconds or an ISO 8601 time") from None
    if t.tzinfo is None:
        t = t.replace(tzinfo=datetime.timezone.utc)
    return t.timestamp()


def _seconds(text: str) -> float:
    units = {"s": 1, "m": 60, "h": 3600}
    try:
        v = float(text[:-1]) * units[text[-1]] if text and text[-1] in units else float(text)
    except ValueError:
        v = -1
    if not (math.isfinite(v) and v >= 0.001):     # nan/inf/1e-12 would page forever
        raise ConfigError(f"--step {text!r}: expected a positive number of seconds, at least 0.001 "
                          f"(or 15s, 1m, 1h)")
    return v
