"""systemd integration: Type=notify readiness, status, the watchdog, and journald logging.

- `notify("READY=1")` etc. go through systemd.daemon (systemd-python) when importable,
  else straight to the $NOTIFY_SOCKET datagram socket (the protocol is one datagram of
  newline-separated KEY=VALUE pairs; an '@' prefix means an abstract socket). Outside
  systemd (no NOTIFY_SOCKET) every call is a no-op.
- The watchdog is pinged from the event loop itself at half of $WATCHDOG_USEC, so a
  blocked loop (the thing the watchdog exists to catch) stops the pings.
- Logging goes to journald (systemd.journal.JournalHandler) when the agent runs under
  systemd (JOURNAL_STREAM or INVOCATION_ID set), else to stderr.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import sys
from typing import AsyncIterator

log = logging.getLogger(__name__)

try:
    from systemd import daemon as _sd_daemon
except ImportError:  # systemd-python is optional (Debian: python3-systemd)
    _sd_daemon = None


def under_systemd(env=None) -> bool:
    env = os.environ if env is None else env
    return bool(env.get("JOURNAL_STREAM") or env.get("INVOCATION_ID"))


def notify(state: str) -> bool:
    """Send one notification (e.g. "READY=1\\nSTATUS=serving"); True if it was delivered."""
    addr = os.environ.get("NOTIFY_SOCKET")
    if not addr:
        return False
    if _sd_daemon is not None:
        return bool(_sd_daemon.notify(state))
    return _notify_socket(addr, state)


def _notify_socket(addr: str, state: str) -> bool:
    if addr.startswith("@"):
        addr = "\0" + addr[1:]
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as s:
            s.connect(addr)
            s.sendall(state.encode())
        return True
    except OSError as e:
        log.warning("sd_notify to %s failed: %s", addr, e)
        return False


def watchdog_interval_s(env=None) -> float | None:
    """Half the watchdog timeout systemd set for us, or None without a watchdog."""
    env = os.environ if env is None else env
    usec = env.get("WATCHDOG_USEC")
    pid = env.get("WATCHDOG_PID")
    if not usec or (pid and pid != str(os.getpid())):
        return None
    try:
        return int(usec) / 2e6
    except ValueError:
        return None


async def watchdog_loop(interval_s: float) -> None:
    while True:
        notify("WATCHDOG=1")
        await asyncio.sleep(interval_s)


async def watchdog_ctx(app) -> AsyncIterator[None]:
    """cleanup_ctx for the aiohttp app: pings WATCHDOG=1 while the app runs. (READY=1 is sent
    by `serve` once the socket is bound, not here: startup runs before the bind.)"""
    interval = watchdog_interval_s()
    task = asyncio.create_task(watchdog_loop(interval), name="sd-watchdog") if interval else None
    if interval:
        log.info("systemd watchdog: pinging every %.1f s", interval)
    yield
    if task is not None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def setup_logging(level: int = logging.INFO) -> str:
    """Journald under systemd, stderr otherwise; returns which."""
    root = logging.getLogger()
    root.setLevel(level)
    for h in list(root.handlers):
        root.removeHandler(h)
    # Under systemd and with journald there to receive (else the messages would vanish).
    if under_systemd() and os.path.exists("/run/systemd/journal/socket"):
        try:
            from systemd.journal import JournalHandler
            handler: logging.Handler = JournalHandler(SYSLOG_IDENTIFIER="mimesys-agent")
            handler.setFormatter(logging.Formatter("%(name)s: %(message)s"))
            root.addHandler(handler)
            return "journald"
        except ImportError:
            pass  # stderr is captured by journald too under systemd, only without fields
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root.addHandler(handler)
    return "stderr"
