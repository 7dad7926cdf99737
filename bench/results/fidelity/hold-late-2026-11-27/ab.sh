#!/bin/bash
# runner A/B through the real HostBackend: old (HEAD) vs late (no deadband, tail last after a second reading),
# interleaved, same inverse plans; single plans once per rep (never held: the binary does not matter)
cd "$(dirname "$0")/../../../.."
OUT=${OUT:?a folder with runner-old, runner-late (the two builds) and for the results}
export MIMESYS_AGENT_CONFIG=${MIMESYS_AGENT_CONFIG:?an agent config with this host calibration}
D=bench/results/fidelity/hold-late-2026-11-27/plans
P="$D/pg_oltp__inverse.h5 $D/files_git__inverse.h5 $D/kv_compress__inverse.h5 $D/db_bulk__inverse.h5 $D/burst_serve__inverse.h5"
for rep in 0 1 2; do
  for b in old late single; do
    [ -f $OUT/ab2-$b-$rep.json ] && continue
    if [ $b = single ]; then PP=${P//__inverse/__single}; bin=old; else PP=$P; bin=$b; fi
    .venv/bin/python bench/results/fidelity/hold-late-2026-11-27/backend_replay.py $OUT/ab2-$b-$rep.json $OUT/runner-$bin $PP 2>&1 | grep -v Warn
  done
done
echo ALLDONE
