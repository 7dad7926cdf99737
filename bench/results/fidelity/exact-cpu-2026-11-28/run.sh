#!/bin/bash
# The consistent re-measurement under the new per-core CPU figure (8fa55a8: wall time less idle,
# iowait and steal): targets, solo profile, a 20-round campaign, forward model and replays, all
# recorded with it. main at 7216454 (the bench's replay spread came after: 9453196, --summarize-only).
set -e
R=$(cd "$(dirname "$0")" && pwd)
cd "$(dirname "$0")/../../../.."
.venv/bin/python bench/fidelity_real.py --out /work/s35/fid --campaign /work/s35/campaign --collect-rounds 20 \
    --max-round 20 --label 30min-exact --replays 2 --methods single,inverse > /work/s35/fid.log 2>&1
# held-out kinds (PostgreSQL pgbench OLTP; a git checkout and file tree churn), the same campaign
.venv/bin/python bench/fidelity_real.py --out /work/s35/fid --campaign /work/s35/campaign --max-round 20 \
    --label 30min-exact-heldout --replays 2 --methods single,inverse --mixes pg_oltp,files_git > /work/s35/heldout.log 2>&1
# the summary again with the replay spread (9453196)
.venv/bin/python bench/fidelity_real.py --out /work/s35/fid --campaign /work/s35/campaign --max-round 20 \
    --label 30min-exact --replays 2 --methods single,inverse --summarize-only > /work/s35/five-summary.log 2>&1
.venv/bin/python bench/fidelity_check.py /work/s35/fid/30min-exact/fidelity.json > $R/check-five.txt
.venv/bin/python bench/fidelity_check.py /work/s35/fid/30min-exact-heldout/fidelity.json > $R/check-heldout.txt
.venv/bin/python $R/cpu_by_window_kind.py /work/s35/fid 30min-exact "" > $R/cpu_by_window_kind.txt
.venv/bin/python $R/ratios.py /work/s35/fid 30min-exact > $R/ratios.txt
.venv/bin/python $R/ratios.py /work/s35/fid 30min-exact-heldout >> $R/ratios.txt
# the demo-sized part of the same campaign (rounds 0-1), main at 89a3edb
.venv/bin/python bench/fidelity_real.py --out /work/s35/fid --campaign /work/s35/campaign --max-round 1 \
    --label demo-exact --replays 2 --methods single,inverse > /work/s35/demo.log 2>&1
.venv/bin/python bench/fidelity_check.py /work/s35/fid/demo-exact/fidelity.json > $R/check-demo.txt
