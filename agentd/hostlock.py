"""One run at a time per host, not just per agent.

Two agents on one machine (a packaged one and a developer's, or two configs) would run their
stressors on the same CPUs and each measure the other's contention. Every host-backend run
holds an exclusive flock on one well-known file for its whole duration; the kernel drops the
lock when the holder dies, however it dies, so there is nothing to clean up after a SIGKILL.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

from .errors import HostBusy

DEFAULT_LOCK = Path("/run/mimesys/run.lock")


@contextlib.contextmanager
def host_run_lock(path: Path = DEFAULT_LOCK, *, owner: str = ""):
    """Hold the host's run lock, or raise Conflict naming who holds it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 200, 0).decode(errors="replace").strip() or "another process"
            raise HostBusy(f"this host is already executing a mimesys run ({holder}; lock {path}); "
                           f"one run at a time per host keeps measurements honest") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} {owner}".strip().encode() + b"\n", 0)
        try:
            yield
        finally:
            os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
