#!/usr/bin/env bash
# The agent's unit under a real systemd: a Debian 12 container booted with systemd-nspawn
# (its own systemd as PID 1, private network), the .deb installed inside it with apt, then
# the unit's promises checked from inside through nsenter (no systemd-machined is needed on
# this host, whose PID 1 need not be systemd):
#   runs as mimesys with CAP_PERFMON only; /healthz answers; a plan runs in the unit's
#   cgroup; the loop pings the watchdog, and a stalled loop (SIGSTOP) is killed by it and
#   restarted; SIGKILL during a run -> restart, no runner left, scratch empty; `systemctl
#   stop` during a run leaves no process; an upgrade keeps the recorded runs; purge removes
#   the state. `systemd-analyze security` of the unit is printed.
# Every check compares what the container reports with what must hold; a FAIL exits 1.
# Needs root, debootstrap and systemd-container (installed with apt when missing) and a
# Debian mirror (only while the cached image is built; the container itself has no network).
# Usage: packaging/test-nspawn-boot.sh [path/to/mimesys-agent_<version>_<arch>.deb]
# Transcript: bench/results/nspawn/boot-transcript.txt (MIMESYS_NSPAWN_TRANSCRIPT overrides).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
DEB="${1:-$(ls -t "$ROOT"/debian-build/mimesys-agent_*.deb 2>/dev/null | grep -v dbgsym | head -n1 || true)}"
[ -f "$DEB" ] || { echo "test-nspawn-boot: no .deb (run 'make deb')" >&2; exit 1; }
DEB="$(cd "$(dirname "$DEB")" && pwd)/$(basename "$DEB")"
[ "$(id -u)" = 0 ] || { echo "test-nspawn-boot: needs root (debootstrap, systemd-nspawn)" >&2; exit 1; }
CACHE="${MIMESYS_NSPAWN_CACHE:-/var/cache/mimesys-nspawn}"
OUT="${MIMESYS_NSPAWN_TRANSCRIPT:-$ROOT/bench/results/nspawn/boot-transcript.txt}"
WATCHDOG_WAIT_S="${MIMESYS_NSPAWN_WATCHDOG_WAIT_S:-120}"
mkdir -p "$CACHE" "$(dirname "$OUT")"
exec > >(tee "$OUT") 2>&1
printf '$ %s\n' "${MIMESYS_NSPAWN_COMMAND:-$0 $*}"
printf '# %s, host kernel %s, host PID 1: %s, deb %s (sha256 %s, built %s), tree %s\n' "$(date -u +%FT%TZ)" \
    "$(uname -r)" "$(cat /proc/1/comm)" "$(basename "$DEB")" "$(sha256sum "$DEB" | cut -c1-12)" \
    "$(date -u -r "$DEB" +%FT%TZ)" "$(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo '?')"
say() { printf '[nspawn-boot] %s\n' "$*"; }
fails=0; ok() { printf '  ok    %s\n' "$*"; }; bad() { printf '  FAIL  %s\n' "$*"; fails=$((fails + 1)); }
fatal() { bad "$*"; say "stopping: later checks need this one"; exit 1; }

missing=""
command -v debootstrap >/dev/null || missing="$missing debootstrap"
command -v systemd-nspawn >/dev/null || missing="$missing systemd-container"
if [ -n "$missing" ]; then
    say "installing$missing"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
fi

# The image: bookworm minbase + systemd + the package's Debian dependencies, cached as a
# tarball keyed by the Depends line so that reruns skip the mirror entirely (and the
# container, which has no network, can `apt install` the .deb offline).
DEPENDS="$(dpkg-deb -f "$DEB" Depends)"
KEY="$(printf 'v1\n%s\n' "$DEPENDS" | sha256sum | cut -c1-12)"
IMG="$CACHE/bookworm-systemd-$KEY.tar"
in_chroot() { chroot "$1" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root "${@:2}"; }
if [ ! -f "$IMG" ]; then
    tmp="$(mktemp -d "$CACHE/image.XXXX")"
    # the package tests' cached minbase tarball (packaging/debian-root.sh; debootstrapped once)
    minbase="$(. "$ROOT/packaging/debian-root.sh" && debian_minbase && echo "$BASE")" \
        || fatal "no bookworm minbase (debootstrap failed)"
    say "image: from $minbase"
    tar -C "$tmp" -xf "$minbase"
    cp /etc/resolv.conf "$tmp/etc/resolv.conf"
    mount -t proc proc "$tmp/proc"
    say "image: apt install systemd, dbus and the package's dependencies (log $CACHE/image-apt.log)"
    if ! in_chroot "$tmp" sh -c "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
            --no-install-recommends systemd systemd-sysv dbus procps python3 \
         && DEBIAN_FRONTEND=noninteractive apt-get satisfy -y -q --no-install-recommends '$DEPENDS' \
         && apt-get clean" > "$CACHE/image-apt.log" 2>&1; then
        umount "$tmp/proc"; tail -20 "$CACHE/image-apt.log"; rm -rf --one-file-system "$tmp"
        fatal "building the image failed (log $CACHE/image-apt.log)"
    fi
    umount "$tmp/proc"
    : > "$tmp/etc/machine-id"          # a fresh id at each boot (systemd makes one)
    rm -f "$tmp/etc/resolv.conf"
    tar -C "$tmp" -cf "$IMG.tmp" . && mv "$IMG.tmp" "$IMG" && rm -rf --one-file-system "$tmp"
