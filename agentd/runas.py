"""`replay --run-as USER[:GROUP]`: the command wrapped by a replay runs as an unprivileged
user, while the replay itself (the runner, the samplers and their capabilities) keeps the
privileges it was started with. Resolved and checked before anything runs."""

from __future__ import annotations

import grp
import os
import pwd
from dataclasses import dataclass

from mimesys.errors import ValidationError


@dataclass(frozen=True)
class RunAs:
    user: str
    uid: int
    gid: int
    groups: tuple[int, ...]
    home: str

    def subprocess_kw(self) -> dict:
        """Keyword arguments for subprocess/asyncio.create_subprocess_exec."""
        return {"user": self.uid, "group": self.gid, "extra_groups": list(self.groups)}

    def env(self, base: dict[str, str]) -> dict[str, str]:
        """The command's environment: the caller's, with the identity variables of the target user
        (a benchmark writing to $HOME must not write into root's)."""
        return {**base, "HOME": self.home, "USER": self.user, "LOGNAME": self.user}


def parse_run_as(spec: str) -> RunAs:
    """USER[:GROUP] (names or numeric ids) -> RunAs; the supplementary groups are the user's."""
    user, _, group = spec.partition(":")
    if not user:
        raise ValidationError(f"--run-as {spec!r}: expected USER[:GROUP]")
    try:
        pw = pwd.getpwuid(int(user)) if user.isdigit() else pwd.getpwnam(user)
    except (KeyError, OverflowError):
        raise ValidationError(f"--run-as {spec!r}: no such user {user!r}") from None
    if group:
        try:
            gid = grp.getgrgid(int(group)).gr_gid if group.isdigit() else grp.getgrnam(group).gr_gid
        except (KeyError, OverflowError):
            raise ValidationError(f"--run-as {spec!r}: no such group {group!r}") from None
    else:
        gid = pw.pw_gid
    groups = tuple(sorted({g.gr_gid for g in grp.getgrall() if pw.pw_name in g.gr_mem} | {gid}))
    if os.geteuid() != 0 and pw.pw_uid != os.geteuid():
        raise ValidationError(f"--run-as {spec!r}: only root can run the command as another user "
                              f"(this replay runs as uid {os.geteuid()})")
    return RunAs(user=pw.pw_name, uid=pw.pw_uid, gid=gid, groups=groups, home=pw.pw_dir)
