#!/bin/sh
# Prints the path of the mimesys-runner binary that `make -C stressors` built, so that
# debian/rules does not hard-code the stressors room's build layout.
set -eu
cd "$(dirname "$0")/.."
for p in agentd/_bin/mimesys-runner stressors/build/mimesys-runner stressors/mimesys-runner; do
    if [ -x "$p" ] && [ -f "$p" ]; then echo "$p"; exit 0; fi
done
echo "find-runner.sh: no mimesys-runner binary after 'make -C stressors' (looked in agentd/_bin, stressors/build, stressors)" >&2
exit 1
