#!/bin/bash
# usage: run-heldout.sh OUTDIR — record the held-out mixes, replay single and inverse (2 seeds)
set -e
W=/work/s27/wt
cd $W
export MIMESYS_RUNNER=$W/stressors/build/mimesys-runner
.venv/bin/python bench/fidelity_real.py --out $1 --campaign /work/s27/campaign \
    --max-round 20 --label 30min-fresh --replays 2 --methods single,inverse --mixes pg_oltp,files_git > $1/replay.log 2>&1
touch $1/done
