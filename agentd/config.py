"""The agent's configuration: /etc/mimesys/agent.toml plus /etc/mimesys/agent.d/*.toml.

Typed, frozen and validated once at load (the core's typed reader, mimesys/config.py): an unknown table or key fails naming the file
and listing the valid names; a wrong type names file, table and key. Nothing is checked
later, so a config that loads is a config the agent can run with (`check-config`).

Files in agent.d/ are applied after agent.toml in name order; a key set there replaces the
same key of agent.toml (tables merge key by key). Auto-detection is spelled "auto" in
TOML and is None here; an explicit value that cannot be honoured is a load error.

The sampler tables (`[samplers.<name>]`) belong to the samplers' own registry
(agentd/samplers/registry.py, SamplersConfig), which validates them the same way.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from mimesys.config import build_section, plain, read_toml, toml_value
from mimesys.errors import ConfigError

from mimesys.hostpaths import HostPaths, online_cpus
from .samplers.registry import SamplersConfig

DEFAULT_PATH = Path("/etc/mimesys/agent.toml")
MiB = 1 << 20
PLACEMENTS = ("pinned", "free", "yield")    # agent.placement: how the runner places a plan's threads


@dataclass(frozen=True)
class AgentSection:
    """What this host offers and where the agent keeps its files."""

    backend: str = "host"                                  # a name in agentd.backend_registry.BACKENDS
    cpus: tuple[int, ...] | None = None                    # CPUs plans may use; None = every online CPU
    state_dir: Path = Path("/var/lib/mimesys")             # runs/<id>/trace.h5 live here
    scratch_dir: Path = Path("/var/lib/mimesys/scratch")   # IO stressors' files; emptied at start
    scratch_budget_mib: int = 1024                         # bytes IO stressors may hold on disk
    # Memory stressors' buffers (the runner's private memory, enforced by the kernel at
    # allocation); 0 = half of this host's MemTotal. The runner also refuses to start a run
    # that would leave less than memory_margin_mib available to the rest of the host.
    memory_budget_mib: int = 0
    memory_margin_mib: int = 256
    model_dir: Path = Path("/var/lib/mimesys/model")       # exported model for /v1/generate
    catalog: Path | None = None                            # None = the catalog shipped with the agent
    runner: Path | None = None                             # mimesys-runner binary; None = the packaged one
    run_lock: Path = Path("/run/mimesys/run.lock")         # host-wide: one run at a time across agents
    replay_dir: Path | None = None                         # offline replays' scratch; None = <scratch_dir>/../replay
    # "pinned": plan thread k runs on cpus[k % n] and holds that core's busy target; "free": the
    # scheduler moves the plan's threads among `cpus`, as it moves an application's, so a
    # neighbour finds the free core an application would have left it (no per-core hold then)
    placement: str = "pinned"

    def validate(self, where: str) -> None:
        from .backend_registry import BACKENDS
        if self.backend not in BACKENDS:
            raise ConfigError(f"{where}: agent.backend = {self.backend!r}; valid backends: {', '.join(BACKENDS)}")
        if self.cpus is not None:
            if not self.cpus:
                raise ConfigError(f"{where}: agent.cpus is empty; use \"auto\" for every online CPU")
            online = set(online_cpus(HostPaths.from_env()))
            missing = sorted(set(self.cpus) - online)
            if missing:
                raise ConfigError(f"{where}: agent.cpus lists CPU(s) {missing} that are not online "
                                  f"(online: {sorted(online)})")
            if len(set(self.cpus)) != len(self.cpus):
                raise ConfigError(f"{where}: agent.cpus lists a CPU twice: {list(self.cpus)}")
        if self.placement not in PLACEMENTS:
            raise ConfigError(f"{where}: agent.placement = {self.placement!r}; expected one of {', '.join(PLACEMENTS)}")
        if self.scratch_budget_mib < 1:
            raise ConfigError(f"{where}: agent.scratch_budget_mib must be >= 1, got {self.scratch_budget_mib}")
        if self.memory_budget_mib < 0 or self.memory_margin_mib < 0:
            raise ConfigError(f"{where}: agent.memory_budget_mib and agent.memory_margin_mib must be >= 0")
        for name in ("state_dir", "scratch_dir", "model_dir", "run_lock") + (("replay_dir",) if self.replay_dir else ()):
            if not getattr(self, name).is_absolute():
                raise ConfigError(f"{where}: agent.{name} must be an absolute path, got {str(getattr(self, name))!r}")
        if self.scratch_dir.resolve() in (Path("/"), self.state_dir.resolve()):
            # The scratch directory is emptied at start: it must be a directory of its own.
            raise ConfigError(f"{where}: agent.scratch_dir must be a directory of its own (it is emptied at "
                              f"start), got {str(self.scratch_dir)!r}")

    def resolved_cpus(self) -> tuple[int, ...]:
        return self.cpus if self.cpus is not None else tuple(online_cpus(HostPaths.from_env()))


@dataclass(frozen=True)
class ApiSection:
    bind: str = "127.0.0.1"                          # address to listen on; "0.0.0.0" / "::" for all
    port: int = 7433
    token_file: Path = Path("/etc/mimesys/token")    # bearer token, one line; required
    tls_cert: Path | None = None                     # PEM; both or neither of tls_cert / tls_key
    tls_key: Path | None = None
    public_healthz: bool = False                     # let /healthz answer without a token
    public_metrics: bool = False                     # let /metrics answer without a token (read-only)
    metrics_token_file: Path | None = None           # a second, read-only token: /metrics only
    # /metrics scrapes the agent serves at once (Prometheus's --web.max-requests): more get 503.
    # A public scrape needs no token, so without a cap anyone who reaches the port sets its load.
    metrics_max_requests: int = 8
    max_body_mib: float = 64.0                       # request bodies above this get 413
    max_ws_message_kib: int = 64                     # WebSocket messages a client may send us

    def validate(self, where: str) -> None:
        if not 0 <= self.port <= 65535:
            raise ConfigError(f"{where}: api.port = {self.port} is not a TCP port")
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ConfigError(f"{where}: api.tls_cert and api.tls_key go together (one is set, the other is not)")
        if self.max_body_mib <= 0 or self.max_ws_message_kib <= 0:
            raise ConfigError(f"{where}: api.max_body_mib and api.max_ws_message_kib must be positive")
        if self.metrics_max_requests < 1:
            raise ConfigError(f"{where}: api.metrics_max_requests must be >= 1, got {self.metrics_max_requests}")

    @property
    def max_body_bytes(self) -> int:
        return int(self.max_body_mib * MiB)

    @property
    def tls(self) -> bool:
        return self.tls_cert is not None


@dataclass(frozen=True)
class RunsSection:
    keep: int = 20                 # recorded runs kept under state_dir/runs (oldest removed first)
    stream_buffer_mib: int = 64    # frames of the current run held for late WebSocket clients
    max_repetitions: int = 1000
    max_warmup_windows: int = 600
    # What one run may ask of the agent: its length, and (plan + warm-up) windows x threads (what
    # the compiled schedule and its compile time grow with; repetitions are the runner's).
    max_duration_s: float = 7 * 24 * 3600.0
    max_window_threads: int = 2_000_000
    generate_max_windows: int = 86_400   # trace windows one /v1/generate request may ask for

    def validate(self, where: str) -> None:
        if not self.max_duration_s > 0:
            raise ConfigError(f"{where}: runs.max_duration_s must be > 0, got {self.max_duration_s}")
        for name in ("keep", "stream_buffer_mib", "max_repetitions", "max_window_threads", "generate_max_windows"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{where}: runs.{name} must be >= 1, got {getattr(self, name)}")
        if self.max_warmup_windows < 0:
            raise ConfigError(f"{where}: runs.max_warmup_windows must be >= 0")


@dataclass(frozen=True)
class MonitorSection:
    interval_s: float = 1.0     # one sample frame per interval to every /v1/monitor client
    max_clients: int = 1024
    client_queue: int = 8       # frames queued per client; a slower client misses frames (counted)

    def validate(self, where: str) -> None:
        if not 0.05 <= self.interval_s <= 3600:
            raise ConfigError(f"{where}: monitor.interval_s = {self.interval_s} outside [0.05, 3600]")
        if self.max_clients < 1 or self.client_queue < 1:
            raise ConfigError(f"{where}: monitor.max_clients and monitor.client_queue must be >= 1")


_SECTIONS: dict[str, type] = {"agent": AgentSection, "api": ApiSection, "runs": RunsSection,
                              "monitor": MonitorSection}


@dataclass(frozen=True)
class Config:
    agent: AgentSection = field(default_factory=AgentSection)
    api: ApiSection = field(default_factory=ApiSection)
    runs: RunsSection = field(default_factory=RunsSection)
    monitor: MonitorSection = field(default_factory=MonitorSection)
    samplers: SamplersConfig = field(default_factory=SamplersConfig)
    sources: tuple[str, ...] = ()   # files this config was read from, in order ("built-in defaults" if none)

    def with_backend(self, backend: str) -> "Config":
        agent = dataclasses.replace(self.agent, backend=backend)
        agent.validate("--backend")
        return dataclasses.replace(self, agent=agent)

    def with_placement(self, placement: str) -> "Config":
        agent = dataclasses.replace(self.agent, placement=placement)
        agent.validate("--placement")
        return dataclasses.replace(self, agent=agent)

    def to_dict(self) -> dict:
        """The resolved configuration as plain TOML-like data (check-config, /v1/info)."""
        out: dict[str, Any] = {}
        for name in _SECTIONS:
            sec = getattr(self, name)
            out[name] = {f.name: plain(getattr(sec, f.name)) for f in dataclasses.fields(sec)}
        out["samplers"] = self.samplers.to_dict()
        return out

    def to_toml(self) -> str:
        lines = [f"# resolved from: {', '.join(self.sources) or 'built-in defaults'}"]
        for table, values in self.to_dict().items():
            if table == "samplers":
                for sname, opts in values.items():
                    lines.append(f"\n[samplers.{sname}]")
                    lines += [f"{k} = {toml_value(v)}" for k, v in opts.items() if v is not None]
                continue
            lines.append(f"\n[{table}]")
            for k, v in values.items():
                lines.append(f"{k} = {toml_value(v)}" if v is not None else f"# {k} = \"auto\" (not set)")
        return "\n".join(lines) + "\n"

    def read_token(self) -> bytes:
        """The API token, read once at start-up. Missing, empty or world-readable is an error."""
        return _read_secret(self.api.token_file, "api.token_file")

    def read_metrics_token(self) -> bytes | None:
        """The read-only /metrics token (api.metrics_token_file), or None when not configured."""
        path = self.api.metrics_token_file
        return None if path is None else _read_secret(path, "api.metrics_token_file")


def _read_secret(path: Path, key: str) -> bytes:
    """A token file's contents. Missing, empty, short, accessible to other users, not a regular
    file, or owned by another user is an error (mimesys.fsutil.read_secret_file)."""
    from mimesys.errors import ValidationError
    from mimesys.fsutil import read_secret_file
    try:
        token = read_secret_file(path, key).strip()
    except ValidationError as e:
        hint = ""
        if "cannot read" in str(e):
            hint = f". Create one with: umask 077; od -An -N32 -tx1 /dev/urandom | tr -d ' \\n' > {path}"
        raise ConfigError(f"{e}{hint}") from None
    if not token:
        raise ConfigError(f"{key} {str(path)!r} is empty")
    if len(token) < 16:
        raise ConfigError(f"{key} {str(path)!r}: token is {len(token)} bytes; use at least 16")
    return token


def load_config(path: Path | str | None = None, *, dropin_dir: Path | str | None = None) -> Config:
    """Read `path` (default: $MIMESYS_CONFIG or /etc/mimesys/agent.toml) and its agent.d/.

    An explicitly named file that does not exist is an error; the default path missing means
    built-in defaults (a development checkout)."""
    explicit = path is not None or "MIMESYS_CONFIG" in os.environ
    path = Path(path if path is not None else os.environ.get("MIMESYS_CONFIG", DEFAULT_PATH))
    dropins = Path(dropin_dir) if dropin_dir is not None else path.parent / "agent.d"
    files: list[Path] = []
    if path.exists():
        files.append(path)
    elif explicit:
        raise ConfigError(f"{path}: config file not found")
    if dropins.is_dir():
        files += sorted(p for p in dropins.glob("*.toml") if p.is_file())
    merged: dict[str, Any] = {}
    origin: dict[tuple[str, str], str] = {}  # (table, key) -> file that set it, for error messages
    for f in files:
        doc = read_toml(f)
        for table, values in doc.items():
            if table not in (*_SECTIONS, "samplers"):
                raise ConfigError(f"{f}: unknown table [{table}]; valid tables: "
                                  f"{', '.join([*_SECTIONS, 'samplers'])}")
            if not isinstance(values, dict):
                raise ConfigError(f"{f}: {table} must be a table ([{table}]), got a {type(values).__name__}")
            dst = merged.setdefault(table, {})
            for k, v in values.items():
                if table == "samplers" and isinstance(v, dict) and isinstance(dst.get(k), dict):
                    dst[k] = {**dst[k], **v}
                else:
                    dst[k] = v
                origin[(table, k)] = str(f)
    return config_from_dict(merged, sources=tuple(str(f) for f in files), origin=origin)


def config_from_dict(doc: Mapping[str, Any], *, sources: tuple[str, ...] = (),
                     origin: Mapping[tuple[str, str], str] | None = None) -> Config:
    """Build and validate a Config from parsed TOML tables."""
    origin = origin or {}
    where_all = ", ".join(sources) or "config"
    unknown = sorted(set(doc) - {*_SECTIONS, "samplers"})
    if unknown:
        raise ConfigError(f"{where_all}: unknown table(s) {unknown}; valid tables: {', '.join([*_SECTIONS, 'samplers'])}")
    sections = {}
    for name, cls in _SECTIONS.items():
        table = doc.get(name, {}) or {}
        sections[name] = build_section(cls, name, table, origin, where_all)
    samplers_where = origin.get(("samplers", next(iter(doc.get("samplers", {}) or {}), "")), where_all)
    samplers = SamplersConfig.from_dict(doc.get("samplers"), where=f"{samplers_where}: samplers")
    return Config(samplers=samplers, sources=sources, **sections)
