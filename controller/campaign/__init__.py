"""Data-collection campaigns: a directory with config, an append-only sample store,
per-round state, logs and coverage reports; proposals by one-hot sweep, random sampling
or the hybrid novelty loop (see proposals.py)."""
