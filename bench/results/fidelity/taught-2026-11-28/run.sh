#!/bin/bash
# The diffusion model taught and steered by the forward model, against single and inverse, on six
# real mixes (two kinds never used before: sysbench_files, sync_cache), each plan replayed twice.
# Everything measured on the development VM (2 vCPUs, no PMU); nothing simulated.
set -e
R=$(cd "$(dirname "$0")" && pwd)
cd "$(dirname "$0")/../../../.."
MIXES=burst_serve,db_bulk,net_stream,web_compile,sysbench_files,sync_cache
COMMON=(--out out/fid --campaign out/campaign --max-round 10 --label taught --mix-seconds 45 --train-steps 1200
        --mixes $MIXES)
# 1. calibrate, record every mix twice (the floor), solo profile, a 10-round campaign, forward model, base model
.venv/bin/python bench/fidelity_real.py "${COMMON[@]}" --collect-rounds 10 --methods single,inverse,model \
    --prepare-only > out/prep.log 2>&1
# 2. the taught dataset and model, the steered exports, then every row replayed twice
.venv/bin/python bench/fidelity_real.py "${COMMON[@]}" \
    --methods single,inverse,diffusion,steered,taught,taught-steered > out/eval.log 2>&1
cp out/fid/taught/fidelity.json out/fid/taught/fidelity.png "$R/"
