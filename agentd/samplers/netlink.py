"""Walking netlink dump replies: the framing both of the net sampler's dumps share
(RTM_GETSTATS for the interfaces, SOCK_DIAG_BY_FAMILY for the agent's own connections).

`messages(data, seq, what)` checks every header against the bytes it claims, skips other
sequence numbers, raises OSError with the kernel's errno on NLMSG_ERROR and returns the
payload messages as (type, body offset, end offset) and whether NLMSG_DONE was seen;
`attributes(data, start, end)` does the same for the (length, type) attributes inside one,
stopping at the first malformed one. Pure functions of the bytes, tested on packed replies.
"""

from __future__ import annotations

import os
import struct

NLMSG_ERROR, NLMSG_DONE = 2, 3
NLM_F_REQUEST, NLM_F_DUMP = 0x1, 0x300
NLMSGHDR = struct.Struct("=IHHII")        # len, type, flags, seq, pid
_ATTR = struct.Struct("=HH")              # len, type


def align4(n: int) -> int:
    return (n + 3) & ~3


def messages(data, seq: int | None, what: str) -> tuple[list[tuple[int, int, int]], bool]:
    """-> ([(type, body offset, end offset)] of the payload messages of sequence `seq` (any when
    None), done). `what` names the request in errors."""
    out, done = [], False
    off, end = 0, len(data)
    while off + NLMSGHDR.size <= end:
        length, mtype, _flags, mseq, _pid = NLMSGHDR.unpack_from(data, off)
        if length < NLMSGHDR.size or off + length > end:
            raise ValueError(f"netlink message at offset {off} claims {length} bytes, {end - off} left")
        if seq is None or mseq == seq:
            if mtype == NLMSG_DONE:
                done = True
            elif mtype == NLMSG_ERROR:
                if length < NLMSGHDR.size + 4:
                    raise ValueError(f"netlink error message at offset {off} is truncated ({length} bytes)")
                err = -struct.unpack_from("=i", data, off + NLMSGHDR.size)[0]
                if err:
                    raise OSError(err, f"{what}: {os.strerror(err)}")
            else:
                out.append((mtype, off + NLMSGHDR.size, off + length))
        off += align4(length)
    return out, done


def attributes(data, start: int, end: int):
    """Yield (type, payload offset, payload length) of the attributes in data[start:end]."""
    a = start
    while a + _ATTR.size <= end:
        alen, atype = _ATTR.unpack_from(data, a)
        if alen < _ATTR.size or a + alen > end:
            return      # malformed attribute: ignore the rest of this message
        yield atype, a + _ATTR.size, alen - _ATTR.size
        a += align4(alen)
