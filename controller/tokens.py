"""Where every controller command finds an agent's bearer token: ONE lookup order.

    1. --token-file FILE on the command line (applies to the agent the command talks to)
    2. the fleet file entry's token_file (relative to the fleet file)
    3. $MIMESYS_TOKEN (the token itself)
    4. $MIMESYS_TOKEN_FILE (a file holding it)
    5. /etc/mimesys/token, the local agent's own token, when this user can read it

The first source that is set is used; one that is set but unreadable or empty is an error
naming it (a later source is not tried: a typo must not silently send another token). A token
file is read as the agent reads its own (agentd.fsutil.read_secret_file): a regular file owned
by this user or root, with no access for other users — a world-readable token is already
disclosed, and one another user may write is not this user's to send.
"""

from __future__ import annotations

import os
from pathlib import Path

from agentd.errors import ConfigError

LOCAL_TOKEN = Path("/etc/mimesys/token")
ORDER = ("--token-file", "the fleet entry's token_file", "$MIMESYS_TOKEN", "$MIMESYS_TOKEN_FILE", str(LOCAL_TOKEN))


def agent_token(agent: str, *, explicit: Path | str | None = None, fleet_entry: Path | str | None = None,
                env: dict | None = None, local: Path = LOCAL_TOKEN) -> str:
    """The token for `agent` (a name or URL, for messages) from the first source that is set."""
    env = os.environ if env is None else env
    if explicit is not None:
        return _read(Path(explicit), agent, "--token-file")
    if fleet_entry is not None:
        return _read(Path(fleet_entry), agent, "token_file (fleet file)")
    if env.get("MIMESYS_TOKEN", "").strip():
        return env["MIMESYS_TOKEN"].strip()
    if env.get("MIMESYS_TOKEN_FILE"):
        return _read(Path(env["MIMESYS_TOKEN_FILE"]), agent, "$MIMESYS_TOKEN_FILE")
    if os.access(local, os.R_OK):
        return _read(local, agent, str(local))
    raise ConfigError(f"agent {agent}: no token; looked in {', '.join(ORDER)} (in that order)")


def _read(path: Path, agent: str, source: str) -> str:
    from agentd.errors import ValidationError
    from agentd.fsutil import read_secret_file
    try:
        tok = read_secret_file(path, source).decode("utf-8", "replace").strip()
    except ValidationError as e:
        raise ConfigError(f"agent {agent}: {e}") from None
    if not tok:
        raise ConfigError(f"agent {agent}: {source} {path} is empty")
    return tok
