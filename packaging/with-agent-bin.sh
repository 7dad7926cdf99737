#!/usr/bin/env bash
# Runs a command with /usr/bin/mimesys-agent in place, as the package installs it, without
# installing anything: `systemd-analyze verify` checks that a unit's ExecStart exists.
# If the package is installed, the command just runs. Otherwise (root needed) it runs in a
# private mount namespace where /usr/bin is an overlay holding the package's launcher
# (packaging/mimesys-agent.launcher); the host's /usr/bin is untouched.
# Usage: packaging/with-agent-bin.sh systemd-analyze verify systemd/mimesys-agent.service
set -euo pipefail
[ "$#" -gt 0 ] || { echo "usage: $0 COMMAND [ARGS...]" >&2; exit 2; }
if [ -x /usr/bin/mimesys-agent ]; then exec "$@"; fi
[ "$(id -u)" = 0 ] || { echo "with-agent-bin: /usr/bin/mimesys-agent absent and not root (cannot overlay /usr/bin)" >&2; exit 1; }
LAUNCHER="$(cd "$(dirname "$0")" && pwd)/mimesys-agent.launcher"
TMP="$(mktemp -d)"; trap 'rm -rf "$TMP"' EXIT
mkdir -p "$TMP/upper" "$TMP/work"
install -m 0755 "$LAUNCHER" "$TMP/upper/mimesys-agent"
unshare --mount -- sh -c '
    mount --make-rprivate / &&
    mount -t overlay overlay -o "lowerdir=/usr/bin,upperdir=$1/upper,workdir=$1/work" /usr/bin &&
    shift && exec "$@"' sh "$TMP" "$@"
