#!/bin/bash
# End-to-end replays with main's code (kernels, planner) and the 43-variant catalog the
# 30-minute campaign was collected with (its first 43 variants are main's first 43, unchanged).
set -e
W=/work/s26/e2e/wt
cd $W
export MIMESYS_RUNNER=$W/stressors/build/mimesys-runner
.venv/bin/python bench/fidelity_real.py --out /work/s26/e2e/out --campaign /work/fid2/campaign \
    --max-round 20 --label 30min-hold --replays 2 --methods single,inverse > /work/s26/e2e/run-hold.log 2>&1
touch /work/s26/e2e/done-hold
