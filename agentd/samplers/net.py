"""Network throughput per interface from netlink (pyroute2), loopback separately.

Counters come from one RTM_GETSTATS dump with only IFLA_STATS_LINK_64 requested (the
kernel's 64-bit rtnl_link_stats64). It is the same data ``ip -s link`` shows, but about 5×
cheaper to fetch and parse than a full RTM_GETLINK dump (0.47 ms vs 2.3 ms for 4 links on
the development VM). The netlink socket is opened once at probe time and kept.

Which interfaces: those that are up (IFF_UP) at probe time; the list is fixed then (an
interface created later is not reported; one removed later reads NaN). Interfaces that are
administratively down carry no traffic and would only add constant-zero columns.
Loopback (IFF_LOOPBACK) is reported only under its own name, ``net.lo.*``, never in the
totals. ``net.rx_Bps``, ``net.tx_Bps``, ``net.rx_pps``, ``net.tx_pps`` sum the physical
NICs (those with a /sys/class/net/<if>/device link): bridges, veths, tunnels and VLANs carry
the same bytes a second time. A host with no physical NIC (a container's netns) sums every
up non-loopback interface instead. ``interfaces = [...]`` picks an explicit list (loopback
still kept out of the totals).

Metrics: ``net.<if>.rx_Bps``, ``tx_Bps``, ``rx_pps``, ``tx_pps`` and the four totals.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..metrics import Availability
from .base import NoData, Raw, Sampler
from .registry import register

IFF_UP = 0x1
TOTALS_KEY = "/totals"  # raw key listing the interfaces in the totals ("/" is never in a name)
IFF_LOOPBACK = 0x8
IFLA_STATS_FILTER_LINK_64 = 1 << 0  # IFLA_STATS_FILTER_BIT(IFLA_STATS_LINK_64)
_KINDS = (("rx_Bps", "B/s", "rx_bytes"), ("tx_Bps", "B/s", "tx_bytes"),
          ("rx_pps", "1/s", "rx_packets"), ("tx_pps", "1/s", "tx_packets"))


@dataclass(frozen=True)
class NetOptions:
    interfaces: tuple[str, ...] | None = None  # explicit interface names; None = every up interface


class NetSampler(Sampler):
    name = "net"
    Options = NetOptions

    def probe(self):
        try:
            from pyroute2 import IPRoute
            self._ipr = IPRoute()
            links = self._ipr.get_links()
        except Exception as e:  # no netlink (seccomp, odd sandbox) or no pyroute2
            reason = f"netlink RTM_GETLINK failed: {e}"
            av = Availability.PERMISSION_DENIED if isinstance(e, PermissionError) else Availability.UNSUPPORTED
            return [self.unavailable(f"net.{k}", u, reason, av) for k, u, _ in _KINDS]
        by_name = {}
        for msg in links:
            by_name[msg.get_attr("IFLA_IFNAME")] = (msg["index"], msg["flags"])
        if self.options.interfaces is not None:
            chosen = [n for n in self.options.interfaces if n in by_name]
            missing = [n for n in self.options.interfaces if n not in by_name]
        else:
            chosen = [n for n, (_, flags) in by_name.items() if flags & IFF_UP]
            missing = []
        loopback = {n for n in chosen if by_name[n][1] & IFF_LOOPBACK}
        others = [n for n in chosen if n not in loopback]
        physical = [n for n in others if self.hp.s(f"class/net/{n}/device").exists()]
        self._total_over = tuple(sorted(physical or others))
        self._index = {by_name[n][0]: n for n in chosen}
        specs = []
        if others:
            specs += [self.spec(f"net.{k}", u) for k, u, _ in _KINDS]
        else:
            specs += [self.unavailable(f"net.{k}", u, "no non-loopback interface is up") for k, u, _ in _KINDS]
        for n in sorted(chosen, key=lambda n: (n not in loopback, n)):
            specs += [self.spec(f"net.{n}.{k}", u) for k, u, _ in _KINDS]
        for n in missing:
            specs += [self.unavailable(f"net.{n}.{k}", u, f"no interface {n!r}") for k, u, _ in _KINDS]
        return specs

    def read(self) -> Raw:
        raw: dict = {}
        for msg in self._ipr.stats("dump", filter_mask=IFLA_STATS_FILTER_LINK_64):
            name = self._index.get(msg["ifindex"])
            if name is None:
                continue
            s = msg.get_attr("IFLA_STATS_LINK_64")
            if s is not None:
                raw[name] = (s["rx_bytes"], s["tx_bytes"], s["rx_packets"], s["tx_packets"])
        if not raw:
            raise NoData("none of the probed interfaces is present")
        raw[TOTALS_KEY] = self._total_over
        return raw

    @staticmethod
    def derive(prev: Raw, cur: Raw, elapsed_s: float) -> dict[str, float]:
        out: dict[str, float] = {}
        total_over = set(cur.get(TOTALS_KEY, ()))
        totals = [0.0, 0.0, 0.0, 0.0]
        any_total = False
        for name, c in cur.items():
            p = prev.get(name)
            if name == TOTALS_KEY or p is None:
                continue
            d = [c[i] - p[i] for i in range(4)]
            if min(d) < 0:
                continue  # counters reset (interface re-created)
            for (k, _, _), v in zip(_KINDS, d):
                out[f"net.{name}.{k}"] = v / elapsed_s
            if name in total_over:
                any_total = True
                for i in range(4):
                    totals[i] += d[i] / elapsed_s
        if any_total:
            for (k, _, _), v in zip(_KINDS, totals):
                out[f"net.{k}"] = v
        return out

    def close(self):
        ipr = getattr(self, "_ipr", None)
        if ipr is not None:
            ipr.close()
            self._ipr = None


register(NetSampler)
