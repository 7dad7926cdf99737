#!/usr/bin/env bash
# A non-root user replays a released plan around a benchmark on a host where the .deb is installed.
#
# The host is a throwaway Debian 12 root (packaging/debian-root.sh: a cached debootstrap minbase),
# not this machine: installing the package here would create /etc/mimesys and a system user on
# a machine other people's tests use. Inside it: `apt install ./mimesys-agent_*.deb` and
# sysbench, a model export installed by root under /usr/local/share/mimesys/models (MODEL: what
# `mimesys export` wrote, trained on this machine's recordings, e.g. `make demo`'s
# demo-out/model-onnx), a user `alice` in group mimesys, the agent started as the unit runs it
# (user mimesys, CAP_PERFMON ambient; there is no systemd as PID 1 here, so its ExecStart is
# run by hand), then, as alice with no capability at all:
#   1. mimesys-agent generate --model MODEL --trace TRACE   (the released plan: ONNX Runtime,
#      local; TRACE is the recording the plan reproduces, e.g. demo-out/traces/app-recorded.h5)
#   2. mimesys-agent replay --strict PLAN -- sysbench ...    (offline, in alice's process: the plan
#      was made for this hardware, so --strict accepts it: the perf probe refused to alice is
#      not a hardware difference, agentd/fingerprint.py)
#   3. mimesys-agent replay --via-agent PLAN -- sysbench ... (the agent runs and measures it)
#   4. the same released plan as released for another machine (root rewrites only its recorded
#      host fingerprint: there is one machine here): replay warns, naming what differs, and
#      --strict refuses it
# and `trace info` of both traces, which says which perf metrics were measured.
# Everything runs in a private network namespace. The transcript goes to stdout.
# Usage (root): bench/replay_nonroot.sh [DEB [MODEL [TRACE]]] > bench/results/replay/nonroot-replay.txt
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
DEB="${1:-$(ls -t "$ROOT"/debian-build/mimesys-agent_*.deb 2>/dev/null | grep -v dbgsym | head -n1 || true)}"
[ -f "$DEB" ] || { echo "no .deb (run 'make deb')" >&2; exit 1; }
MODEL="${2:-$ROOT/demo-out/model-onnx}"
TRACE="${3:-$ROOT/demo-out/traces/app-recorded.h5}"
[ -f "$MODEL/manifest.json" ] || { echo "no model export at $MODEL (make demo, or mimesys export)" >&2; exit 1; }
[ -f "$TRACE" ] || { echo "no trace at $TRACE" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "needs root (chroot, mounts)" >&2; exit 1; }
. "$ROOT/packaging/debian-root.sh"
debian_root_new nonroot
cp "$DEB" "$R/tmp/"
in_root sh -c "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq /tmp/$(basename "$DEB") sysbench" \
    > "$CACHE/nonroot-apt.log" 2>&1 || { tail -20 "$CACHE/nonroot-apt.log" >&2; exit 1; }
in_root useradd --create-home --shell /bin/bash alice
in_root adduser --quiet alice mimesys

# The model, installed by root; the recording it is asked to reproduce, alice's.
mkdir -p "$R/usr/local/share/mimesys/models"
cp -r "$MODEL" "$R/usr/local/share/mimesys/models/demo"
chmod -R a+rX "$R/usr/local/share/mimesys"
cp "$TRACE" "$R/home/alice/target.h5"
in_root chown alice:alice /home/alice/target.h5

cat > "$R/tmp/session.sh" <<'SH'
set -u
echo "\$ dpkg -l mimesys-agent | tail -1"; dpkg -l mimesys-agent | tail -1
echo "\$ cat /etc/debian_version"; cat /etc/debian_version
echo "\$ stat -c '%A %U:%G %n' /run/mimesys /run/mimesys/run.lock /var/lib/mimesys/replay /etc/mimesys/token"
stat -c '%A %U:%G %n' /run/mimesys /run/mimesys/run.lock /var/lib/mimesys/replay /etc/mimesys/token
echo "\$ cat /proc/sys/kernel/perf_event_paranoid"; cat /proc/sys/kernel/perf_event_paranoid
echo
echo "# the agent's calibration of the paced variants' bases (a generated plan uses paced variants,"
echo "# which run at a fraction of the host's calibrated rate), once after install, as the agent's user"
CAL="--only disk_seq_write_direct_1m_qd4 --only disk_seq_read_1m_qd4 --only net_tcp_loopback --only mem_stream_triad_256M"
echo "mimesys\$ mimesys-agent calibrate --config /etc/mimesys/agent.toml $CAL --probe-seconds 0 --no-progress"
setpriv --reuid=mimesys --regid=mimesys --init-groups --inh-caps=+perfmon --ambient-caps=+perfmon \
    /usr/bin/mimesys-agent calibrate --config /etc/mimesys/agent.toml $CAL --probe-seconds 0 --no-progress 2>&1
