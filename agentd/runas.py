"""`replay --run-as USER[:GROUP]`: the command wrapped by a replay runs as an unprivileged
user, while the replay itself (the runner, the samplers and their capabilities) keeps the
privileges it was started with. Resolved and checked before anything runs.

The command is started in a session of its own (no controlling terminal: with root's terminal a
process of the user could TIOCSTI keystrokes into root's shell after the replay exits), with
stdin from /dev/null unless asked, and with an environment built from an allow-list: root's
secrets (MIMESYS_TOKEN, SSH_AUTH_SOCK, KRB5CCNAME, SUDO_*) never reach it."""

from __future__ import annotations

import grp
import os
import pwd
import signal
import subprocess
from dataclasses import dataclass

from mimesys.errors import ValidationError


@dataclass(frozen=True)
class RunAs:
    user: str
    uid: int
    gid: int
    groups: tuple[int, ...]
    home: str
    shell: str = "/bin/sh"

    def subprocess_kw(self, *, stdin: bool = False) -> dict:
        """Keyword arguments for subprocess/asyncio.create_subprocess_exec: the user's ids, a new
        session, and stdin from /dev/null unless `stdin` (the caller's is passed on)."""
        return {"user": self.uid, "group": self.gid, "extra_groups": list(self.groups),
                "start_new_session": True, **({} if stdin else {"stdin": subprocess.DEVNULL})}

    def env(self, base: dict[str, str]) -> dict[str, str]:
        """The command's environment: only the allow-listed variables of the caller's, with the
        identity variables of the target user (a benchmark writing to $HOME must not write into root's)."""
        kept = {k: v for k, v in base.items() if k in ENV_KEPT or k.startswith("LC_")}
        return {**kept, "HOME": self.home, "USER": self.user, "LOGNAME": self.user, "SHELL": self.shell}


# What the command may inherit from the caller's environment (and LC_*); everything else is dropped.
ENV_KEPT = frozenset({"PATH", "LANG", "TERM"})


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
    return RunAs(user=pw.pw_name, uid=pw.pw_uid, gid=gid, groups=groups, home=pw.pw_dir,
                 shell=pw.pw_shell or "/bin/sh")


def interrupt(proc) -> None:
    """Pass a Ctrl-C on to the wrapped command. One started in its own session (--run-as) is out
    of the terminal's reach, so its whole process group gets the SIGINT, as a Ctrl-C would."""
    if proc.returncode is not None:
        return
    try:
        if os.getpgid(proc.pid) == proc.pid:
            os.killpg(proc.pid, signal.SIGINT)
            return
    except ProcessLookupError:
        return
    proc.send_signal(signal.SIGINT)
