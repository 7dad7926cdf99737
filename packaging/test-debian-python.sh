#!/usr/bin/env bash
# The agent's tests on the library versions the .deb actually runs on: Debian 12's python3-*
# packages (h5py 3.7, numpy 1.24, tqdm 4.64, click 8.1, ...) plus the two vendored wheels
# (/usr/lib/mimesys/vendor), in a throwaway bookworm root with the package installed. The
# code under test is this checkout's agentd and mimesys (copied in), not the package's: the point is the
# libraries. Tests that need the controller (PyTorch) are not agent tests and are not run.
# Usage (root, Debian mirror): packaging/test-debian-python.sh [DEB] [pytest args...]
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
DEB="${1:-$(ls -t "$ROOT"/debian-build/mimesys-agent_*.deb 2>/dev/null | grep -v dbgsym | head -n1 || true)}"
shift || true
[ -f "$DEB" ] || { echo "no .deb (run 'make deb')" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "needs root (chroot, mounts)" >&2; exit 1; }
. "$ROOT/packaging/debian-root.sh"
debian_root_new pytest
cp "$DEB" "$R/tmp/"
in_root sh -c "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq /tmp/$(basename "$DEB") \
    python3-pytest python3-pytest-timeout python3-hypothesis python3-psutil gcc make libzstd-dev pkg-config \
    systemd" > "$CACHE/pytest-apt.log" 2>&1 || { tail -20 "$CACHE/pytest-apt.log" >&2; exit 1; }
mkdir -p "$R/src"
cp -r "$ROOT/mimesys" "$ROOT/agentd" "$ROOT/stressors" "$ROOT/tests" "$ROOT/systemd" "$ROOT/packaging" "$ROOT/pyproject.toml" "$R/src/"
rm -rf "$R/src/stressors/build"
# the soak bench that tests/test_soak_short.py runs (the rest of bench/ is not agent tests)
mkdir -p "$R/src/bench" && cp "$ROOT/bench/soak.py" "$ROOT/bench/hardening_agent.py" "$R/src/bench/"
# Agent tests: the test files that import neither the controller nor torch.
tests=$(cd "$ROOT" && for f in tests/test_*.py; do grep -qE "controller|torch" "$f" || echo "$f"; done)
echo "# Debian's libraries in the root:"
cat > "$R/tmp/versions.py" <<'PY'
import sys
sys.path.insert(0, "/usr/lib/mimesys/vendor")
import aiohttp, click, cryptography, h5py, msgpack, numpy, onnxruntime, prometheus_client, pyroute2, tqdm
for m in (h5py, numpy, tqdm, click, msgpack, pyroute2, prometheus_client, cryptography, aiohttp, onnxruntime):
    print(f"  {m.__name__} {getattr(m, '__version__', '?')}")
PY
in_root python3 /tmp/versions.py
in_root sh -c "cd /src && make -s -C stressors >/dev/null && \
  PYTHONPATH=/src:/usr/lib/mimesys/vendor MIMESYS_RUNNER=/src/stressors/build/mimesys-runner \
  python3 -m pytest -q -p no:cacheprovider -o addopts='' $(echo $tests) $*"
