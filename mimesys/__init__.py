"""mimesys's shared core: what the agent (agentd/) and the controller (controller/) both speak.

The formats that cross the wire and the disk (plan, trace, metric schema, stressor catalog,
model manifest, HDF5 and msgpack helpers, calibration file), the errors and exit statuses,
TLS pinning, the Backend types, the HTTP boundary both servers share (api/), the forward
model (forward/), the simulated host (sim/) and the planner wing (planners/). It imports
neither agentd nor controller, and never torch (tests/test_layering.py).
"""

__version__ = "0.1.0"
