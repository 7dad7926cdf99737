#!/bin/bash
# The diffusion model taught and steered by the forward model, against single and inverse, on six
# real mixes (two kinds never used before: sysbench_files, sync_cache), each plan replayed twice.
# Everything measured on the development VM (2 vCPUs, no PMU); nothing simulated. As run on
# 2026-11-28 (main at 5bca20f for step 1, 917603b for step 3; the runner of 89c0562 throughout).
set -e
R=$(cd "$(dirname "$0")" && pwd)
cd "$(dirname "$0")/../../../.."
MIXES=burst_serve,db_bulk,net_stream,web_compile,sysbench_files,sync_cache
W=out/fid/taught
CTL=(.venv/bin/python -m controller.cli)
# 1. calibrate, record every mix twice (the floor), solo profile, a 10-round campaign (313 samples),
#    the forward model (2678 s)
.venv/bin/python bench/fidelity_real.py --out out/fid --campaign out/campaign --collect-rounds 10 --max-round 10 \
    --label taught --mix-seconds 45 --train-steps 1200 --methods single,inverse,model --mixes $MIXES \
    --prepare-only > out/prep.log 2>&1
# 2. the taught dataset (18 s: 313 measured + 12,082 taught samples), then both models trained the same
#    way by hand (the bench's 1200 steps left the taught model unable to reproduce its teacher)
"${CTL[@]}" dataset teach $W/dataset.h5 --forward $W/forward --synthetic 200 --write-synthetic $W/synthetic-targets \
    -o $W/dataset-taught.h5
"${CTL[@]}" train $W/dataset.h5 --out $W/model --steps 6000 --batch-size 128 --hidden 64 --blocks 2 --device cpu \
    --seed 0 --threads 1 --overwrite                                      # 94.5 s
"${CTL[@]}" train $W/dataset-taught.h5 --out $W/model-taught --steps 6000 --batch-size 128 --hidden 64 --blocks 2 \
    --device cpu --seed 0 --threads 1 --taught-share 0.8 --overwrite      # 105.1 s
"${CTL[@]}" export $W/model --onnx $W/model-onnx --overwrite
"${CTL[@]}" export $W/model-taught --onnx $W/model-onnx-taught --overwrite
"${CTL[@]}" export $W/model-taught --onnx $W/model-onnx-taught-steered --forward $W/forward --overwrite
# 3. every row replayed twice in one run (3385 s)
.venv/bin/python bench/fidelity_real.py --out out/fid --campaign out/campaign --max-round 10 --label taught \
    --mix-seconds 45 --train-steps 6000 --mixes $MIXES \
    --methods single,inverse,diffusion,taught,taught-steered > out/eval.log 2>&1
cp $W/fidelity.json $W/fidelity.png $W/teaching.json "$R/"
cp $W/model-taught/loss_curve.png "$R/loss_curve_taught.png"
# generation speed on the taught model (bench/results/generate/generate_2026-11-28-steered.json)
.venv/bin/python bench/generate.py --model $W/model-taught --forward $W/forward --target out/fid/targets/burst_serve.h5 \
    --windows 3000 --repeats 3
