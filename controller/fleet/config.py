"""The fleet file (TOML; format in the package docstring): FleetConfig, one AgentSpec per agent."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import aiohttp

from mimesys.config import check_known, read_toml
from mimesys.errors import ConfigError
from mimesys.tls import normalize_sha256

from ..tokens import confined_token_file

if TYPE_CHECKING:
    from .client import AgentClient


@dataclass(frozen=True)
class AgentSpec:
    url: str
    token_file: Path | None
    name: str = ""
    ca_file: Path | None = None
    tls_sha256: bytes | None = None     # 32 bytes: the pinned certificate's SHA-256
    allow_plain_http: bool = False      # as the file says; grants nothing (only --allow-plain-http does)

    def token(self, explicit: Path | None = None) -> str:
        from ..tokens import agent_token
        return agent_token(self.name or self.url, explicit=explicit, fleet_entry=self.token_file,
                           fleet_url=self.url)

    def ssl(self):
        """What aiohttp's `ssl=` takes for this agent: a Fingerprint pin, a CA context, or True."""
        if not self.url.startswith("https://"):
            return True
        if self.tls_sha256 is not None:
            return aiohttp.Fingerprint(self.tls_sha256)
        if self.ca_file is not None:
            import ssl
            try:
                return ssl.create_default_context(cafile=str(self.ca_file))
            except (OSError, ssl.SSLError) as e:
                raise ConfigError(f"agent {self.name or self.url}: ca_file {self.ca_file}: {e}") from None
        return True

    def client(self, *, token_file: Path | None = None, allow_plain_http: bool = False, **kw) -> "AgentClient":
        """`allow_plain_http`: the command line's --allow-plain-http, never the file's key."""
        from .client import AgentClient
        return AgentClient(self.url, self.token(token_file), name=self.name, ssl=self.ssl(),
                           allow_plain_http=allow_plain_http, **kw)



@dataclass(frozen=True)
class FleetConfig:
    agents: tuple[AgentSpec, ...]
    allow_mixed_hosts: bool = False
    path: Path | None = None

    @classmethod
    def load(cls, path: Path | str) -> "FleetConfig":
        path = Path(path)
        doc = read_toml(path, "fleet")
        check_known(doc, ("agent", "allow_mixed_hosts"), str(path))
        allow = doc.get("allow_mixed_hosts", False)
        if not isinstance(allow, bool):
            raise ConfigError(f"{path}: allow_mixed_hosts must be true or false")
        entries = doc.get("agent")
        if not isinstance(entries, list) or not entries:
            raise ConfigError(f"{path}: no [[agent]] entries")
        agents, seen, names = [], set(), set()
        for i, e in enumerate(entries):
            where = f"{path}: agent #{i + 1}"
            if not isinstance(e, dict):
                raise ConfigError(f"{where}: expected a table")
            check_known(e, AGENT_KEYS, where)
            url = e.get("url")
            if not isinstance(url, str) or not url.startswith(("http://", "https://")):
                raise ConfigError(f"{where}: url must be an http:// or https:// URL, got {url!r}")
            if url in seen:
                raise ConfigError(f"{where}: url {url} listed twice")
            seen.add(url)
            tf = e.get("token_file")
            if tf is not None and not isinstance(tf, str):
                raise ConfigError(f"{where}: token_file must be a path string")
            tpath = None if tf is None else confined_token_file(path, tf, where)
            name = str(e.get("name") or url)
            if name in names:
                raise ConfigError(f"{where}: name {name!r} used twice (names select agents: --agent NAME)")
            names.add(name)
            ca, pin = e.get("ca_file"), e.get("tls_sha256")
            if ca is not None and not isinstance(ca, str):
                raise ConfigError(f"{where}: ca_file must be a path string")
            if pin is not None and not isinstance(pin, str):
                raise ConfigError(f"{where}: tls_sha256 must be a string of hex digits")
            if (ca is not None or pin is not None) and not url.startswith("https://"):
                raise ConfigError(f"{where}: ca_file / tls_sha256 apply to https:// URLs; {url} is plain HTTP")
            if ca is not None and pin is not None:
                raise ConfigError(f"{where}: set ca_file or tls_sha256, not both (a pin accepts one certificate "
                                  f"whoever signed it; a CA accepts what it signed)")
            ca_path = None if ca is None else (path.parent / ca if not Path(ca).is_absolute() else Path(ca))
            if ca_path is not None and not ca_path.is_file():
                raise ConfigError(f"{where}: ca_file {ca_path} does not exist")
            plain = e.get("allow_plain_http", False)
            if not isinstance(plain, bool):
                raise ConfigError(f"{where}: allow_plain_http must be true or false")
            if plain and not url.startswith("http://"):
                raise ConfigError(f"{where}: allow_plain_http applies to http:// URLs; {url} is HTTPS")
            agents.append(AgentSpec(url, tpath, name, ca_path,
                                    None if pin is None else normalize_sha256(pin, where), plain))
        return cls(tuple(agents), allow, path)

    def select(self, names: list[str] | tuple[str, ...]) -> "FleetConfig":
        """The agents named (in the fleet's order); an unknown name lists the known ones."""
        if not names:
            return self
        known = {a.name: a for a in self.agents}
        unknown = [n for n in names if n not in known]
        if unknown:
            raise ConfigError(f"{self.path}: no agent named {', '.join(map(repr, unknown))}; agents: "
                              f"{', '.join(known)}")
        return dataclasses.replace(self, agents=tuple(a for a in self.agents if a.name in names))


AGENT_KEYS = ("url", "token_file", "name", "ca_file", "tls_sha256", "allow_plain_http")
