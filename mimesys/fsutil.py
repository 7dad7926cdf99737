"""Local files written safely: the one atomic-write helper, and opening paths that another
user may control.

Atomic write: a unique temporary name in the target's directory (O_EXCL, so a symlink or a
file planted at a fixed `.tmp` name by the directory's owner is never followed or reused),
written through the descriptor that created it (writers that need a path get
/proc/self/fd/N, which cannot be redirected), fsync of the file, a check that the name still
is that file, rename into place, fsync of the directory. A crash leaves either the old file
or the new one, never a torn one, and never writes through someone else's link. Every file
the agent, `replay`, `calibrate`, `record`, the textfile writer and the controller write
goes through here (or staged_dir for a directory).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from pathlib import Path
from typing import Callable, Iterator

from .errors import ValidationError


def fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):   # some filesystems refuse O_RDONLY fsync on directories
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def create_temp_beside(path: Path | str, *, mode: int = 0o644, exact_mode: bool = False) -> tuple[int, Path]:
    """(fd, name) of a new, empty temporary file next to `path` (O_EXCL, O_NOFOLLOW: never a
    file or link someone planted). The caller owns fd. `mode` is filtered by the umask unless
    `exact_mode` (a file another user must read whatever our umask, e.g. node_exporter's)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    if exact_mode:
        os.fchmod(fd, mode)      # on the descriptor: never a chmod of whatever the name is now
    return fd, tmp


def fd_path(fd: int, fallback: Path) -> Path:
    """A name that opens exactly the file `fd` refers to: /proc/self/fd/N on Linux. Writers that
    want a path (h5py, csv, savefig) reach our inode through it even if the directory's owner
    replaces the temporary name with a link meanwhile."""
    p = Path(f"/proc/self/fd/{fd}")
    return p if p.exists() else fallback


def replace_checked(fd: int, tmp: Path, path: Path) -> None:
    """Rename `tmp` (the file `fd` is open on) over `path`, after checking the name still is
    that file, then fsync the directory. Someone who swapped the name gets an error, not our
    rename of their file."""
    st, now = os.fstat(fd), os.lstat(tmp)
    if (st.st_dev, st.st_ino) != (now.st_dev, now.st_ino):
        raise ValidationError(f"{str(tmp)!r} was replaced while it was written; {str(path)!r} left unchanged")
    os.replace(tmp, path)
    fsync_dir(path.parent)


@contextlib.contextmanager
def atomic_path(path: Path | str, *, mode: int = 0o644) -> Iterator[Path]:
    """Yield a path to a fresh temporary file next to `path` (named by its descriptor, see
    fd_path); on success it is fsynced and renamed over `path` (and the directory fsynced);
    on failure it is removed."""
    path = Path(path)
    fd, tmp = create_temp_beside(path, mode=mode)
    try:
        yield fd_path(fd, tmp)
        os.fsync(fd)
        replace_checked(fd, tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            st, now = os.fstat(fd), os.lstat(tmp)
            if (st.st_dev, st.st_ino) == (now.st_dev, now.st_ino):   # ours: remove it, not a substitute
                os.unlink(tmp)
        raise
    finally:
        os.close(fd)


@contextlib.contextmanager
def staged_dir(out_dir: Path | str) -> Iterator[Path]:
    """Yield a fresh hidden directory next to `out_dir` to fill; on success it replaces
    `out_dir` (whatever was there is removed first), on failure it is removed. Readers see the
    old directory or the complete new one, never a half-written one."""
    import shutil
    import tempfile
    out_dir = Path(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    try:
        yield tmp
        if out_dir.exists():
            shutil.rmtree(out_dir)
        os.replace(tmp, out_dir)
        fsync_dir(out_dir.parent)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def atomic_write_bytes(path: Path | str, data: bytes, *, mode: int = 0o644, exact_mode: bool = False) -> None:
    path = Path(path)
    fd, tmp = create_temp_beside(path, mode=mode, exact_mode=exact_mode)
    try:
        view = memoryview(data)
        while view:                              # through our descriptor: no name is reopened
            view = view[os.write(fd, view):]
        os.fsync(fd)
        replace_checked(fd, tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    finally:
        os.close(fd)


def atomic_write_text(path: Path | str, text: str, *, mode: int = 0o644) -> None:
    atomic_write_bytes(path, text.encode(), mode=mode)


def atomic_write_with(path: Path | str, write: Callable[[Path], None], *, mode: int = 0o644) -> None:
    """`write(tmp)` fills the temporary file (e.g. a CSV or PNG writer that wants a path; the
    path has no suffix: tell a writer that guesses the format from it, e.g. savefig(format=))."""
    with atomic_path(path, mode=mode) as tmp:
        write(tmp)


def read_secret_file(path: Path | str, what: str, *, max_bytes: int = 1 << 16) -> bytes:
    """A token or private key: checked on the opened file (no window between check and read):
    a regular file, owned by this user or root, with no access at all for other users. A
    world-readable secret is already disclosed; a file another user owns or may write is not
    ours to trust."""
    path = Path(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOCTTY)
    except OSError as e:
        raise ValidationError(f"{what} {str(path)!r}: cannot read: {e.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ValidationError(f"{what} {str(path)!r}: not a regular file")
        if st.st_uid not in (0, os.geteuid()):
            raise ValidationError(f"{what} {str(path)!r}: owned by uid {st.st_uid}, not by this user or root")
        if st.st_mode & 0o007:
            raise ValidationError(f"{what} {str(path)!r} is accessible to other users (mode "
                                  f"{stat.S_IMODE(st.st_mode):04o}; world-readable or -writable); chmod 0600 it")
        if st.st_size > max_bytes:
            raise ValidationError(f"{what} {str(path)!r}: {st.st_size} bytes; a secret file is at most {max_bytes}")
        return os.read(fd, max_bytes + 1)
    finally:
        os.close(fd)
