"""The bytes of the campaign's sample log, apart from the file that holds them.

File `samples.log`: an 8-byte magic, then records

    u32 little-endian payload length | u32 CRC-32 of the payload | payload (msgpack map)

Each record is a map with a `key`. Pure functions, so a damaged or torn log can be
reasoned about (and tested) as bytes; the store (store.py) owns the file.
"""

from __future__ import annotations

import struct
import zlib

import msgpack

MAGIC = b"MMSLOG1\n"
_HEAD = struct.Struct("<II")
MAX_RECORD = 1 << 30
_PROBE_SPAN = 1 << 22          # how far past a damaged record to look for a valid one


def frame(records: list[dict]) -> bytes:
    """The records as they are appended: each one's head, then its payload."""
    buf = bytearray()
    for rec in records:
        payload = msgpack.packb(rec, use_bin_type=True)
        buf += _HEAD.pack(len(payload), zlib.crc32(payload)) + payload
    return bytes(buf)


def parse_at(data: bytes, off: int) -> tuple[dict | None, int]:
    """The record starting at `off` and the offset after it; (None, off) if none is whole there."""
    if off + _HEAD.size > len(data):
        return None, off
    length, crc = _HEAD.unpack_from(data, off)
    start = off + _HEAD.size
    if length > MAX_RECORD or start + length > len(data):
        return None, off
    payload = data[start:start + length]
    if zlib.crc32(payload) != crc:
        return None, off
    try:
        rec = msgpack.unpackb(payload, raw=False)
    except Exception:
        return None, off
    if not isinstance(rec, dict) or "key" not in rec:
        return None, off
    return rec, start + length


def _valid_record_after(data: bytes, off: int) -> bool:
    """Is there a parseable record starting anywhere after a damaged one? (scan bounded)"""
    for probe in range(off + 1, min(len(data), off + _PROBE_SPAN)):
        rec, _ = parse_at(data, probe)
        if rec is not None:
            return True
    return False


def scan(data: bytes) -> tuple[list[dict], int, int | None]:
    """Read a whole log (magic included) to its last good record: (records, the offset where
    they end, the offset of a bad record that valid ones follow, or None). A bad record with
    nothing valid after it is a torn tail: the records end before it."""
    records: list[dict] = []
    off = good_end = len(MAGIC)
    while off < len(data):
        rec, nxt = parse_at(data, off)
        if rec is None:
            return records, good_end, (off if _valid_record_after(data, off) else None)
        records.append(rec)
        off = good_end = nxt
    return records, good_end, None
