"""The agent's own connections are taken out of the network figures (agentd/samplers/ownsockets.py):
the kernel's per-connection counters read over NETLINK_SOCK_DIAG, and the loopback and NIC
figures with them subtracted."""

import socket
import struct

import pytest

from agentd.samplers import ownsockets
from agentd.samplers.net import LOOPBACK_KEY, OWN_KEY, TOTALS_KEY, NetSampler


def _listener():
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    return srv


def test_the_kernel_counts_what_a_connection_on_our_port_carried():
    try:
        diag = ownsockets.DiagSocket()
    except OSError as e:
        pytest.skip(f"no NETLINK_SOCK_DIAG here: {e}")
    srv = _listener()
    port = srv.getsockname()[1]
    cli = socket.create_connection(("127.0.0.1", port))
    conn, _ = srv.accept()
    try:
        before = diag.dump(frozenset({port}))
        assert len(before) == 1 and before[0][1] == 1           # one server-side socket, on loopback
        cli.sendall(b"x" * 100_000)
        got = 0
        while got < 100_000:
            got += len(conn.recv(65536))
        conn.sendall(b"y" * 5000)
        assert len(cli.recv(8192)) > 0
        after = diag.dump(frozenset({port}))
        moved = ownsockets.own_traffic(before, after)
        lo_bytes, lo_packets = moved["lo"][:2]
        # payload both ways, plus 66 bytes of headers per segment (acknowledgements included)
        assert 105_000 <= lo_bytes <= 105_000 + 66 * lo_packets + 1
        assert lo_packets >= 3 and moved["nic"] == (0.0, 0.0, 0.0, 0.0)
        # the client's end has another local port: asked for it, only that socket comes back
        client_side = diag.dump(frozenset({cli.getsockname()[1]}))
        assert len(client_side) == 1 and client_side[0][0] != before[0][0]
        assert diag.dump(frozenset()) == []
    finally:
        for s in (cli, conn, srv):
            s.close()
        diag.close()


def test_derive_takes_the_agents_stream_out_of_loopback_and_a_remote_clients_out_of_the_totals():
    # interfaces: (rx_bytes, tx_bytes, rx_packets, tx_packets)
    prev = {"lo": (1000, 1000, 10, 10), "eth0": (5000, 5000, 50, 50), TOTALS_KEY: ("eth0",), LOOPBACK_KEY: ("lo",),
            OWN_KEY: [[1, 1, 66, 0, 0, 0, 0], [2, 0, 66, 0, 0, 0, 0]]}
    # the stream: 2000 B out in 2 segments, 1 ACK in, on loopback; a remote client read 10,000 B
    cur = {"lo": (1000 + 2198 + 300, 1000 + 2198 + 300, 10 + 3 + 2, 10 + 3 + 2), "eth0": (5000 + 66, 5000 + 10_132, 51, 52),
           TOTALS_KEY: ("eth0",), LOOPBACK_KEY: ("lo",),
           OWN_KEY: [[1, 1, 66, 2000, 0, 2, 1], [2, 0, 66, 10_000, 0, 2, 1]]}
    out = NetSampler.derive(prev, cur, 1.0)
    assert out["net.lo.tx_Bps"] == 300 and out["net.lo.rx_Bps"] == 300          # only the workload's
    assert out["net.lo.tx_pps"] == 2 and out["net.lo.rx_pps"] == 2
    assert out["net.tx_Bps"] == 0 and out["net.rx_Bps"] == 0 and out["net.tx_pps"] == 0
    assert out["net.eth0.tx_Bps"] == 10_132                                       # the interface itself is as read
    # without the agent's counters (not serving, or no sock_diag) nothing is taken out
    plain = NetSampler.derive({k: v for k, v in prev.items() if k != OWN_KEY},
                              {k: v for k, v in cur.items() if k != OWN_KEY}, 1.0)
    assert plain["net.lo.tx_Bps"] == 2498 and plain["net.tx_Bps"] == 10_132


def test_parse_dump_reads_only_our_ports_and_refuses_a_lying_length():
    hdr = struct.Struct("=IHHII")
    body = bytearray(ownsockets.DIAG_MSG_SIZE)
    body[0] = socket.AF_INET
    struct.pack_into("!HH", body, 4, 7433, 50000)
    body[8:12] = bytes([127, 0, 0, 1])
    body[24:28] = bytes([127, 0, 0, 1])
    info = bytearray(160)
    struct.pack_into("=QQII", info, 120, 1234, 567, 8, 9)
    attr = struct.pack("=HH", 4 + len(info), ownsockets.INET_DIAG_INFO) + info
    msg = body + attr
    packet = hdr.pack(hdr.size + len(msg), ownsockets.SOCK_DIAG_BY_FAMILY, 2, 5, 0) + msg
    done = hdr.pack(hdr.size + 4, ownsockets.NLMSG_DONE, 2, 5, 0) + b"\0" * 4
    got, finished = ownsockets.parse_dump(packet + done, frozenset({7433}), seq=5)
    assert finished and got == [[0, 1, 66, 1234, 567, 8, 9]]
    assert ownsockets.parse_dump(packet, frozenset({80}), seq=5)[0] == []
    with pytest.raises(ValueError, match="claims"):
        ownsockets.parse_dump(hdr.pack(4096, 20, 2, 5, 0) + b"\0" * 16, frozenset({7433}))
