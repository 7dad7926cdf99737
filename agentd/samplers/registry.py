"""The sampler registry and the samplers' configuration.

Each sampler module ends with one line, ``register(TheSampler)``. Every module in this
package is imported on first use, so adding a sampler is adding a file: the config keys
(``[samplers.<name>]``), the CLI choices and the ``/v1/info`` states all come from here.

Configuration (embedded by the agent's config as the ``[samplers]`` table)::

    [samplers.cpu]                  # one table per sampler name; all optional
    enabled = "auto"                # true | false | "auto" (default)
    [samplers.probe_mem_latency]
    enabled = true                  # off by default: an explicit opt-in
    buffer_mib = 64                 # the sampler's own options

``enabled``: "auto" (None) turns on every sampler whose ``default_enabled`` is true and
reports what it cannot measure as unsupported; ``true`` makes "nothing available" a
start-up error; ``false`` leaves the sampler (and its metrics) out of the schema.
An unknown sampler or option name fails at load time and lists the valid ones.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Mapping

from mimesys.errors import ConfigError
from mimesys.lazyload import PackageModules

REGISTRY: dict[str, type] = {}
# __main__ is the measuring tool, not a sampler; registry (this module) registers nothing
_MODULES = PackageModules(__package__, skip=lambda name: name.startswith("_"))


def register(cls: type) -> type:
    """Called once at the bottom of each sampler module: ``register(CpuSampler)``."""
    name = cls.name
    if name in REGISTRY and REGISTRY[name] is not cls:
        raise RuntimeError(f"two samplers named {name!r}: {REGISTRY[name].__module__} and {cls.__module__}")
    REGISTRY[name] = cls
    return cls


def samplers() -> dict[str, type]:
    """name -> Sampler class, in name order (the schema's sampler order)."""
    _MODULES.load()
    return dict(sorted(REGISTRY.items()))


def sampler_names() -> list[str]:
    return list(samplers())


def get(name: str) -> type:
    reg = samplers()
    if name not in reg:
        raise ConfigError(f"unknown sampler {name!r}; valid samplers: {', '.join(reg)}")
    return reg[name]


@dataclass(frozen=True)
class SamplersConfig:
    """Which samplers run and with which options.

    enabled: sampler name -> True / False / None (auto); a name absent means auto.
    options: sampler name -> that sampler's ``Options`` frozen dataclass instance.
    """

    enabled: Mapping[str, bool | None] = field(default_factory=dict)
    options: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        for name in list(self.enabled) + list(self.options):
            get(name)  # raises ConfigError listing the valid names
        for name, opts in self.options.items():
            if not isinstance(opts, get(name).Options):
                raise ConfigError(f"samplers.{name}: options must be {get(name).Options.__name__}, "
                                  f"got {type(opts).__name__}")

    def enable_of(self, name: str) -> bool | None:
        return self.enabled.get(name)

    def options_of(self, name: str):
        return self.options.get(name) or get(name).Options()

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None, where: str = "samplers") -> "SamplersConfig":
        """From the parsed ``[samplers]`` table (TOML/JSON). Errors name the key."""
        d = d or {}
        if not isinstance(d, Mapping):
            raise ConfigError(f"{where}: expected a table of sampler names, got {type(d).__name__}")
        enabled: dict[str, bool | None] = {}
        options: dict[str, Any] = {}
        for name, table in d.items():
            s = samplers().get(name)
            if s is None:
                raise ConfigError(f"{where}.{name}: unknown sampler; valid samplers: {', '.join(samplers())}")
            if isinstance(table, bool):  # shorthand: cpu = false
                table = {"enabled": table}
            if not isinstance(table, Mapping):
                raise ConfigError(f"{where}.{name}: expected a table or true/false, got {type(table).__name__}")
            table = dict(table)
            en = table.pop("enabled", None)
            if en == "auto":
                en = None
            if en is not None and not isinstance(en, bool):
                raise ConfigError(f"{where}.{name}.enabled: expected true, false or \"auto\", got {en!r}")
            enabled[name] = en
            if table:
                options[name] = _build_options(s.Options, table, f"{where}.{name}")
        return cls(enabled, options)

    def to_dict(self) -> dict:
        """The resolved config as plain data (for manifests and /v1/info)."""
        out = {}
        for name in samplers():
            row: dict[str, Any] = {"enabled": "auto" if self.enabled.get(name) is None else self.enabled[name]}
            row.update({k: (list(v) if isinstance(v, tuple) else v)
                        for k, v in dataclasses.asdict(self.options_of(name)).items()})
            out[name] = row
        return out


def _build_options(opt_cls: type, table: Mapping[str, Any], where: str):
    fields = {f.name: f for f in dataclasses.fields(opt_cls)}
    unknown = sorted(set(table) - set(fields))
    if unknown:
        valid = ", ".join(["enabled", *fields])
        raise ConfigError(f"{where}: unknown option(s) {', '.join(unknown)}; valid options: {valid}")
    kwargs = {}
    defaults = opt_cls()
    for k, v in table.items():
        default = getattr(defaults, k)
        kwargs[k] = _coerce(v, default, f"{where}.{k}")
    try:
        return opt_cls(**kwargs)
    except (TypeError, ValueError) as e:
        raise ConfigError(f"{where}: {e}") from None


def _coerce(v: Any, default: Any, where: str):
    """Check a config value against the option's default; lists become tuples (frozen)."""
    if isinstance(default, bool):
        if not isinstance(v, bool):
            raise ConfigError(f"{where}: expected true or false, got {v!r}")
        return v
    if isinstance(default, (int, float)) and not isinstance(default, bool):
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise ConfigError(f"{where}: expected a number, got {v!r}")
        return type(default)(v) if isinstance(default, float) else v
    if isinstance(default, tuple) or default is None:
        if default is None and v is None:
            return None
        if isinstance(v, (list, tuple)) and all(isinstance(x, str) for x in v):
            return tuple(v)
        raise ConfigError(f"{where}: expected a list of names, got {v!r}")
    if isinstance(default, str):
        if not isinstance(v, str):
            raise ConfigError(f"{where}: expected a string, got {v!r}")
        return v
    return v
