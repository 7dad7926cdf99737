"""mimesys controller: fleet client, data collection, model training, alignment, export,
evaluation and trace importers. Imports agentd's formats; agentd never imports this."""

from mimesys import __version__  # noqa: F401  (one version source: mimesys/__init__.py)

from . import planners  # noqa: E402,F401  (registers the dataset baselines with agentd's planner registry)
