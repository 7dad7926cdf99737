#!/bin/bash
# What made this folder (2026-11-27, this 2-vCPU VM, nothing else of this project running).
# The settle's runner: a worktree at 3666095 with settle.patch applied and `make -C stressors`.
set -e
HERE=bench/results/hold-settle-2026-11-27
SETTLE=/tmp/settle-wt/stressors/build/mimesys-runner
git worktree add --detach /tmp/settle-wt 3666095 && git -C /tmp/settle-wt apply $PWD/$HERE/settle.patch
make -C /tmp/settle-wt/stressors
export CONT=1 T=60
for i in 1 2; do
    .venv/bin/python $HERE/exact.py held duty                  # random reads, main's runner
    RUNNER=$SETTLE .venv/bin/python $HERE/exact.py held
done | tee $HERE/reads.txt
export IO=disk_seq_write_fdatasync IOF=0.01 LO=0.9 HI=0.99
for i in 1 2; do
    .venv/bin/python $HERE/exact.py held duty
    RUNNER=$SETTLE .venv/bin/python $HERE/exact.py held
done | tee $HERE/fdatasync.txt
unset IO IOF LO HI
for s in disk_rand_read_4k disk_seq_write_fdatasync net_tcp_loopback_256k; do
    .venv/bin/python $HERE/filler.py $s 0 19 idle
done | tee $HERE/filler.txt
git worktree remove --force /tmp/settle-wt
