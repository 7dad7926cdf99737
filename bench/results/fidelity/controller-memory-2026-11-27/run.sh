#!/bin/bash
# same-run replay of the five mixes at 744c258 (controller without PyTorch): per-core CPU and mem.used_B
W=/work/s27/wt
cd $W
export MIMESYS_RUNNER=$W/stressors/build/mimesys-runner
.venv/bin/python bench/fidelity_real.py --out /work/s30/rep5c --campaign /work/s27/campaign \
    --max-round 20 --label 30min-fresh --replays 2 --methods single,inverse --update single,inverse > /work/s30/rep5c/update.log 2>&1
touch /work/s30/rep5c/update-done
