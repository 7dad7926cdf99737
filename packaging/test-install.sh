#!/usr/bin/env bash
# `apt install ./mimesys-agent_*.deb` on a fresh Debian 12 root, as far as a machine without
# systemd as PID 1 allows: a debootstrap'd bookworm chroot (cached as a tarball after the
# first run; needs root and a Debian mirror), the package installed with apt (its Debian
# dependencies resolved from the mirror), the postinst's user/token/directories checked,
# the unit verified, the agent started with the unit's ExecStart in a private network
# namespace and asked for /v1/info with the generated token, then purge checked.
# What it cannot show: systemd starting the unit (no systemd as PID 1 here) and the
# unit's sandboxing directives in effect.
# Usage: packaging/test-install.sh [path/to/mimesys-agent_<version>_<arch>.deb]
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
DEB="${1:-$(ls -t "$ROOT"/debian-build/mimesys-agent_*.deb 2>/dev/null | grep -v dbgsym | head -n1 || true)}"
[ -f "$DEB" ] || { echo "test-install: no .deb (run 'make deb')" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "test-install: needs root (chroot, mounts)" >&2; exit 1; }
. "$ROOT/packaging/debian-root.sh"
say() { printf '[test-install] %s\n' "$*"; }
fails=0; ok() { printf '  ok    %s\n' "$*"; }; bad() { printf '  FAIL  %s\n' "$*"; fails=$((fails + 1)); }

debian_root_new root
cp "$DEB" "$R/tmp/"
say "apt install ./$(basename "$DEB") into a fresh bookworm root ($R)"
if in_root sh -c "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -q /tmp/$(basename "$DEB")" > "$CACHE/apt.log" 2>&1
then ok "apt install succeeded"; else tail -20 "$CACHE/apt.log"; bad "apt install failed (log $CACHE/apt.log)"; exit 1; fi

in_root getent passwd mimesys >/dev/null && ok "system user mimesys" || bad "no user mimesys"
tok_stat="$(in_root stat -c '%a %U' /etc/mimesys/token 2>/dev/null || true)"
[ "$tok_stat" = "640 mimesys" ] && ok "token /etc/mimesys/token mode 0640, owner mimesys (group mimesys reads it)" || bad "token: '$tok_stat'"
in_root grep -Eqx '[0-9a-f]{64}' /etc/mimesys/token && ok "token is 256 random bits (hex)" || bad "token malformed"
rep_stat="$(in_root stat -c '%a %G' /var/lib/mimesys/replay /run/mimesys/run.lock 2>/dev/null | tr '\n' ' ' || true)"
[ "$rep_stat" = "3770 mimesys 660 mimesys " ] && ok "replay area 3770 and run lock 0660, group mimesys" || bad "replay area / lock: '$rep_stat'"
for d in /var/lib/mimesys /var/lib/mimesys/runs /var/lib/mimesys/scratch /var/lib/mimesys/model; do
    in_root test -d "$d" && ok "directory $d" || bad "no directory $d"
done
in_root test -L /etc/systemd/system/multi-user.target.wants/mimesys-agent.service \
    && ok "unit enabled (multi-user.target.wants)" || bad "unit not enabled"
ver="$(in_root mimesys-agent --version 2>&1)" && ok "mimesys-agent --version: $ver" || bad "mimesys-agent --version: $ver"
if in_root python3 -c 'import sys; sys.path.insert(0, "/usr/lib/mimesys/vendor"); import onnxruntime, aiohttp, numpy, h5py; print(onnxruntime.__version__, aiohttp.__version__, numpy.__version__, h5py.__version__)' > "$CACHE/versions.txt" 2>&1
then ok "imports on Debian's python3: onnxruntime aiohttp numpy h5py = $(cat "$CACHE/versions.txt")"
else bad "vendored imports: $(cat "$CACHE/versions.txt")"; fi
# Start the agent as the unit would (its ExecStart and User), in a private network namespace
# so that its port cannot collide with anything on this machine.
exec_start="$(sed -n 's/^ExecStart=[-+!@:]*//p' "$R/lib/systemd/system/mimesys-agent.service" | head -n1)"
user="$(sed -n 's/^User=//p' "$R/lib/systemd/system/mimesys-agent.service" | head -n1)"
say "starting the agent: ${user:+as $user: }$exec_start"
as_user=(); [ -n "$user" ] && as_user=(setpriv --reuid="$user" --regid="$user" --init-groups)
cat > "$R/tmp/probe.py" <<'PY'
import sys, time, tomllib, urllib.request
cfg = tomllib.load(open("/etc/mimesys/agent.toml", "rb"))
api = cfg.get("api", {})
# agentd/config.py defaults where agent.toml leaves a key out.
host, port = api.get("bind", "127.0.0.1"), api.get("port", 7433)
host = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host)
token = open(api.get("token_file", "/etc/mimesys/token")).read().strip()
deadline = time.time() + 60
while True:
    try:
        req = urllib.request.Request(f"http://{host}:{port}/v1/info", headers={"Authorization": f"Bearer {token}"})
        body = urllib.request.urlopen(req, timeout=5).read()
        print(f"GET /v1/info -> 200, {len(body)} bytes of msgpack")
        break
    except Exception as e:
        if time.time() > deadline:
            sys.exit(f"agent did not answer /v1/info in 60 s: {e}")
        time.sleep(0.5)