fi

M="mimesys-boot-$$"
R="$(mktemp -d "$CACHE/root.XXXX")"
NSPID=""
cleanup() {
    if [ -n "$NSPID" ] && kill -0 "$NSPID" 2>/dev/null; then
        kill -TERM "$NSPID" 2>/dev/null || true          # nspawn asks the container's systemd to halt
        for _ in $(seq 30); do kill -0 "$NSPID" 2>/dev/null || break; sleep 1; done
        kill -KILL "$NSPID" 2>/dev/null || true
        wait "$NSPID" 2>/dev/null || true
    fi
    if grep -q " $R/" /proc/mounts; then
        echo "test-nspawn-boot: mounts remain under $R; not deleting it" >&2
    else
        rm -rf --one-file-system "$R"
    fi
}
trap cleanup EXIT
tar -C "$R" -xf "$IMG"
chmod 0755 "$R"
echo "$M" > "$R/etc/hostname"
cp "$DEB" "$R/var/tmp/"
# An upgrade candidate: the same package with a higher version (control file rewritten).
UPV="$(dpkg-deb -f "$DEB" Version)+nspawn1"
up="$(mktemp -d "$CACHE/upgrade.XXXX")"
dpkg-deb -R "$DEB" "$up/pkg"
sed -i "s/^Version: .*/Version: $UPV/" "$up/pkg/DEBIAN/control"
dpkg-deb -b -Zgzip "$up/pkg" "$R/var/tmp/upgrade.deb" >/dev/null
rm -rf "$up"

# --register=no --keep-unit: no systemd-machined or system bus on this host to register with.
# --capability=CAP_PERFMON: nspawn's default bounding set leaves it out, and a unit cannot
# grant what its manager lacks (the agent would run with an empty set: a real host's
# systemd has the full set). --system-call-filter=perf_event_open: nspawn's own seccomp
# allow-list refuses it (EPERM for every process in the container, whatever its
# capabilities), which a real host does not do; the unit's own filter is what is under test.
say "booting $R with systemd-nspawn -b (private network), log $CACHE/last-run.console"
systemd-nspawn -D "$R" -b -M "$M" --register=no --keep-unit --private-network --capability=CAP_PERFMON \
    --system-call-filter=perf_event_open --console=pipe \
    > "$CACHE/last-run.console" 2>&1 < /dev/null &
NSPID=$!
LEADER=""
for _ in $(seq 30); do
    LEADER="$(pgrep -P "$NSPID" -x systemd || true)"; [ -n "$LEADER" ] && break; sleep 1
done
[ -n "$LEADER" ] || fatal "no systemd inside the container 30 s after systemd-nspawn started: $(cat "$CACHE/last-run.console")"
c() { nsenter -t "$LEADER" -a -- /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 "$@"; }
state="$(c timeout 120 systemctl is-system-running --wait 2>&1 || true)"
case "$state" in
    running) ok "container booted: PID 1 is $(c cat /proc/1/comm), systemd $(c systemctl --version | head -n1 | cut -d' ' -f2), state $state";;
    degraded) ok "container booted (state degraded; failed units: $(c systemctl --failed --plain --no-legend | cut -d' ' -f1 | tr '\n' ' '))";;
    *) fatal "container did not finish booting: is-system-running says '$state'; jobs: $(c systemctl list-jobs --no-legend | head)";;
esac

