"""Where an offline replay (or run-plan) keeps its IO stressors' files: a private 0700
directory in the replay area, agent.replay_dir, by default beside the agent's scratch
directory. Never the agent's own scratch directory: the daemon empties that when it starts,
under a replay that might be using it. On a packaged host the area is /var/lib/mimesys/replay,
mode 3770, group mimesys (tmpfiles.d), so members of that group can replay without root.

The directory's name is drawn at random (mkdtemp, created 0700 in one step): a predictable
`replay-<pid>` could be planted by a group member before root's replay made it. And the area
must carry the sticky bit when its group or others may write it: without it a member can
rename root's directory away and put a symlink in its place, and root's runner writes
through it."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

from mimesys.errors import ConfigError


def replay_area(agent) -> Path:
    return agent.replay_dir or agent.scratch_dir.parent / "replay"


def private_scratch(agent) -> Path:
    """Create and return this process's own directory in the replay area (the caller removes it)."""
    area = replay_area(agent)
    try:
        area.mkdir(parents=True, exist_ok=True)
        check_area(area)
        return Path(tempfile.mkdtemp(prefix="replay-", dir=area))
    except PermissionError:
        raise ConfigError(f"cannot create the replay's scratch directory in {area}: permission denied. On a "
                          f"packaged host members of group mimesys may replay (adduser $USER mimesys, then log in "
                          f"again); or set agent.replay_dir in a config of your own (--config)") from None


def check_area(area: Path, *, root: bool | None = None) -> None:
    """Refuse an area others could swap a replay's directory in: a symlink, or writable by
    others (or, for root, by its group: the packaged area's group is every replaying member)
    without the sticky bit. A user's own group-writable area (umask 002) stays theirs."""
    root = os.geteuid() == 0 if root is None else root
    st = os.lstat(area)
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise ConfigError(f"the replay area {area} is not a directory (a symlink or a file): refusing to replay there")
    shared = stat.S_IWOTH | (stat.S_IWGRP if root else 0)
    if st.st_mode & shared and not st.st_mode & stat.S_ISVTX:
        raise ConfigError(f"the replay area {area} is writable by its group or others without the sticky bit: a "
                          f"member could swap a replay's directory for a symlink. Run `chmod +t {area}` "
                          f"(the package makes it 3770)")
