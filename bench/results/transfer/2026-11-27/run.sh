#!/bin/bash
# What made this folder (2026-11-27). Host A = ../../fidelity/fresh-2026-11-27's agent, campaign
# and forward model (this machine as it is); its evaluation's inverse/single plans are B's
# held-out runs. Host B = this machine in a cgroup-v1 group: 0.8 CPUs, vda reads 60 MB/s and
# 1500/s. From a worktree of main at 53713bd + the calibrate probe timeout of 05d3da1.
set -e
mkdir -p /work/s27/bursts/hostA
ln -sfn /work/s27/out/30min-fresh/forward /work/s27/bursts/hostA/forward
ln -sfn /work/s27/out/30min-fresh/eval-rep0 /work/s27/bursts/hostA/eval
cp /work/s27/hostA_calibration.json /work/s27/bursts/hostA/calibration.json   # the calibration A's model was fitted with
python bench/bursts_real.py --out /work/s27/bursts --only B --b-rounds 3 --b-round-size 64
python bench/dataset_unfiltered.py /work/s27/bursts/hostB/campaign -o /work/s27/bursts/hostB/dataset_all.h5
# from main at 55ce68c (the rehosted arms)
python bench/transfer.py --work /work/s27/bursts --b-dataset /work/s27/bursts/hostB/dataset_all.h5 \
    --out bench/results/transfer/2026-11-27 --repeats 5
# the product path, once: `forward adapt --calibration` on 50 of B's samples, scored by `forward score`
python -m controller.cli forward adapt /work/s27/out/30min-fresh/forward /work/s27/bursts/hostB/dataset_all.h5 \
    -o /work/s27/adapted-rehosted --samples 50 --calibration calibration_hostB.json --base-calibration calibration_hostA.json
python -m controller.cli forward score /work/s27/adapted-rehosted /work/s27/bursts/hostB/dataset_all.h5 \
    --runs /work/s27/bursts/hostB/runs --json > forward_score_adapted_rehosted_n50.json
python bench/transfer.py --out bench/results/transfer/2026-11-27 --plot-only   # forward panel on a log scale
