"""`mimesys fleet list|probe --fleet FILE`: the agents of a fleet file and what they offer.

The fleet file is --fleet or $MIMESYS_FLEET, as for every command (commands/_agents.py):
`probe` sends every agent its token, so a ./fleet.toml is never read unless named."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import click

from mimesys.cliopts import json_option
from mimesys.errors import MimesysError
from mimesys.exitstatus import ERROR, PARTIAL, click_error

from ._agents import plain_http_option

FLEET_FILE = click.option("--fleet", "fleet_file", type=click.Path(dir_okay=False, path_type=Path), default=None,
                          help="Fleet file (TOML) [default: $MIMESYS_FLEET; never ./fleet.toml implicitly].")


def _fleet_file(fleet_file: Path | None) -> Path:
    """The fleet file named by --fleet or $MIMESYS_FLEET; ConfigError saying how to name one."""
    from mimesys.errors import ConfigError

    from ._agents import HOW_TO_NAME_AN_AGENT, resolve_fleet_file
    path = resolve_fleet_file(fleet_file)
    if path is None:
        raise ConfigError(f"no fleet file: {HOW_TO_NAME_AN_AGENT} (a fleet.toml in the current directory is "
                          f"not read unless named)")
    return path
AGENTS = click.option("--agent", "agents", multiple=True, metavar="NAME", help="Only this agent (repeat).")


@click.group()
def fleet():
    """Inspect the agents of a fleet file."""


@fleet.command("list")
@FLEET_FILE
@AGENTS
@json_option(help="Print only one JSON object on stdout: the fleet file, whether mixed hosts are allowed, and "
                  "each agent's name, URL, token file and TLS (sha256 pin, CA file, system CAs or plain HTTP).")
def list_(fleet_file, agents, as_json):
    """The agents the fleet file names (no network)."""
    from ..fleet import FleetConfig
    from ..tokens import is_loopback_url
    try:
        fleet_file = _fleet_file(fleet_file)
        cfg = FleetConfig.load(fleet_file).select(agents)
    except MimesysError as e:
        raise click_error(e) from None
    if as_json:
        click.echo(json.dumps({"fleet": str(fleet_file), "allow_mixed_hosts": cfg.allow_mixed_hosts,
                               "agents": [_agent_doc(a) for a in cfg.agents]}))
        return
    for a in cfg.agents:
        tls = ("pinned sha256 " + a.tls_sha256.hex()[:16] + "..." if a.tls_sha256 else
               f"ca_file {a.ca_file}" if a.ca_file else "system CAs" if a.url.startswith("https") else "plain HTTP")
        token = a.token_file or ("(lookup order)" if is_loopback_url(a.url) else "(none: set token_file)")
        click.echo(f"{a.name:24s} {a.url:32s} token: {token}  TLS: {tls}")
    click.echo(f"{len(cfg.agents)} agent(s); mixed hosts {'allowed' if cfg.allow_mixed_hosts else 'refused'}")


@fleet.command()
@FLEET_FILE
@AGENTS
@plain_http_option
@json_option(help="Print only JSON on stdout: a list of every agent's name, /v1/info and error; "
                  "messages go to stderr.")
def probe(fleet_file, agents, allow_plain_http, as_json):
    """Ask every agent for its fingerprint, metric availability and calibration."""
    from ..fleet import Fleet, FleetError

    async def main():
        async with Fleet.from_file(_fleet_file(fleet_file), agents=agents, allow_plain_http=allow_plain_http) as fl:
            return fl, await fl.probe()
    try:
        fl, probes = asyncio.run(main())
    except MimesysError as e:
        raise click_error(e) from None
    if as_json:
        click.echo(json.dumps([{"agent": p.client.name, "info": p.info, "error": p.error} for p in probes],
                              indent=1, default=str))
    else:
        for p in probes:
            if not p.ok:
                click.echo(f"{p.client.name}: UNREACHABLE: {p.error}")
                continue
            i = p.info
            fp = i.get("fingerprint", {})
            cpu = fp.get("cpu", {}) if isinstance(fp.get("cpu"), dict) else {}
            model = cpu.get("model") or fp.get("cpu_model") or "?"
            cores = cpu.get("logical_cpus") or fp.get("cores") or "?"
            kind = "SIMULATED" if i.get("simulated") else "real"
            click.echo(f"{p.client.name}: {kind} backend {i.get('backend')} v{i.get('version')}, {model}, "
                       f"{cores} CPUs, plans up to {i.get('max_threads')} threads")
            click.echo(f"  fingerprint: {_fingerprint_line(fp)}")
            schema = i.get("schema", [])
            avail = [m["name"] for m in schema if m.get("availability") == "available"]
            click.echo(f"  metrics: {len(avail)} of {len(schema)} available")
            for m in schema:
                if m.get("availability") != "available":
                    click.echo(f"    {m['name']}: {m['availability']} ({m.get('reason', '')})")
            cal = i.get("calibration") or {}
            peaks = cal.get("peaks", cal) if isinstance(cal, dict) else {}
            if peaks:
                shown = ", ".join(f"{k}={v:.4g}" for k, v in peaks.items() if isinstance(v, (int, float)))
                click.echo(f"  calibration: {shown}")
            else:
                click.echo("  calibration: none (run `mimesys-agent calibrate` on the host)")
            if isinstance(cal, dict) and cal.get("host_peaks"):
                reach = cal.get("reach") or {}
                click.echo("  host peaks (reach): " + ", ".join(
                    f"{k}={v:.4g} ({reach[k]:.2f})" if isinstance(reach.get(k), (int, float)) else f"{k}={v:.4g} (-)"
                    for k, v in cal["host_peaks"].items() if isinstance(v, (int, float))))
            cat = i.get("catalog", {})
            click.echo(f"  catalog: {len(cat.get('stressors', []))} stressors, {cat.get('hash', '?')}")
    try:
        fl.check_hosts(probes)
        ok = [p for p in probes if p.ok]
        click.echo(f"{len(ok)} of {len(probes)} agent(s) reachable; all share one hardware fingerprint"
                   + (" (mixing allowed)" if fl.allow_mixed_hosts else ""), err=as_json)
    except FleetError as e:
        click.echo(f"WARNING: {e}", err=True)
        raise SystemExit(ERROR) from None
    down = [p.client.name for p in probes if not p.ok]
    if down:   # the others answered and are shown: a partial failure, not success
        click.echo(f"unreachable: {', '.join(down)}", err=True)
        raise SystemExit(PARTIAL)


def _agent_doc(a) -> dict:
    """One agent of `fleet list --json`."""
    tls = ("sha256" if a.tls_sha256 else "ca_file" if a.ca_file else
           "system" if a.url.startswith("https") else "none")
    return {"name": a.name, "url": a.url, "token_file": str(a.token_file) if a.token_file else None,
            "tls": tls, "tls_sha256": a.tls_sha256.hex() if a.tls_sha256 else None,
            "ca_file": str(a.ca_file) if a.ca_file else None, "allow_plain_http": a.allow_plain_http}


def _fingerprint_line(fp: dict) -> str:
    """A one-line summary of a host fingerprint (real agents' sections or the simulated host's)."""
    def size(b):
        return f"{b / 2**30:.1f} GiB" if b and b >= 2**30 else (f"{b / 2**20:.0f} MiB" if b else "?")
    cpu = fp.get("cpu") if isinstance(fp.get("cpu"), dict) else {}
    parts = []
    if cpu:
        parts.append(f"{cpu.get('arch', '?')} {cpu.get('vendor', '')} {cpu.get('model', '?')}, "
                     f"{cpu.get('physical_cores')} cores x {cpu.get('threads_per_core')} threads, "
                     f"{cpu.get('sockets')} socket(s){', VM' if cpu.get('hypervisor') else ''}")
    elif fp.get("cpu_model"):
        parts.append(f"{fp['cpu_model']}, {fp.get('cores')} cores")
    if fp.get("llc_B"):
        parts.append(f"LLC {size(fp['llc_B'])}")
    mem = fp.get("memory", {}).get("total_B") if isinstance(fp.get("memory"), dict) else fp.get("memory_B")
    if mem:
        parts.append(f"memory {size(mem)}")
    disks = fp.get("disks") or []
    if disks:
        parts.append("disks " + ", ".join(d.get("name", "?") + (" (rotational)" if d.get("rotational") else "")
                                          for d in disks))
    nics = fp.get("nics") or []
    if nics:
        parts.append("NICs " + ", ".join(n.get("name", "?") for n in nics))
    kernel = fp.get("kernel")
    if isinstance(kernel, dict):
        parts.append(f"kernel {kernel.get('release')}")
    pmu = fp.get("pmu")
    if isinstance(pmu, dict):
        hw = pmu.get("hardware_events")
        parts.append("hardware PMU " + ("available" if hw == "available" else "unavailable"))
    elif isinstance(pmu, bool):
        parts.append("PMU " + ("simulated" if pmu else "none"))
    return "; ".join(parts) or "(empty)"
