# Throwaway Debian 12 roots for the package tests (sourced, not run): a debootstrap'd bookworm
# minbase, cached as a tarball after the first use (needs root and a Debian mirror), unpacked
# into a fresh directory per test with /proc and a fresh sysfs mounted, removed on exit.
# Used by test-install.sh, test-debian-python.sh, test-nspawn-boot.sh and bench/replay_nonroot.sh,
# so each of them works on a fresh machine whichever runs first.
#
#   . packaging/debian-root.sh
#   debian_root_new NAME     # sets R, traps cleanup; in_root CMD... runs CMD inside it

CACHE="${MIMESYS_TEST_CACHE:-/var/tmp/mimesys-test}"
BASE="$CACHE/bookworm-minbase.tar"
MIRROR="${MIMESYS_DEBIAN_MIRROR:-http://deb.debian.org/debian}"

# The cached minbase tarball, made once.
debian_minbase() {
    mkdir -p "$CACHE"
    [ -f "$BASE" ] && return 0
    command -v debootstrap >/dev/null || apt-get install -y -qq debootstrap >/dev/null
    echo "debootstrap bookworm (minbase) into $CACHE, one time (log $CACHE/debootstrap.log)" >&2
    local tmp
    tmp="$(mktemp -d "$CACHE/base.XXXX")"
    if ! debootstrap --variant=minbase bookworm "$tmp" "$MIRROR" > "$CACHE/debootstrap.log" 2>&1; then
        tail -20 "$CACHE/debootstrap.log" >&2
        rm -rf --one-file-system "$tmp"
        return 1
    fi
    tar -C "$tmp" -cf "$BASE.tmp" . && mv "$BASE.tmp" "$BASE" && rm -rf --one-file-system "$tmp"
}

debian_root_cleanup() {
    [ -n "${R:-}" ] || return 0
    umount -R "$R/sys" 2>/dev/null || true
    umount -R "$R/proc" 2>/dev/null || true
    # Never delete through a mount point: refuse while anything is still mounted below $R,
    # and stay on the root's own file system regardless.
    if grep -q " $R/" /proc/mounts; then
        echo "mounts remain under $R; not deleting it (umount -R them first)" >&2
    else
        rm -rf --one-file-system "$R"
    fi
}

# A fresh root $CACHE/NAME.XXXX from the minbase, /proc and a fresh sysfs (not a recursive
# bind of the host's /sys and its cgroup mounts) mounted, the host's resolv.conf for apt.
debian_root_new() {
    debian_minbase
    R="$(mktemp -d "$CACHE/$1.XXXX")"
    trap debian_root_cleanup EXIT
    tar -C "$R" -xf "$BASE"
    chmod 0755 "$R"   # mktemp made it 0700: other users (mimesys, a test user) must traverse it
    mount -t proc proc "$R/proc"
    mount -t sysfs sysfs "$R/sys"
    cp /etc/resolv.conf "$R/etc/resolv.conf"
}

in_root() { chroot "$R" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root "$@"; }
