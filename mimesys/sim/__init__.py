"""The simulated host (`--backend sim`): labelled simulated in /v1/info and in every trace.

`mimesys.sim.model` is the pure simulation (composition, previous state -> metrics, new
state), usable without an agent: `SimModel.from_catalog(catalog, SimParams(n_cpus=4))`.
`SimBackend` wraps it behind the Backend interface for the agent.
"""

from .backend import SimBackend, SimConfig
from .model import SimModel, SimParams, SimState, idle_decay, schema

__all__ = ["SimBackend", "SimConfig", "SimModel", "SimParams", "SimState", "idle_decay", "schema"]
