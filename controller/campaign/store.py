"""The campaign's sample store: an append-only, checksummed record log.

File `samples.log`: an 8-byte magic, then records

    u32 little-endian payload length | u32 CRC-32 of the payload | payload (msgpack map)

Guarantee: `append()` returns only after the records are written and fsync'ed (file and,
on creation, its directory); such records are *acknowledged* and survive a crash of the
controller or the machine. A crash during an append can leave a torn tail (a partial or
checksum-failing last record); opening the store truncates exactly that tail and logs
it, so a torn record is never read and the next append starts on a record boundary. A bad
record followed by good ones is not a torn tail but damage: opening refuses, naming the
byte offset. Records are never rewritten.

Records carry a unique `key`; a key seen twice is kept once (the first) and counted in
`duplicates`, so nothing is ever counted twice even if a caller appended twice.
"""

from __future__ import annotations

import fcntl
import logging
import os
import struct
import zlib
from pathlib import Path
from typing import Iterator

import msgpack

from mimesys.fsutil import atomic_write_bytes as _atomic_write_bytes

from mimesys.errors import MimesysError

log = logging.getLogger(__name__)

MAGIC = b"MMSLOG1\n"
_HEAD = struct.Struct("<II")
MAX_RECORD = 1 << 30


class StoreError(MimesysError):
    """The sample store is damaged or unusable; the message names the file and offset."""


class RecordLog:
    """Opened by one process at a time: opening drops a torn tail, which in a second process
    could be the first one's append in flight (acknowledged a moment later). An exclusive
    flock on <log>.lock, held until close(), makes a second opener fail with a clear error."""

    def __init__(self, path: Path | str):
        self.path = Path(path)
        self._lock_fd = self._lock()
        self.records: list[dict] = []
        self.keys: set[str] = set()
        self.duplicates = 0
        self.truncated_bytes = 0
        try:
            self._open()
        except BaseException:
            os.close(self._lock_fd)
            raise

    def _lock(self) -> int:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        lock = self.path.with_name(self.path.name + ".lock")
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 100, 0).decode(errors="replace").strip() or "another process"
            os.close(fd)
            raise StoreError(f"{self.path}: in use by {holder}; one process at a time may open a campaign's "
                             f"sample log (wait for it to finish)") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()}\n".encode(), 0)
        return fd

    def _open(self) -> None:
        new = not self.path.exists()
        if new:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "wb") as f:
                f.write(MAGIC)
                f.flush()
                os.fsync(f.fileno())
            _fsync_dir(self.path.parent)
        data = self.path.read_bytes()
        if data[:len(MAGIC)] != MAGIC:
            if len(data) < len(MAGIC) and MAGIC.startswith(data):
                data = MAGIC  # crashed while creating: an empty store
                self._rewrite_magic()
            else:
                raise StoreError(f"{self.path}: not a mimesys sample log (bad magic {data[:8]!r})")
        off = len(MAGIC)
        good_end = off
        while off < len(data):
            rec, nxt = self._parse_at(data, off)
            if rec is None:
                if self._has_valid_record_after(data, off):
                    raise StoreError(f"{self.path}: record at byte offset {off} is damaged (length or CRC-32 "
                                     f"mismatch) and valid records follow it; refusing to drop them")
                break
            self._accept(rec)
            off = good_end = nxt
        if good_end < len(data):
            self.truncated_bytes = len(data) - good_end
            log.warning("%s: dropped a torn tail of %d bytes (an append interrupted by a crash; "
                        "it was never acknowledged)", self.path, self.truncated_bytes)
            with open(self.path, "r+b") as f:
                f.truncate(good_end)
                f.flush()
                os.fsync(f.fileno())
        self._fh = open(self.path, "ab")

    def _rewrite_magic(self) -> None:
        with open(self.path, "wb") as f:
            f.write(MAGIC)
            f.flush()
            os.fsync(f.fileno())

    @staticmethod
    def _parse_at(data: bytes, off: int) -> tuple[dict | None, int]:
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

    def _has_valid_record_after(self, data: bytes, off: int) -> bool:
        """Is there a parseable record starting anywhere after a damaged one? (scan bounded)"""
        for probe in range(off + 1, min(len(data), off + (1 << 22))):
            rec, _ = self._parse_at(data, probe)
            if rec is not None:
                return True
        return False

    def _accept(self, rec: dict) -> bool:
        key = rec["key"]
        if key in self.keys:
            self.duplicates += 1
            return False
        self.keys.add(key)
        self.records.append(rec)
        return True

    def append(self, records: list[dict]) -> None:
        """Write records and fsync; when this returns they are acknowledged."""
        fresh = [r for r in records if r["key"] not in self.keys]
        if not fresh:
            return
        buf = bytearray()
        for rec in fresh:
            payload = msgpack.packb(rec, use_bin_type=True)
            buf += _HEAD.pack(len(payload), zlib.crc32(payload)) + payload
        self._fh.write(buf)
        self._fh.flush()
        os.fsync(self._fh.fileno())
        for rec in fresh:
            self._accept(rec)

    def __iter__(self) -> Iterator[dict]:
        return iter(self.records)

    def __contains__(self, key: str) -> bool:
        return key in self.keys

    def close(self) -> None:
        if not self._fh.closed:
            self._fh.close()
        if self._lock_fd is not None:
            os.close(self._lock_fd)    # releases the flock
            self._lock_fd = None


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write-then-rename with fsync: readers see the old file or the whole new one."""
    _atomic_write_bytes(path, data)