unit=mimesys-agent.service
prop() { c systemctl show -P "$1" "$unit"; }
say "apt install /var/tmp/$(basename "$DEB") inside the booted container (no network: dependencies are in the image)"
if c sh -c "DEBIAN_FRONTEND=noninteractive apt-get install -y -q /var/tmp/$(basename "$DEB")" > "$CACHE/last-run.apt.log" 2>&1
then ok "apt install succeeded"; else tail -20 "$CACHE/last-run.apt.log"; fatal "apt install failed (log $CACHE/last-run.apt.log)"; fi

wait_active() {   # wait_active <seconds> [pid-to-differ-from]: the unit active with a new MainPID
    local pid
    for _ in $(seq "$1"); do
        pid="$(prop MainPID)"
        if [ "$(prop ActiveState)" = active ] && [ "$pid" != 0 ] && [ "$pid" != "${2:-0}" ]; then
            echo "$pid"; return 0
        fi
        sleep 1
    done
    return 1
}
PID="$(wait_active 60)" || fatal "$unit not active 60 s after install: $(c systemctl status --no-pager -n 20 "$unit")"
T_START="$(date +%s)"
ok "$unit active after install, MainPID $PID (started by the postinst, Type=notify: READY=1 was sent)"

# Identity and privileges of the running agent, from the kernel's view.
uid="$(c id -u mimesys)"
uids="$(c awk '/^Uid:/ {print $2, $3, $4, $5}' /proc/$PID/status)"
[ "$uids" = "$uid $uid $uid $uid" ] && ok "agent runs as mimesys (uid $uid real/effective/saved/fs)" || bad "agent Uid line '$uids', mimesys is $uid"
# CAP_PERFMON is capability 38: the only bit set in the effective/permitted/bounding sets.
want="$(printf '%016x' $((1 << 38)))"
caps="$(c sh -c "grep -E '^Cap(Eff|Prm|Bnd|Amb)' /proc/$PID/status" | tr '\t\n' ' ')"
for k in CapEff CapPrm CapBnd CapAmb; do
    v="$(c awk -v k="$k:" '$1 == k {print $2}' /proc/$PID/status)"
    [ "$v" = "$want" ] && ok "$k $v = CAP_PERFMON only" || bad "$k $v, want $want (CAP_PERFMON only); $caps"
done
# The run lock: root's file of group mimesys in root's directory (no member can replace it).
perm="$(c stat -c '%U:%G %a' /run/mimesys /run/mimesys/run.lock | tr '\n' ' ')"
[ "$perm" = "root:root 755 root:mimesys 660 " ] && ok "run lock: /run/mimesys root:root 755, run.lock root:mimesys 660" \
    || bad "run lock ownership/modes '$perm', want 'root:root 755 root:mimesys 660'"
nnp="$(c awk '/^NoNewPrivs:/ {print $2}' /proc/$PID/status)"; sec="$(c awk '/^Seccomp:/ {print $2}' /proc/$PID/status)"
[ "$nnp" = 1 ] && [ "$sec" = 2 ] && ok "NoNewPrivs 1, Seccomp 2 (filter on)" || bad "NoNewPrivs '$nnp', Seccomp '$sec' (want 1 and 2)"

# /healthz and /v1/info with the token, and a wrong token refused: python3 inside the container.
cat > "$R/var/tmp/probe.py" <<'PY'
import sys, time, tomllib, urllib.request, urllib.error
cfg = tomllib.load(open("/etc/mimesys/agent.toml", "rb")).get("api", {})
host, port = cfg.get("bind", "127.0.0.1"), cfg.get("port", 7433)
host = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host)
token = open(cfg.get("token_file", "/etc/mimesys/token")).read().strip()
def get(path, tok):
    req = urllib.request.Request(f"http://{host}:{port}{path}", headers={"Authorization": f"Bearer {tok}"})
    t = time.monotonic()
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status, len(r.read()), time.monotonic() - t
    except urllib.error.HTTPError as e:
        return e.code, 0, time.monotonic() - t
deadline = time.time() + 30
while True:
    try:
        st, n, dt = get("/healthz", token); break
    except OSError as e:
        if time.time() > deadline:
            sys.exit(f"/healthz: no answer in 30 s: {e}")
        time.sleep(0.5)
print(f"/healthz {st} ({n} bytes, {dt * 1000:.1f} ms)")
wrong = get("/healthz", "0" * 64)[0]
print(f"/healthz with a wrong token {wrong}")
sys.exit(0 if st == 200 and wrong == 401 else 1)
PY
if out="$(c python3 /var/tmp/probe.py 2>&1)"; then ok "API on 127.0.0.1 inside the container: $(echo "$out" | tr '\n' ';')"
else bad "API probe: $out"; fi

