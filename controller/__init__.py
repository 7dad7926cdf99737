"""mimesys controller: fleet client, data collection, model training, alignment, export,
evaluation and trace importers. Imports the shared core (mimesys/), never the daemon (agentd/); neither imports this."""

from mimesys import __version__  # noqa: F401  (one version source: mimesys/__init__.py)

from . import baselines  # noqa: E402,F401  (registers the dataset baselines with the core's planner registry)
