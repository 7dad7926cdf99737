"""Local paths a root-run command shares with the `mimesys` user (issue 16): the run lock is
opened without following links and checked before it is written, every atomic write uses a
unique temporary name and fsyncs the file and its directory, and secrets (tokens, the TLS
key) must be ours alone."""

from __future__ import annotations

import os
import stat
import threading

import pytest

from mimesys import calibration, fsutil
from agentd.config import config_from_dict
from mimesys.errors import ConfigError, ValidationError
from agentd.hostlock import host_run_lock

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (chown to another uid)")


def _victim(tmp_path):
    v = tmp_path / "shadow"
    v.write_text("root:secret-hash:19000:0:99999:7:::\n")
    return v


def test_run_lock_symlink_is_not_followed(tmp_path):
    victim = _victim(tmp_path)
    (tmp_path / "run").mkdir()
    lock = tmp_path / "run" / "run.lock"
    lock.symlink_to(victim)
    with pytest.raises(ValidationError, match="symbolic link"):
        with host_run_lock(lock):
            pass
    assert victim.read_text().startswith("root:secret-hash")


def test_run_lock_hard_link_is_not_written(tmp_path):
    victim = _victim(tmp_path)
    (tmp_path / "run").mkdir()
    lock = tmp_path / "run" / "run.lock"
    os.link(victim, lock)
    with pytest.raises(ValidationError, match="hard links"):
        with host_run_lock(lock):
            pass
    assert victim.read_text().startswith("root:secret-hash")


def test_run_lock_fifo_is_refused_not_waited_on(tmp_path):
    lock = tmp_path / "run.lock"
    os.mkfifo(lock)
    done = []

    def go():
        with pytest.raises(ValidationError, match="not a regular file"):
            with host_run_lock(lock):
                pass
        done.append(True)
    t = threading.Thread(target=go, daemon=True)
    t.start()
    t.join(5)
    assert done == [True]


@needs_root
def test_run_lock_owned_by_a_stranger_is_refused(tmp_path):
    lock = tmp_path / "run.lock"
    lock.write_text("")
    os.chown(lock, 54321, 54321)     # the directory is root's: only root, us or its owner may own the lock
    with pytest.raises(ValidationError, match="owned by uid 54321"):
        with host_run_lock(lock):
            pass


def test_atomic_writes_never_follow_a_planted_temp_name(tmp_path):
    victim = _victim(tmp_path)
    out = tmp_path / "calibration.json"
    (tmp_path / ".calibration.json.tmp").symlink_to(victim)   # the old fixed temporary name
    calibration.write({"version": 1}, out)
    assert victim.read_text().startswith("root:secret-hash")
    assert '"version": 1' in out.read_text()
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp") and p.name != ".calibration.json.tmp"]


def test_atomic_write_fsyncs_file_and_directory(tmp_path, monkeypatch):
    kinds = []
    real = os.fsync

    def spy(fd):
        kinds.append("dir" if stat.S_ISDIR(os.fstat(fd).st_mode) else "file")
        return real(fd)
    monkeypatch.setattr(fsutil.os, "fsync", spy)
    fsutil.atomic_write_text(tmp_path / "run.json", "{}")
    assert kinds == ["file", "dir"]
    assert (tmp_path / "run.json").read_text() == "{}"


def _cfg(tmp_path, tok):
    return config_from_dict({"api": {"token_file": str(tok)}})


def test_token_world_writable_or_fifo_is_refused(tmp_path):
    tok = tmp_path / "token"
    tok.write_text("0123456789abcdef0123\n")
    tok.chmod(0o602)
    with pytest.raises(ConfigError, match="accessible to other users"):
        _cfg(tmp_path, tok).read_token()
    tok.unlink()
    os.mkfifo(tok, 0o600)
    with pytest.raises(ConfigError, match="not a regular file"):
        _cfg(tmp_path, tok).read_token()


@needs_root
def test_token_owned_by_another_user_is_refused(tmp_path):
    tok = tmp_path / "token"
    tok.write_text("0123456789abcdef0123\n")
    tok.chmod(0o600)
    os.chown(tok, 54321, 54321)
    with pytest.raises(ConfigError, match="owned by uid 54321"):
        _cfg(tmp_path, tok).read_token()


def test_world_readable_tls_key_is_refused(tmp_path):
    from agentd.commands.serve import _tls
    from mimesys.tls import init_pair
    cert, key = tmp_path / "agent.crt", tmp_path / "agent.key"
    init_pair(cert, key, names=["localhost"])
    cfg = config_from_dict({"api": {"tls_cert": str(cert), "tls_key": str(key)}})
    assert _tls(cfg) is not None
    key.chmod(0o644)
    with pytest.raises(ConfigError, match="api.tls_key .*accessible to other users"):
        _tls(cfg)