# Plans written by the installed code itself (its catalog, this container's CPUs).
cat > "$R/var/tmp/plan.py" <<'PY'
import sys
sys.path.insert(0, "/usr/lib/mimesys/vendor")
import numpy as np
from mimesys.catalog import load_catalog
from mimesys.hostpaths import online_cpus
from mimesys.plan import Plan
name, windows, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
cat = load_catalog()
a = np.zeros((windows, len(cat), len(online_cpus())), np.float32)
# "class:cpu": the catalog's first stressor of that class; else a stressor's name.
col = cat.by_class(name[6:])[0] if name.startswith("class:") else cat.names.index(name)
a[:, col, 0] = 0.5
Plan.from_catalog(a, cat).validate(cat).write(out)
PY
c python3 /var/tmp/plan.py class:cpu 3 /var/tmp/short.h5 && c python3 /var/tmp/plan.py disk_fallocate_punch 600 /var/tmp/long.h5 \
    || fatal "could not write the test plans with the installed code"

say "a 3-window plan through the agent: mimesys-agent replay --via-agent (as root in the container)"
if out="$(c timeout 120 mimesys-agent replay /var/tmp/short.h5 --via-agent -o /var/tmp/short-trace.h5 --no-progress 2>&1)" \
   && shape="$(c python3 -c 'import sys; sys.path.insert(0, "/usr/lib/mimesys/vendor"); import h5py
f = h5py.File("/var/tmp/short-trace.h5"); print(f["values"].shape)' 2>&1)"
then ok "plan executed by the agent in its sandbox, trace values $shape"
else bad "replay via the agent: $out $shape"; fi
# Sampling inside the sandbox: the software perf events (perf_event_open system-wide, which
# needs CAP_PERFMON unless kernel.perf_event_paranoid <= 0) measured in every window.
paranoid="$(c cat /proc/sys/kernel/perf_event_paranoid)"
if perf="$(c python3 -c 'import sys; sys.path.insert(0, "/usr/lib/mimesys/vendor"); import h5py, numpy as np
f = h5py.File("/var/tmp/short-trace.h5"); names = [n.decode() if isinstance(n, bytes) else n for n in f["metric_names"][:]]
v = f["values"][:]; cols = [i for i, n in enumerate(names) if n.startswith("perf.")]
meas = [names[i] for i in cols if np.isfinite(v[:, i]).all()]
print(f"{len(meas)}/{len(cols)} perf metrics measured in all {v.shape[0]} windows: {meas}, {int(np.isfinite(v).all(axis=0).sum())}/{v.shape[1]} metrics in all")
sys.exit(0 if any(m.startswith("perf.ctx_switches") for m in meas) else 1)' 2>&1)"
then ok "sampled in the sandbox (perf_event_paranoid=$paranoid): $perf"
else bad "perf sampling in the sandbox (perf_event_paranoid=$paranoid): $perf"; fi
runs_before="$(c sh -c 'ls /var/lib/mimesys/runs' | tr '\n' ' ')"
[ -n "$runs_before" ] && ok "run recorded under /var/lib/mimesys/runs: $runs_before" || bad "no run recorded under /var/lib/mimesys/runs"

start_long() {   # a 600-window disk plan in the background; prints the runner's PID once it runs
    c sh -c 'setsid mimesys-agent replay /var/tmp/long.h5 --via-agent --no-progress > /var/tmp/long.log 2>&1 < /dev/null &'
    local r
    for _ in $(seq 60); do
        r="$(c pgrep -x mimesys-runner | head -n1 || true)"
        if [ -n "$r" ] && c sh -c "ls -l /proc/$r/fd 2>/dev/null | grep -q /var/lib/mimesys/scratch/"; then echo "$r"; return 0; fi
        sleep 1
    done
    return 1
}
leftovers() {   # runners, entries in scratch, and open files below scratch, anywhere in the container
    local runners files fdrefs
    runners="$(c pgrep -x mimesys-runner | tr '\n' ' ' || true)"; files="$(c ls -A /var/lib/mimesys/scratch 2>&1 | tr '\n' ' ' || true)"
    fdrefs="$(c sh -c 'ls -l /proc/[0-9]*/fd 2>/dev/null | grep -c /var/lib/mimesys/scratch/' || true)"
    echo "runners=[$runners] scratch=[$files] open-scratch-fds=$fdrefs"
}
CLEAN="runners=[] scratch=[] open-scratch-fds=0"