echo "[exit status $?]"
stat -c '%A %U:%G %n' /var/lib/mimesys/calibration.json
echo
echo "# the agent, as the unit runs it: user mimesys, CAP_PERFMON (no systemd as PID 1 here)"
setpriv --reuid=mimesys --regid=mimesys --init-groups --inh-caps=+perfmon --ambient-caps=+perfmon \
    /usr/bin/mimesys-agent serve --config /etc/mimesys/agent.toml > /tmp/agent.log 2>&1 &
AGENT=$!
for i in $(seq 60); do grep -qs "listening on" /tmp/agent.log && break; sleep 0.5; done
grep "listening on" /tmp/agent.log | head -1
echo
as_alice() { setpriv --reuid=alice --regid=alice --init-groups env -i PATH=/usr/bin:/bin HOME=/home/alice USER=alice \
    sh -c "cd /home/alice && $*"; }
run() { echo "alice\$ $*"; as_alice "$*" 2>&1; echo "[exit status $?]"; echo; }
run id
run grep Cap /proc/self/status
echo "# the released plan: generated from the installed model, for the recording target.h5"
run mimesys-agent generate --model /usr/local/share/mimesys/models/demo --trace target.h5 -o plan.h5 --no-progress
run mimesys-agent plan show plan.h5
run mimesys-agent replay plan.h5 --strict -o offline.h5 --no-progress -- sysbench cpu --threads=1 --time=12 run
run mimesys-agent trace info offline.h5
run mimesys-agent replay plan.h5 --via-agent -o via-agent.h5 -- sysbench cpu --threads=1 --time=12 run
run mimesys-agent trace info via-agent.h5
run "mimesys-agent replay plan.h5 --no-record -- sh -c 'kill -TERM \$\$'"
echo "# the same plan as released for another machine: root rewrites its recorded host fingerprint"
echo "# (the planner's output is unchanged; there is one machine here)"
cat > /tmp/other-host.py <<'PY'
from mimesys.plan import Plan
p = Plan.read("/home/alice/plan.h5")
fp = dict(p.host_fingerprint)
fp["cpu"] = {**fp["cpu"], "model": "AMD EPYC 9654 96-Core Processor", "logical_cpus": 192, "physical_cores": 96}
fp["memory"] = {**fp["memory"], "total_B": 768 << 30}
p.host_fingerprint = fp
p.write("/home/alice/plan-other-host.h5")
PY
echo "root# cat /tmp/other-host.py"; cat /tmp/other-host.py
echo "root# python3 /tmp/other-host.py"; python3 /tmp/other-host.py; echo "[exit status $?]"
chown alice:alice /home/alice/plan-other-host.h5
echo
run mimesys-agent plan show plan-other-host.h5
run mimesys-agent replay plan-other-host.h5 --no-record -- sleep 2
run mimesys-agent replay plan-other-host.h5 --no-record --strict -- sleep 2
kill $AGENT; wait $AGENT 2>/dev/null
echo "# agent log (last lines)"; tail -5 /tmp/agent.log
SH
echo "# $(date -u +%Y-%m-%dT%H:%M:%SZ) bench/replay_nonroot.sh on $(uname -r), host $(nproc) CPUs; package $(basename "$DEB")"
echo "# a throwaway Debian 12 root (debootstrap) with the .deb installed by apt; private network namespace"
unshare --net sh -c "ip link set lo up 2>/dev/null || true; chroot '$R' /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin sh /tmp/session.sh"
