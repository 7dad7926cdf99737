#!/bin/bash
set -e
W=/work/s26/e2e/wt
cd $W
export MIMESYS_RUNNER=$W/stressors/build/mimesys-runner
.venv/bin/python bench/fidelity_real.py --out /work/s26/e2e/out --campaign /work/fid2/campaign \
    --max-round 20 --label 30min-main2 --replays 2 --methods single,inverse > /work/s26/e2e/run-main2.log 2>&1
touch /work/s26/e2e/done-main2