# The event loop pings the watchdog: the agent outlives WatchdogSec untouched.
wd="$(prop WatchdogUSec)"; wd_s="$(c systemd-analyze timespan "$wd" | awk '/μs:|us:/ {print int($2 / 1000000)}')"
[ -n "$wd_s" ] && [ "$wd_s" -gt 0 ] || fatal "unit has no watchdog (WatchdogUSec=$wd)"
left=$(( T_START + wd_s + 5 - $(date +%s) )); [ "$left" -gt 0 ] && sleep "$left"
[ "$(prop MainPID)" = "$PID" ] && [ "$(prop NRestarts)" = 0 ] \
    && ok "same MainPID $PID, NRestarts 0 after $(( $(date +%s) - T_START )) s > WatchdogSec ${wd_s} s: the loop pings the watchdog" \
    || bad "agent restarted without a stall: MainPID $(prop MainPID) (was $PID), NRestarts $(prop NRestarts)"

say "stalling the event loop: SIGSTOP to MainPID $PID, waiting for the watchdog (WatchdogSec ${wd_s} s)"
n0="$(prop NRestarts)"; t0="$(date +%s)"
c kill -STOP "$PID"
NEW=""
for _ in $(seq "$WATCHDOG_WAIT_S"); do
    if [ "$(prop NRestarts)" -gt "$n0" ]; then NEW="$(wait_active 60 "$PID" || true)"; break; fi
    sleep 1
done
wdlog="$(c journalctl -q -u "$unit" --no-pager -o cat | grep -i watchdog | head -n2 | tr '\n' ' ')"
if [ -n "$NEW" ] && echo "$wdlog" | grep -qi 'watchdog timeout'; then
    ok "watchdog killed the stalled agent and systemd restarted it after $(( $(date +%s) - t0 )) s: NRestarts $n0 -> $(prop NRestarts), MainPID $PID -> $NEW; journal: $wdlog"
else
    bad "no watchdog restart within ${WATCHDOG_WAIT_S} s: NRestarts $(prop NRestarts), MainPID $(prop MainPID), journal: '$wdlog'"
    c kill -CONT "$PID" 2>/dev/null || true
    NEW="$(wait_active 60 || true)"
fi
PID="${NEW:-$(prop MainPID)}"

say "SIGKILL to the agent during a run (disk plan, scratch in use)"
if RUNNER="$(start_long)"; then
    rcg="$(c cat /proc/$RUNNER/cgroup | grep -o 'mimesys-agent.service' | head -n1)"
    [ "$rcg" = mimesys-agent.service ] && ok "runner $RUNNER runs in the unit's cgroup with scratch files open: $(c awk '/^Uid:|^CapEff:/ {printf "%s %s ", $1, $2}' /proc/$RUNNER/status)" \
        || bad "runner $RUNNER is not in mimesys-agent.service's cgroup: $(c cat /proc/$RUNNER/cgroup | tr '\n' ' ')"
    n0="$(prop NRestarts)"
    c kill -KILL "$PID"
    if NEW="$(wait_active 30 "$PID")"; then
        ok "restarted after SIGKILL: MainPID $PID -> $NEW, NRestarts $n0 -> $(prop NRestarts), Result before restart: $(c journalctl -q -u "$unit" -o cat --no-pager | grep -m1 -o 'Main process exited, code=killed, status=9/KILL' || echo '?')"
        left_over="$(leftovers)"
        [ "$left_over" = "$CLEAN" ] && ok "no runner left (old runner $RUNNER gone), scratch empty, no open scratch files" \
            || bad "left after SIGKILL: $left_over"
        [ "$(c pgrep -u mimesys | tr '\n' ' ')" = "$NEW " ] && ok "the only process of user mimesys is the new agent $NEW" \
            || bad "processes of mimesys after restart: $(c pgrep -a -u mimesys | tr '\n' ';')"
    else bad "no restart 30 s after SIGKILL: $(c systemctl status --no-pager -n 10 "$unit")"; fi
    PID="$(prop MainPID)"
else bad "the long disk plan did not start a runner with scratch files: $(c cat /var/tmp/long.log)"; fi

