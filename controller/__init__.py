"""mimesys controller: fleet client, data collection, model training, alignment, export,
evaluation and trace importers. Imports agentd's formats; agentd never imports this."""

__version__ = "0.1.0"