req = urllib.request.Request(f"http://{host}:{port}/v1/info", headers={"Authorization": "Bearer wrong"})
try:
    urllib.request.urlopen(req, timeout=5)
    sys.exit("a wrong token was accepted")
except urllib.error.HTTPError as e:
    print(f"wrong token -> {e.code}")
    sys.exit(0 if e.code == 401 else 1)
PY
unshare --net sh -c "ip link set lo up
  chroot '$R' /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin ${as_user[*]} $exec_start > '$CACHE/agent.log' 2>&1 &
  pid=\$!
  chroot '$R' /usr/bin/env -i PATH=/usr/bin:/bin python3 /tmp/probe.py; rc=\$?
  kill \$pid; wait \$pid 2>/dev/null; exit \$rc" > "$CACHE/probe.txt" 2>&1 \
  && ok "agent from the package serves the API: $(tr '\n' ';' < "$CACHE/probe.txt")" \
  || bad "agent from the package: $(cat "$CACHE/probe.txt"); agent log: $(tail -5 "$CACHE/agent.log")"

# The packaged runner executing a real plan: 3 windows of the first CPU stressor at half
# duty on every thread, replayed by the installed agent as its user, trace recorded.
cat > "$R/tmp/plan.py" <<'PY'
import sys
sys.path.insert(0, "/usr/lib/mimesys/vendor")
import numpy as np
from mimesys.catalog import load_catalog
from mimesys.hostpaths import online_cpus
from mimesys.plan import Plan
cat = load_catalog()
a = np.zeros((3, len(cat), len(online_cpus())), np.float32)
a[:, cat.by_class("cpu")[0], :] = 0.5
Plan.from_catalog(a, cat).validate(cat).write("/tmp/plan.h5")
PY
if in_root python3 /tmp/plan.py > "$CACHE/replay.txt" 2>&1 && chmod 0644 "$R/tmp/plan.h5" \
   && in_root ${as_user[*]} mimesys-agent replay /tmp/plan.h5 --config /etc/mimesys/agent.toml \
        -o /var/lib/mimesys/replay.h5 --no-progress >> "$CACHE/replay.txt" 2>&1 \
   && in_root python3 -c 'import h5py; f = h5py.File("/var/lib/mimesys/replay.h5"); print("replayed trace", f["values"].shape)' >> "$CACHE/replay.txt" 2>&1
then ok "the packaged runner executed a plan: $(tail -n1 "$CACHE/replay.txt")"
else bad "replay with the packaged runner: $(tail -n5 "$CACHE/replay.txt")"; fi

if in_root sh -c 'DEBIAN_FRONTEND=noninteractive apt-get purge -y -q mimesys-agent' > "$CACHE/purge.log" 2>&1; then
    in_root test ! -e /var/lib/mimesys && in_root test ! -e /etc/mimesys/token \
        && ok "purge removed /var/lib/mimesys and the token" || bad "state left after purge"
    in_root test ! -e /usr/lib/mimesys && ok "purge removed /usr/lib/mimesys" || bad "/usr/lib/mimesys left after purge"
else bad "purge failed (log $CACHE/purge.log)"; fi

if [ "$fails" = 0 ]; then say "all checks passed"; else say "$fails checks failed"; exit 1; fi
