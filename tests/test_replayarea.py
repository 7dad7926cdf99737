"""The offline replay's scratch directory (agentd/replayarea.py): a random 0700 name, and an area
no one else can swap it in."""

import os
import stat
from types import SimpleNamespace

import pytest

from agentd.replayarea import check_area, private_scratch
from mimesys.errors import ConfigError


def test_each_replay_gets_its_own_random_private_directory(tmp_path):
    agent = SimpleNamespace(replay_dir=tmp_path / "replay", scratch_dir=tmp_path / "scratch")
    a, b = private_scratch(agent), private_scratch(agent)
    assert a != b and a.parent == b.parent == tmp_path / "replay"
    assert a.name.startswith("replay-") and not a.name.endswith(str(os.getpid()))
    assert stat.S_IMODE(a.stat().st_mode) == 0o700


def test_an_area_others_could_swap_a_directory_in_is_refused(tmp_path):
    area = tmp_path / "area"
    area.mkdir()
    area.chmod(0o2770)                                   # the package's area before the sticky bit
    with pytest.raises(ConfigError, match="sticky"):
        check_area(area, root=True)
    check_area(area, root=False)                         # a user's own group-writable area (umask 002)
    area.chmod(0o3770)
    check_area(area, root=True)                          # sticky: members cannot rename root's directory
    area.chmod(0o777)
    with pytest.raises(ConfigError, match="sticky"):
        check_area(area, root=False)
    link = tmp_path / "link"
    link.symlink_to(area)
    with pytest.raises(ConfigError, match="symlink"):
        check_area(link)
