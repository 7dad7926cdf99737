#!/bin/bash
# What made this folder (2026-11-27, 01:58-03:06 UTC), from a worktree of main at 53713bd with its
# own `make setup`; MIMESYS_RUNNER=<worktree>/stressors/build/mimesys-runner.
set -e
python bench/fidelity_real.py --out /work/s27/out --campaign /work/s27/campaign --collect-rounds 20 \
    --max-round 20 --label 30min-fresh --replays 2 --methods single,inverse --prepare-only
python bench/fidelity_real.py --out /work/s27/out --campaign /work/s27/campaign \
    --max-round 20 --label 30min-fresh --replays 1 --methods single,inverse
python ../hold-2026-11-27/percore.py /work/s27/out/30min-fresh > percore.txt   # (the script this folder first had, moved there and given an eval-dir glob)
