"""Data-collection campaigns: a directory with config, an append-only sample store,
per-round state, logs and coverage reports; round 0 from the host's solo profile (or the
one-hot sweep), then proposals by random sampling or the hybrid novelty loop (see
proposals.py)."""
