#!/bin/bash
# What made this folder (2026-11-27, 04:57-06:37 UTC). Targets, campaign, profile and datasets are
# those of ../fresh-2026-11-27/ (copied into each OUT: targets/, profile.h5, 30min-fresh/dataset*.h5);
# each run starts its own agent, calibrates it and refits the forward model with that calibration,
# as the bench always does. A worktree of main at the commit named, its own `make setup`;
# MIMESYS_RUNNER=<worktree>/stressors/build/mimesys-runner.
set -e
CAMP=/work/s27/campaign
run() { python bench/fidelity_real.py --out "$1" --campaign $CAMP --max-round 20 --label 30min-fresh "${@:2}"; }
# learn-reserve/: 073e0ef (the hold learns what lands after its reading; IO-only windows get a reserve)
run /work/s28/out --replays 2 --methods single,inverse
# compute-held/: 073e0ef + compute-only windows held too (not landed): inverse replayed beside learn-reserve's single
run /work/s28/exp1 --replays 2 --methods single,inverse --update inverse     # OUT seeded with learn-reserve's eval-rep0/1
# io-yield/: cedad59 (+ CPU first: later IO shortened when the tail would not fit), the same way
run /work/s28/exp2 --replays 2 --methods single,inverse --update inverse
# final/: cedad59, single and inverse side by side from a fresh agent
run /work/s28/exp3 --replays 2 --methods single,inverse
for a in learn-reserve:/work/s28/out:eval-rep? compute-held:/work/s28/exp1:eval-rep?-combined \
         io-yield:/work/s28/exp2:eval-rep?-combined final:/work/s28/exp3:eval-rep?; do
    IFS=: read -r name out glob <<< "$a"
    cp $out/30min-fresh/fidelity.json bench/results/fidelity/hold-2026-11-27/$name/
    python bench/results/fidelity/hold-2026-11-27/percore.py $out/30min-fresh "$glob" > bench/results/fidelity/hold-2026-11-27/$name/percore.txt
done
