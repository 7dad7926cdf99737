#!/bin/bash
# same plans through the HostBackend: tick-sampled busy (old: 744c258 tree) vs wall - idle (new: /work/main)
export MIMESYS_AGENT_CONFIG=/work/s32/agent/agent.toml
D=/work/main/bench/results/fidelity/hold-late-2026-11-27/plans
P="$D/pg_oltp__inverse.h5 $D/files_git__inverse.h5 $D/kv_compress__inverse.h5 $D/db_bulk__inverse.h5 $D/burst_serve__inverse.h5"
S=${P//__inverse/__single}
for step in new:inv old:inv new:single old:single; do
  v=${step%%:*}; m=${step##*:}
  out=/work/s33/exact/$v-$m.json; [ -f $out ] && continue
  if [ $v = new ]; then T=/work/main; else T=/work/s27/wt; fi
  if [ $m = inv ]; then PP=$P; else PP=$S; fi
  (cd $T && .venv/bin/python bench/results/fidelity/hold-late-2026-11-27/backend_replay.py $out $T/stressors/build/mimesys-runner $PP 2>&1 | grep -v Warn)
done
echo ALLDONE