say "systemctl stop during a run"
if RUNNER="$(start_long)"; then
    ok "runner $RUNNER running with scratch files open"
    c systemctl stop "$unit"
    st="$(prop ActiveState)"; left_over="$(leftovers)"; procs="$(c pgrep -a -u mimesys | tr '\n' ';' || true)"
    [ "$st" = inactive ] && [ "$left_over" = "$CLEAN" ] && [ -z "$procs" ] \
        && ok "after stop: ActiveState $st, no process of mimesys, no runner, scratch empty" \
        || bad "after stop: ActiveState $st, $left_over, processes of mimesys: [$procs]"
else bad "the long disk plan did not start a runner: $(c cat /var/tmp/long.log)"; fi
c systemctl start "$unit" && PID="$(wait_active 60)" && ok "started again, MainPID $PID" || bad "could not start $unit again"

say "systemd-analyze security $unit (inside the container)"
c systemd-analyze security --no-pager "$unit" | sed 's/^/    /'
exposure="$(c systemd-analyze security --no-pager "$unit" | grep -o 'Overall exposure level for.*')"
say "$exposure"

say "upgrade to $UPV: apt install /var/tmp/upgrade.deb"
hist() { c sh -c 'cd /var/lib/mimesys/runs && find . -type f -exec sha256sum {} + | sort'; }
h0="$(hist)"
# The mimesys user owns /var/lib/mimesys: a symlink it plants there (model -> /usr/lib/mimesys,
# where root's runner lives) must not get root's directory chowned to it by the upgrade's postinst.
c setpriv --reuid=mimesys --regid=mimesys --clear-groups \
    sh -c 'mv /var/lib/mimesys/model /var/lib/mimesys/model.orig && ln -s /usr/lib/mimesys /var/lib/mimesys/model' \
    && planted=1 || { planted=0; bad "could not plant /var/lib/mimesys/model -> /usr/lib/mimesys as mimesys"; }
if c sh -c "DEBIAN_FRONTEND=noninteractive apt-get install -y -q /var/tmp/upgrade.deb" > "$CACHE/last-run.upgrade.log" 2>&1; then
    v="$(c dpkg-query -W -f '${Version}' mimesys-agent)"
    [ "$v" = "$UPV" ] && ok "upgraded: dpkg says $v" || bad "after upgrade dpkg says '$v', want $UPV"
    NEW="$(wait_active 60 "$PID" || true)"
    [ -n "$NEW" ] && ok "agent restarted by the upgrade: MainPID $PID -> $NEW" || bad "agent not restarted/active after upgrade: $(prop ActiveState) $(prop MainPID)"
    h1="$(hist)"
    [ -n "$h0" ] && [ "$h0" = "$h1" ] && ok "run history unchanged across the upgrade ($(echo "$h1" | wc -l) files, same sha256)" \
        || bad "run history changed across the upgrade: before [$h0] after [$h1]"
    if [ "$planted" = 1 ]; then
        own="$(c stat -c '%U:%G %a' /usr/lib/mimesys)"
        [ "${own%% *}" = "root:root" ] && ok "the symlink mimesys planted (model -> /usr/lib/mimesys) moved no ownership: /usr/lib/mimesys $own" \
            || bad "the upgrade followed the planted symlink: /usr/lib/mimesys is now $own"
    fi
else tail -20 "$CACHE/last-run.upgrade.log"; bad "upgrade failed (log $CACHE/last-run.upgrade.log)"; fi

[ "$planted" = 1 ] && c sh -c 'rm /var/lib/mimesys/model && mv /var/lib/mimesys/model.orig /var/lib/mimesys/model'
say "apt purge mimesys-agent"
if c sh -c 'DEBIAN_FRONTEND=noninteractive apt-get purge -y -q mimesys-agent' > "$CACHE/last-run.purge.log" 2>&1; then
    for p in /var/lib/mimesys /etc/mimesys /usr/lib/mimesys /lib/systemd/system/mimesys-agent.service; do
        c test ! -e "$p" && ok "purge removed $p" || bad "$p left after purge"
    done
    procs="$(c pgrep -a -u mimesys || true)"
    [ -z "$procs" ] && ok "no process of mimesys after purge" || bad "processes after purge: $procs"
    lf="$(c systemctl show -P LoadState "$unit")"
    [ "$lf" = not-found ] && ok "unit LoadState $lf after purge" || bad "unit LoadState '$lf' after purge"
else bad "purge failed (log $CACHE/last-run.purge.log)"; fi

if [ "$fails" = 0 ]; then say "all checks passed"; else say "$fails checks failed"; exit 1; fi
