"""The execution backends by name (`agent.backend` in the config, `--backend` on the CLI).

name -> "module:Class"; the module is imported only when that backend is chosen, so the
simulated host's code never loads on a production agent. A backend class is built with
`Class.from_config(config)` when it has that classmethod, else `Class()`.
"""

from __future__ import annotations

from mimesys.backend import Backend
from mimesys.errors import ConfigError
from mimesys.lazyload import load_target

BACKENDS: dict[str, str] = {
    "host": "agentd.host_backend:HostBackend",   # mimesys-runner + the host samplers (real)
    "sim": "mimesys.sim:SimBackend",              # the simulated host (labelled simulated everywhere)
}


def backend_class(name: str) -> type[Backend]:
    if name not in BACKENDS:
        raise ConfigError(f"unknown backend {name!r}; valid backends: {', '.join(BACKENDS)}")
    try:
        cls = load_target(BACKENDS[name])
    except (ImportError, AttributeError) as e:
        raise ConfigError(f"backend {name!r} ({BACKENDS[name]}) is not available in this build: {e}") from None
    return cls


def create_backend(config) -> Backend:
    """Build the configured backend. Probing (samplers, runner binary) happens here, so a
    host that cannot run fails at start-up, not at the first request."""
    cls = backend_class(config.agent.backend)
    factory = getattr(cls, "from_config", None)
    return factory(config) if factory is not None else cls()
