#!/bin/bash
# usage: run.sh — replay single and inverse together (interleaved mix by mix) twice: held-out mixes, then the five; main at 9be2f58 in the worktree W
W=/work/s27/wt
cd $W
export MIMESYS_RUNNER=$W/stressors/build/mimesys-runner
.venv/bin/python bench/fidelity_real.py --out /work/s30/heldout --campaign /work/s27/campaign \
    --max-round 20 --label 30min-fresh --replays 2 --methods single,inverse --update single,inverse \
    --mixes pg_oltp,files_git > /work/s30/heldout/update.log 2>&1
touch /work/s30/heldout/update-done
.venv/bin/python bench/fidelity_real.py --out /work/s30/rep5 --campaign /work/s27/campaign \
    --max-round 20 --label 30min-fresh --replays 2 --methods single,inverse --update single,inverse > /work/s30/rep5/update.log 2>&1
touch /work/s30/rep5/update-done
