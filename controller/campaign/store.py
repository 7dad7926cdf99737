"""The campaign's sample store: an append-only, checksummed record log (the file's
bytes: recordformat.py).

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
from pathlib import Path
from typing import Iterator

from mimesys.fsutil import atomic_write_bytes as _atomic_write_bytes

from mimesys.errors import MimesysError

from .recordformat import MAGIC, frame, scan

log = logging.getLogger(__name__)


class StoreError(MimesysError):
    """The sample store is damaged or unusable; the message names the file and offset."""


class RecordLog:
    """Opened by one process at a time: opening drops a torn tail, which in a second process
    could be the first one's append in flight (acknowledged a moment later). An exclusive
    flock on <log>.lock, held until close(), makes a second opener fail with a clear error."""

    def __init__(self, path: Path | str):
        self.path = Path(path)
        self._lock_fd = _lock(self.path)
        self.records: list[dict] = []
        self.keys: set[str] = set()
        self.duplicates = 0
        self.truncated_bytes = 0
        try:
            self._open()
        except BaseException:
            os.close(self._lock_fd)
            raise

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
        records, good_end, damaged_at = scan(data)
        if damaged_at is not None:
            raise StoreError(f"{self.path}: record at byte offset {damaged_at} is damaged (length or CRC-32 "
                             f"mismatch) and valid records follow it; refusing to drop them")
        for rec in records:
            self._accept(rec)
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
        self._fh.write(frame(fresh))
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


def _lock(path: Path) -> int:
    """An exclusive flock on <log>.lock, naming its holder inside; StoreError if held."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = path.with_name(path.name + ".lock")
    fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 100, 0).decode(errors="replace").strip() or "another process"
        os.close(fd)
        raise StoreError(f"{path}: in use by {holder}; one process at a time may open a campaign's "
                         f"sample log (wait for it to finish)") from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"pid {os.getpid()}\n".encode(), 0)
    return fd


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write-then-rename with fsync: readers see the old file or the whole new one."""
    _atomic_write_bytes(path, data)
