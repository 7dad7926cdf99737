#!/bin/bash
# What made this folder (2026-11-27). The replays are those of ../hold-2026-11-27/final/ (real
# machine, cedad59: ten inverse plans, five real mixes x two replays, each plan with its executed
# trace, and the forward model that bench run fitted); nothing was replayed again.
# before.json: the code of e65c033 (cpu.util predicted from its own solo responses, corrected
# where the campaign's cross-validation let the correction through); after.json: this change.
set -e
OUT=/work/s28/exp3/30min-fresh
HERE=bench/results/fidelity/host-cpu-2026-11-27
WT=/work/s27/wt                       # a worktree with its own `make setup`
git -C $WT checkout --detach e65c033
mkdir -p $WT/$HERE && cp $HERE/predict.py $WT/$HERE/
$WT/.venv/bin/python $WT/$HERE/predict.py $OUT > $HERE/before.json
rm -r $WT/$HERE
.venv/bin/python $HERE/predict.py $OUT > $HERE/after.json
