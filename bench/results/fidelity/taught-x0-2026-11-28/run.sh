#!/bin/bash
# The taught diffusion model after the fixes of 2064afa (x0-prediction, floored log inputs, the
# target's per-core busy fraction held, 5 DDIM steps, steer support 0.005), against single and
# inverse on the same six real mixes and recordings as taught-2026-11-28 (its floor), each plan
# replayed twice. Everything measured on the development VM (2 vCPUs, no PMU); nothing simulated.
# As run on 2026-11-28 (main at 2064afa); the campaign (out/campaign, 10 rounds, 313 samples) and
# the target recordings (out/fid/targets) are those of taught-2026-11-28/run.sh step 1.
set -e
R=$(cd "$(dirname "$0")" && pwd)
cd "$(dirname "$0")/../../../.."
MIXES=burst_serve,db_bulk,net_stream,web_compile,sysbench_files,sync_cache
W=out/fid/taught2
mkdir -p $W && cp -r out/fid/taught/{dataset.h5,dataset-full.h5,forward,forward-score.json,model,model-onnx} $W/
# the agent recalibrates and the forward model is refit; 800 synthetic traces taught (47,482 samples),
# the taught model trained 6000 steps (batch 128, 80 % taught), exported plain and steered; then every
# row replayed twice
.venv/bin/python bench/fidelity_real.py --out out/fid --campaign out/campaign --max-round 10 --label taught2 \
    --mix-seconds 45 --train-steps 6000 --train-batch 128 --teach-synthetic 800 --taught-share 0.8 \
    --mixes $MIXES --methods single,inverse,taught,taught-steered > out/runs/taught2.log 2>&1
cp $W/fidelity.json $W/fidelity.png $W/teaching.json "$R/"
cp $W/model-taught/loss_curve.png "$R/loss_curve_taught.png"
