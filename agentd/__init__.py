"""mimesys node agent: runs compiled stressor plans, samples the host, serves traces.

This package must import and run without PyTorch: the controller imports agentd's
formats, never the other way round.
"""

__version__ = "0.1.0"
