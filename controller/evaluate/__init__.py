"""Evaluation: how close a replayed plan comes to its target trace, and whether a co-located
application suffers as it does next to the real neighbours.

- `dtw`: normalized DTW distance per metric (the exact normalization is written there).
- `report`: per-(trace, method, metric) results, grouped by load level, as JSON, CSV and PNGs.
- `driver`: for each target trace and method: generate -> replay on an agent -> record -> DTW.
- `colocation`: an application's performance alone, next to a real mix, next to a plan.
"""
