"""`python -m agentd.samplers`: probe this host's samplers, print their states, and measure
what sampling costs. Prints ONE JSON line last:

    {"ticks": .., "tick_ms_median": .., "tick_ms_p99": .., "hz1_seconds": ..,
     "hz1_cpu_percent": .., "metrics": .., "available": .., "enabled": [..]}

tick_ms_*: thread CPU time of one read() + derive() in a tight loop (warm caches);
hz1_cpu_percent: process CPU time over hz1_seconds of sampling at 1 Hz, as a percentage of
one core (cold caches, sleeping in between — what the agent pays).
"""

from __future__ import annotations

import json
import resource
import statistics
import sys
import time

import click

from mimesys.hostpaths import HostPaths
from .registry import SamplersConfig, sampler_names
from .samplerset import SamplerSet


def _cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


@click.command()
@click.option("--enable", multiple=True, type=click.Choice(sampler_names()), help="force a sampler on")
@click.option("--disable", multiple=True, type=click.Choice(sampler_names()), help="turn a sampler off")
@click.option("--ticks", default=300, show_default=True, help="tight-loop ticks")
@click.option("--seconds", default=20, show_default=True, help="seconds of 1 Hz sampling")
def main(enable, disable, ticks, seconds):
    cfg = SamplersConfig(enabled={**{n: True for n in enable}, **{n: False for n in disable}})
    with SamplerSet.from_config(cfg, HostPaths.from_env()) as s:
        schema = s.schema()
        for name, st in s.states().items():
            print(f"{name:18s} {st['state']:18s} {st['reason']}", file=sys.stderr)
        prev = s.read()
        costs = []
        for _ in range(ticks):
            c0 = time.thread_time_ns()
            cur = s.read()
            s.derive(prev, cur)
            costs.append((time.thread_time_ns() - c0) / 1e6)
            prev = cur
        costs.sort()
        cpu0, t0 = _cpu_s(), time.monotonic()
        next_tick = t0
        for _ in range(seconds):
            next_tick += 1.0
            time.sleep(max(0.0, next_tick - time.monotonic()))
            cur = s.read()
            s.derive(prev, cur)
            prev = cur
        wall = time.monotonic() - t0
        hz1 = 100.0 * (_cpu_s() - cpu0) / wall if seconds else None
        print(json.dumps({
            "ticks": ticks, "tick_ms_median": round(statistics.median(costs), 3) if costs else None,
            "tick_ms_p99": round(costs[int(0.99 * (len(costs) - 1))], 3) if costs else None,
            "hz1_seconds": seconds, "hz1_cpu_percent": None if hz1 is None else round(hz1, 4),
            "metrics": len(schema), "available": sum(m.available for m in schema),
            "enabled": list(s.states()),
        }))


if __name__ == "__main__":
    main()
