"""Where an offline replay (or run-plan) keeps its IO stressors' files: a private 0700
directory in the replay area, agent.replay_dir, by default beside the agent's scratch
directory. Never the agent's own scratch directory: the daemon empties that when it starts,
under a replay that might be using it. On a packaged host the area is /var/lib/mimesys/replay,
mode 2770, group mimesys (tmpfiles.d), so members of that group can replay without root."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from mimesys.errors import ConfigError


def replay_area(agent) -> Path:
    return agent.replay_dir or agent.scratch_dir.parent / "replay"


def private_scratch(agent) -> Path:
    """Create and return this process's own directory in the replay area (the caller removes it)."""
    area = replay_area(agent)
    scratch = area / f"replay-{os.getpid()}"
    try:
        area.mkdir(parents=True, exist_ok=True)
        try:
            scratch.mkdir(mode=0o700)
        except FileExistsError:   # a dead process with our PID left it
            shutil.rmtree(scratch, ignore_errors=True)
            scratch.mkdir(mode=0o700)
    except PermissionError:
        raise ConfigError(f"cannot create the replay's scratch directory {scratch}: permission denied. On a "
                          f"packaged host members of group mimesys may replay (adduser $USER mimesys, then log in "
                          f"again); or set agent.replay_dir in a config of your own (--config)") from None
    return scratch
