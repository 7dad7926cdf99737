"""One run at a time per host: a second holder is refused with a message naming the first,
and a holder that dies (even by SIGKILL) releases the lock with nothing to clean up."""

import os
import signal
import subprocess
import sys
import time

import pytest

from mimesys.errors import Conflict
from agentd.hostlock import host_run_lock

HOLD = """
import sys, time
from agentd.hostlock import host_run_lock
with host_run_lock(sys.argv[1], owner="test holder"):
    print("held", flush=True)
    time.sleep(60)
"""


def test_second_holder_is_refused_and_a_killed_holder_releases(tmp_path):
    lock = tmp_path / "run" / "run.lock"
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(lock)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(Conflict, match=rf"already executing a mimesys run \(pid {holder.pid} test holder; lock "):
            with host_run_lock(lock):
                pass
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    with host_run_lock(lock, owner="second"):       # the kernel dropped the dead holder's lock
        assert lock.read_text() == f"pid {os.getpid()} second\n"
    assert lock.read_text() == ""                     # released: no stale owner left behind


def test_conflict_maps_to_http_409():
    assert Conflict.http_status == 409


def test_the_holder_text_is_shown_escaped(tmp_path):
    """The lock's group may write its holder text: it reaches messages (and terminals) escaped."""
    import fcntl
    lock = tmp_path / "run.lock"
    lock.write_bytes(b"pid 1 \x1b]0;owned\x07\x1b[2J")
    fd = os.open(lock, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        with pytest.raises(Conflict) as e:
            with host_run_lock(lock):
                pass
        assert "\x1b" not in str(e.value) and "\\x1b]0;owned\\x07" in str(e.value)
    finally:
        os.close(fd)
