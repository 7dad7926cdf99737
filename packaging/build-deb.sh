#!/usr/bin/env bash
# Builds debian-build/mimesys-agent_<version>_<arch>.deb with dpkg-buildpackage (debhelper 13).
#
# Two phases, so that the package build itself is offline:
#   1. wheel cache: the pinned wheels of packaging/vendor-<arch>.txt (onnxruntime, aiohttp
#      and its helpers) are downloaded once with `pip download --require-hashes` into
#      debian-build/wheels/. Already there (and matching their hashes)? Nothing is fetched.
#      MIMESYS_OFFLINE=1 turns a missing wheel into an error instead of a download.
#   2. build: a copy of the tree (tracked + untracked-not-ignored files) gets debian/ from
#      packaging/debian, the unit from systemd/, the cached wheels in debian/vendor/, and
#      dpkg-buildpackage runs inside a network namespace with no network at all
#      (`unshare --net`), which proves the build needs nothing but the cache.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
OUT="$ROOT/debian-build"
ARCH="$(dpkg --print-architecture)"
LOCK="packaging/vendor-$ARCH.txt"
VERSION="$(dpkg-parsechangelog -l packaging/debian/changelog -S Version)"
say() { printf '[build-deb] %s\n' "$*"; }
die() { printf '[build-deb] error: %s\n' "$*" >&2; exit 1; }

[ -f "$LOCK" ] || die "no wheel lock for architecture $ARCH ($LOCK); only amd64 is pinned"
for tool in dpkg-buildpackage dh dh_python3 lintian fakeroot; do
    command -v "$tool" >/dev/null || die "$tool missing: run 'make deb' (installs the build dependencies as root)"
done

# -- 1. wheel cache -----------------------------------------------------------------------
WHEELS="$OUT/wheels"
mkdir -p "$WHEELS"
missing_wheels() {
    # Prints each "name==version" of the lock that has no cached wheel with the pinned hash.
    python3 - "$LOCK" "$WHEELS" <<'PY'
import hashlib, pathlib, re, sys
lock, cache = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
have = {hashlib.sha256(w.read_bytes()).hexdigest() for w in cache.glob("*.whl")}
for line in lock.read_text().splitlines():
    line = line.split("#", 1)[0].strip()
    if line:
        req, digest = re.match(r"(\S+)\s+--hash=sha256:([0-9a-f]{64})", line).groups()
        if digest not in have:
            print(req)
PY
}
if [ -n "$(missing_wheels)" ]; then
    [ "${MIMESYS_OFFLINE:-0}" = 1 ] && die "MIMESYS_OFFLINE=1 but wheels missing from $WHEELS: $(missing_wheels | tr '\n' ' ')"
    PIP="${PIP:-}"
    if [ -z "$PIP" ]; then
        if [ -x "$ROOT/.venv/bin/pip" ]; then PIP="$ROOT/.venv/bin/pip"
        else
            python3 -m venv "$OUT/.pip-venv" && PIP="$OUT/.pip-venv/bin/pip"
        fi
    fi
    case "$ARCH" in amd64) M=x86_64 ;; arm64) M=aarch64 ;; *) die "no wheel platform for $ARCH" ;; esac
    say "downloading the pinned wheels of $LOCK into $WHEELS (one time)"
    plat=()
    for p in manylinux_2_28 manylinux_2_27 manylinux_2_17 manylinux2014 manylinux_2_5 manylinux1; do plat+=(--platform "${p}_$M"); done
    "$PIP" download --quiet --no-deps --require-hashes --only-binary=:all: "${plat[@]}" --platform any \
        --python-version 3.11 --implementation cp --abi cp311 --abi abi3 --abi none \
        -r "$LOCK" -d "$WHEELS"
    [ -z "$(missing_wheels)" ] || die "after download, still missing: $(missing_wheels | tr '\n' ' ')"
fi
say "wheel cache complete: $(ls "$WHEELS"/*.whl | wc -l) wheels in $WHEELS"

# -- 2. offline build ---------------------------------------------------------------------
SRC="$OUT/mimesys-$VERSION"
rm -rf "$SRC" "$OUT"/mimesys-agent_*.deb "$OUT"/mimesys_"$VERSION"_*.{buildinfo,changes}
mkdir -p "$SRC"
git ls-files -z --cached --others --exclude-standard \
    | tar --null --ignore-failed-read -T - -cf - 2>/dev/null | tar -xf - -C "$SRC"
cp -r packaging/debian "$SRC/debian"
[ -f systemd/mimesys-agent.service ] || die "systemd/mimesys-agent.service missing (agent daemon room)"
[ -f systemd/agent.toml ] || die "systemd/agent.toml missing (agent daemon room)"
cp systemd/mimesys-agent.service "$SRC/debian/mimesys-agent.service"
mkdir -p "$SRC/debian/vendor"
python3 - "$LOCK" "$WHEELS" "$SRC/debian/vendor" <<'PY'
import hashlib, pathlib, re, shutil, sys
lock, cache, dest = map(pathlib.Path, sys.argv[1:])
by_hash = {hashlib.sha256(w.read_bytes()).hexdigest(): w for w in cache.glob("*.whl")}
for line in lock.read_text().splitlines():
    line = line.split("#", 1)[0].strip()
    if line:
        digest = re.search(r"--hash=sha256:([0-9a-f]{64})", line).group(1)
        shutil.copy2(by_hash[digest], dest / by_hash[digest].name)
PY
NOLAN=()
if [ "$(id -u)" = 0 ] && unshare --net true 2>/dev/null; then
    NOLAN=(unshare --net)
    say "building offline (unshare --net: no network inside the build)"
else
    say "building (unshare --net unavailable here, so the build is not network-isolated)"
fi
say "dpkg-buildpackage in $SRC (log: $OUT/build.log)"
# The system PATH only: a Debian package builds with Debian's python3, never a pyenv or
# virtualenv interpreter that happens to come first on the caller's PATH.
if ! (cd "$SRC" && "${NOLAN[@]}" env -u PYTHONPATH -u VIRTUAL_ENV PATH=/usr/sbin:/usr/bin:/sbin:/bin \
        dpkg-buildpackage -b -us -uc > "$OUT/build.log" 2>&1); then
    tail -n 40 "$OUT/build.log" | sed 's/^/  | /'
    die "dpkg-buildpackage failed; full log: $OUT/build.log"
fi
grep -E '^dpkg-deb: building' "$OUT/build.log" | sed 's/^/  | /'
DEB="$OUT/mimesys-agent_${VERSION}_${ARCH}.deb"
[ -f "$DEB" ] || die "dpkg-buildpackage ran but $DEB is not there"
say "built $DEB ($(du -h "$DEB" | cut -f1))"
