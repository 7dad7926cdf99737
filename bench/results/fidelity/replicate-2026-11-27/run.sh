#!/bin/bash
# What made this folder (2026-11-27 08:52-09:18 UTC, this 2-vCPU VM, nothing else running).
# The targets, solo profile, campaign and datasets of ../fresh-2026-11-27/ (copied into OUT as
# for ../hold-2026-11-27/); a worktree of main at 3666095 with its own `make setup`;
# MIMESYS_RUNNER=<worktree>/stressors/build/mimesys-runner. The bench starts its own agent,
# calibrates it, refits the forward model and replays single and inverse twice each.
set -e
OUT=/work/s29/rep
python bench/fidelity_real.py --out $OUT --campaign /work/s27/campaign --max-round 20 --label 30min-fresh \
    --replays 2 --methods single,inverse
cp $OUT/30min-fresh/fidelity.json bench/results/fidelity/replicate-2026-11-27/
python bench/results/fidelity/hold-2026-11-27/percore.py $OUT/30min-fresh \
    > bench/results/fidelity/replicate-2026-11-27/percore.txt
