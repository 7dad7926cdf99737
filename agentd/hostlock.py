"""One run at a time per host, not just per agent.

Two agents on one machine (a packaged one and a developer's, or two configs) would run their
stressors on the same CPUs and each measure the other's contention. Every host-backend run
holds an exclusive flock on one well-known file for its whole duration; the kernel drops the
lock when the holder dies, however it dies, so there is nothing to clean up after a SIGKILL.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
from pathlib import Path

from mimesys.errors import HostBusy, ValidationError
from mimesys.terminal import printable

DEFAULT_LOCK = Path("/run/mimesys/run.lock")


def _open_lock(path: Path) -> int:
    """Open the lock file without following a link, and check it before writing to it: root
    (replay, calibrate) opens a file in a directory the `mimesys` user may write, so a planted
    symlink or hard link to /etc/shadow must not be truncated. The file must be a regular file
    with one link, owned by root, by us, or by the directory's owner."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY,
                     0o660)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise ValidationError(f"run lock {path} is a symbolic link; refusing to follow it") from None
        if e.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            raise ValidationError(f"run lock {path}: cannot open it ({os.strerror(e.errno)}); on a packaged host "
                                  f"it is root's file of group mimesys (systemd-tmpfiles --create makes it): "
                                  f"run as root or a member of group mimesys") from None
        raise
    try:
        st = os.fstat(fd)
        dir_owner = os.stat(path.parent).st_uid
        if not stat.S_ISREG(st.st_mode):
            raise ValidationError(f"run lock {path}: not a regular file; refusing to use it")
        if st.st_nlink != 1:
            raise ValidationError(f"run lock {path}: has {st.st_nlink} hard links; refusing to write to it "
                                  f"(remove it: it is recreated)")
        if st.st_uid not in (0, os.geteuid(), dir_owner):
            raise ValidationError(f"run lock {path}: owned by uid {st.st_uid}, not root, this user or the "
                                  f"directory's owner; refusing to write to it")
    except BaseException:
        os.close(fd)
        raise
    return fd


@contextlib.contextmanager
def host_run_lock(path: Path = DEFAULT_LOCK, *, owner: str = ""):
    """Hold the host's run lock, or raise Conflict naming who holds it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = _open_lock(path)
    try:
        # Group-writable whoever made it (the unit's UMask=0077 would leave 0600): members of the
        # lock's group (mimesys on a packaged host, tmpfiles.d) take the same lock for offline
        # replays. Others cannot open it at all, so cannot hold it either.
        st = os.fstat(fd)
        if st.st_uid == os.geteuid() and (st.st_mode & 0o777) != 0o660:
            os.fchmod(fd, 0o660)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            # Written by whoever holds it (any member of the lock's group): shown, never trusted.
            holder = printable(os.pread(fd, 200, 0).decode(errors="replace").strip()) or "another process"
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
