"""The agent's own TCP traffic, so the network figures it reports show only the workload.

Every byte the agent serves (the monitor stream, a run's trace, /v1 replies) crosses an
interface: on loopback when its client is on the host (the demo, the bench, a local
controller), on the NIC otherwise. Left in, an idle plan replayed through the agent shows
~2 kB/s of loopback where its target had none, and every overlay and "added where the target
was idle" report carries the tool's own stream.

The kernel keeps per-connection counters (tcp_info: bytes_acked, bytes_received, segs_out,
segs_in, since Linux 4.2); one NETLINK_SOCK_DIAG dump per tick (SOCK_DIAG_BY_FAMILY with
INET_DIAG_INFO, IPv4 and IPv6) reads them for every TCP socket whose local port is one the
agent serves on. An interface counts a segment's headers as well as its payload, so each
segment adds HEADER_BYTES (Ethernet 14, IP 20 or 40, TCP 20 + 12 of timestamps, which Linux
negotiates by default): exact for the stream's data segments and ACKs, a few bytes off for a
SYN's options. A connection that opens and closes between two ticks (a short API call) is
missed: its bytes stay in the figures, well under the idle floor (mimesys/activity.py).

`parse_dump` is a pure function of the reply bytes (tested on packed messages); the sampler
keeps the counters per socket cookie and its derive subtracts the differences (net.py).
"""

from __future__ import annotations

import ipaddress
import socket
import struct

from . import netlink

NETLINK_SOCK_DIAG = 4
SOCK_DIAG_BY_FAMILY = 20
NLMSG_DONE = netlink.NLMSG_DONE
INET_DIAG_INFO = 2
TCP_LISTEN = 10
CONNECTED_STATES = 0xFFFFFFFF & ~(1 << TCP_LISTEN)   # a listening socket carries nothing
_REQ_V2 = struct.Struct("=BBBxI48x")                # family, protocol, ext, pad, states, sockid (any)
_DIAG_MSG = struct.Struct("=BBBB")                  # family, state, timer, retrans
_PORTS = struct.Struct("!HH")                       # sport, dport (network order)
_ADDRS = struct.Struct("=16s16sI8s")                # src, dst, if, cookie
DIAG_MSG_SIZE = _DIAG_MSG.size + _PORTS.size + _ADDRS.size + 20   # + expires, rqueue, wqueue, uid, inode
# struct tcp_info (include/uapi/linux/tcp.h): bytes_acked, bytes_received at 120, segs_out, segs_in at 136
_TCP_COUNTERS = struct.Struct("=QQII")
TCP_COUNTERS_AT = 120
HEADER_BYTES = {socket.AF_INET: 14 + 20 + 32, socket.AF_INET6: 14 + 40 + 32}

# One socket's counters as the sampler keeps them (plain lists: raw samples are recorded):
# [cookie, on_loopback (0/1), header bytes per segment, bytes_acked, bytes_received, segs_out, segs_in]
Counters = list


def _address(family: int, raw: bytes):
    addr = ipaddress.ip_address(raw[:4] if family == socket.AF_INET else raw)
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        addr = addr.ipv4_mapped
    return addr


def _on_loopback(family: int, src: bytes, dst: bytes) -> bool:
    """A peer at a loopback address, or at one of the host's own (the same as ours), is
    reached through the loopback interface."""
    peer = _address(family, dst)
    return peer.is_loopback or peer == _address(family, src)


def parse_dump(data, ports: frozenset[int], seq: int | None = None) -> tuple[list[Counters], bool]:
    """Bytes of SOCK_DIAG_BY_FAMILY replies -> (counters of each socket whose local port is in
    `ports`, done). Sockets without tcp_info's counters (a kernel before 4.2) are left out;
    NLMSG_ERROR raises OSError with the kernel's errno."""
    out: list[Counters] = []
    found, done = netlink.messages(data, seq, "SOCK_DIAG_BY_FAMILY")
    for mtype, body, end in found:
        if mtype != SOCK_DIAG_BY_FAMILY or end - body < DIAG_MSG_SIZE:
            continue
        family = _DIAG_MSG.unpack_from(data, body)[0]
        sport, _dport = _PORTS.unpack_from(data, body + _DIAG_MSG.size)
        src, dst, _ifindex, cookie = _ADDRS.unpack_from(data, body + _DIAG_MSG.size + _PORTS.size)
        if sport not in ports or family not in HEADER_BYTES:
            continue
        for atype, at, alen in netlink.attributes(data, body + netlink.align4(DIAG_MSG_SIZE), end):
            if atype == INET_DIAG_INFO and alen >= TCP_COUNTERS_AT + _TCP_COUNTERS.size:
                acked, received, segs_out, segs_in = _TCP_COUNTERS.unpack_from(data, at + TCP_COUNTERS_AT)
                out.append([int.from_bytes(cookie, "little"), int(_on_loopback(family, src, dst)),
                            HEADER_BYTES[family], acked, received, segs_out, segs_in])
    return out, done


class DiagSocket:
    """A NETLINK_SOCK_DIAG socket kept open across ticks."""

    def __init__(self):
        self.sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW | socket.SOCK_CLOEXEC, NETLINK_SOCK_DIAG)
        self.sock.bind((0, 0))
        self.sock.settimeout(1.0)   # the kernel answers a dump at once; never hang a tick
        self.seq = 0
        self.buf = bytearray(1 << 16)

    def dump(self, ports: frozenset[int]) -> list[Counters]:
        out: list[Counters] = []
        for family in (socket.AF_INET, socket.AF_INET6):
            self.seq = (self.seq + 1) & 0xFFFFFFFF
            self.sock.send(netlink.NLMSGHDR.pack(netlink.NLMSGHDR.size + _REQ_V2.size, SOCK_DIAG_BY_FAMILY,
                                                 netlink.NLM_F_REQUEST | netlink.NLM_F_DUMP, self.seq, 0)
                           + _REQ_V2.pack(family, socket.IPPROTO_TCP, 1 << (INET_DIAG_INFO - 1), CONNECTED_STATES))
            view = memoryview(self.buf)
            while True:
                n = self.sock.recv_into(self.buf)
                part, done = parse_dump(view[:n], ports, self.seq)
                out += part
                if done:
                    break
        return out

    def close(self):
        self.sock.close()


def own_traffic(prev: list[Counters], cur: list[Counters]) -> dict[str, tuple[float, float, float, float]]:
    """Counters of two ticks -> {"lo": (bytes, packets, 0, 0), "nic": (tx_bytes, rx_bytes,
    tx_packets, rx_packets)} moved since the previous tick. A socket first seen now counts from
    its start (the agent accepted it since); one gone since is not counted again. On loopback
    every segment crosses the interface once, counted by it both as sent and as received."""
    before = {c[0]: c for c in prev}
    lo_b = lo_p = tx_b = rx_b = tx_p = rx_p = 0.0
    for c in cur:
        p = before.get(c[0])
        d = [c[i] - (p[i] if p is not None else 0) for i in range(3, 7)]
        if min(d) < 0:
            continue   # a reused cookie: skip the tick
        acked, received, segs_out, segs_in = d
        hdr = c[2]
        if c[1]:
            lo_b += acked + received + (segs_out + segs_in) * hdr
            lo_p += segs_out + segs_in
        else:
            tx_b += acked + segs_out * hdr
            rx_b += received + segs_in * hdr
            tx_p += segs_out
            rx_p += segs_in
    return {"lo": (lo_b, lo_p, 0.0, 0.0), "nic": (tx_b, rx_b, tx_p, rx_p)}
