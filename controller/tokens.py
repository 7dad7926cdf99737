"""Where every controller command finds an agent's bearer token: ONE lookup order.

    1. --token-file FILE on the command line (applies to the agent the command talks to)
    2. the fleet file entry's token_file (relative to the fleet file; it must lie in the fleet
       file's directory or in the operator's config directory, config_dir())
    3. $MIMESYS_TOKEN (the token itself)
    4. $MIMESYS_TOKEN_FILE (a file holding it)
    5. /etc/mimesys/token, the local agent's own token, when this user can read it

Sources 3-5 are ambient: nothing in them says which host the token is for. They serve an
agent the operator named on the command line (the pre-fleet `--agent URL` spelling) and a
fleet entry whose URL is a loopback address (this machine's own agent). A fleet entry for any
other host that names no token_file is an error: the fleet file alone chose that host, and
it must not receive the operator's ambient token silently (issue 22).

The first source that is set is used; one that is set but unreadable or empty is an error
naming it (a later source is not tried: a typo must not silently send another token). A token
file is read as the agent reads its own (mimesys.fsutil.read_secret_file): a regular file owned
by this user or root, with no access for other users — a world-readable token is already
disclosed, and one another user may write is not this user's to send.

A fleet file decides where tokens go, and one may be handed over (CAMPAIGN/fleet.toml): so
its token_file may not name a file elsewhere — not an absolute path outside those two
directories, not a `..` or a symlink out of them (issue 41) — or any one-line 0600 secret of
the operator would be sent to the URL the file names. A token file elsewhere is named on the
command line.

A token about to travel over plain http:// to a host that is not loopback (anyone on the path
can read it) is refused unless the command line says --allow-plain-http; then it is announced
on stderr, once per agent URL. A file cannot allow it: `allow_plain_http = true` in a fleet
entry grants nothing since issue 41.
"""

from __future__ import annotations

import ipaddress
import os
import sys
from pathlib import Path
from urllib.parse import urlsplit

from mimesys.errors import ConfigError

LOCAL_TOKEN = Path("/etc/mimesys/token")
ORDER = ("--token-file", "the fleet entry's token_file", "$MIMESYS_TOKEN", "$MIMESYS_TOKEN_FILE", str(LOCAL_TOKEN))


def config_dir(env: dict | None = None) -> Path:
    """The operator's config directory: $XDG_CONFIG_HOME/mimesys, else ~/.config/mimesys."""
    env = os.environ if env is None else env
    base = env.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "mimesys"


def confined_token_file(fleet_file: Path, name: str, where: str) -> Path:
    """A fleet entry's token_file as a path, when it lies (symlinks resolved) in the fleet file's
    directory or in config_dir(); else ConfigError."""
    raw = Path(name).expanduser()
    path = raw if raw.is_absolute() else fleet_file.parent / raw
    real = Path(os.path.realpath(path))
    homes = (Path(os.path.realpath(fleet_file.parent)), Path(os.path.realpath(config_dir())))
    if not any(h in real.parents for h in homes):
        raise ConfigError(f"{where}: token_file {name} is outside the fleet file's directory ({homes[0]}) "
                          f"and {homes[1]}; a fleet file may only name token files there (a token file "
                          f"elsewhere goes on the command line: --token-file)")
    return path


def is_loopback_url(url: str) -> bool:
    """True when `url`'s host is this machine by definition: `localhost`, 127.0.0.0/8 or ::1.
    Other names are not resolved (what a name resolves to is not what the operator wrote), and
    `*.localhost` is one of them: only a resolver's promise makes it loopback (issue 41)."""
    try:
        host = urlsplit(url).hostname or ""
    except ValueError:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def agent_token(agent: str, *, explicit: Path | str | None = None, fleet_entry: Path | str | None = None,
                fleet_url: str | None = None, env: dict | None = None, local: Path = LOCAL_TOKEN) -> str:
    """The token for `agent` (a name or URL, for messages) from the first source that is set.

    `fleet_url`: the agent comes from a fleet file entry with this URL; when the entry names
    no token_file and the URL is not loopback, the ambient sources are not consulted."""
    env = os.environ if env is None else env
    if explicit is not None:
        return _read(Path(explicit), agent, "--token-file")
    if fleet_entry is not None:
        return _read(Path(fleet_entry), agent, "token_file (fleet file)")
    if fleet_url is not None and not is_loopback_url(fleet_url):
        raise ConfigError(f"agent {agent}: its fleet entry names no token_file, and {fleet_url} is not a "
                          f"loopback address; set token_file in the fleet file (or pass --token-file). "
                          f"$MIMESYS_TOKEN, $MIMESYS_TOKEN_FILE and {LOCAL_TOKEN} are sent only to loopback "
                          f"agents and to an --agent URL given on the command line")
    if env.get("MIMESYS_TOKEN", "").strip():
        return env["MIMESYS_TOKEN"].strip()
    if env.get("MIMESYS_TOKEN_FILE"):
        return _read(Path(env["MIMESYS_TOKEN_FILE"]), agent, "$MIMESYS_TOKEN_FILE")
    if os.access(local, os.R_OK):
        return _read(local, agent, str(local))
    raise ConfigError(f"agent {agent}: no token; looked in {', '.join(ORDER)} (in that order)")


_warned_plain_http: set[str] = set()


def check_plain_http(agent: str, url: str, *, allowed: bool, stream=None) -> None:
    """A bearer token is about to go to `url`: over plain HTTP to a host that is not loopback it
    is refused (ConfigError) unless `allowed` (--allow-plain-http on the command line), and then
    said once per URL on stderr."""
    if not url.startswith("http://") or is_loopback_url(url):
        return
    if not allowed:
        raise ConfigError(f"agent {agent}: its bearer token would go over plain HTTP to {url}, readable by anyone "
                          f"on the path; use https:// (mimesys-agent tls init, then tls_sha256 in the fleet file), "
                          f"or pass --allow-plain-http on the command line (a fleet file cannot allow it)")
    if url in _warned_plain_http:
        return
    _warned_plain_http.add(url)
    print(f"mimesys: WARNING: agent {agent}: its bearer token goes over plain HTTP to {url} "
          f"(--allow-plain-http), readable by anyone on the path", file=stream or sys.stderr, flush=True)


def _read(path: Path, agent: str, source: str) -> str:
    from mimesys.errors import ValidationError
    from mimesys.fsutil import read_secret_file
    try:
        tok = read_secret_file(path, source).decode("utf-8", "replace").strip()
    except ValidationError as e:
        raise ConfigError(f"agent {agent}: {e}") from None
    if not tok:
        raise ConfigError(f"agent {agent}: {source} {path} is empty")
    return tok
