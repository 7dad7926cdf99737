"""Where every controller command finds an agent's bearer token: ONE lookup order.

    1. --token-file FILE on the command line (applies to the agent the command talks to)
    2. the fleet file entry's token_file (relative to the fleet file)
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

A token about to travel over plain http:// to a host that is not loopback is announced on
stderr, once per agent URL (anyone on the path can read it); `allow_plain_http = true` in the
agent's fleet entry silences it (controller/fleet/config.py).
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


def is_loopback_url(url: str) -> bool:
    """True when `url`'s host is this machine by definition: localhost or a loopback address.
    (Other names are not resolved: what a name resolves to is not what the operator wrote.)"""
    try:
        host = urlsplit(url).hostname or ""
    except ValueError:
        return False
    if host == "localhost" or host.endswith(".localhost"):
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


def warn_plain_http(agent: str, url: str, *, stream=None) -> bool:
    """Say once per URL (on stderr) that a bearer token will cross the network in clear text.
    True when a warning was written."""
    if not url.startswith("http://") or is_loopback_url(url) or url in _warned_plain_http:
        return False
    _warned_plain_http.add(url)
    print(f"mimesys: WARNING: agent {agent}: its bearer token goes over plain HTTP to {url}, readable by "
          f"anyone on the path; use https:// (mimesys-agent tls init, then tls_sha256 in the fleet file), "
          f"or set allow_plain_http = true in its fleet entry to silence this", file=stream or sys.stderr,
          flush=True)
    return True


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
