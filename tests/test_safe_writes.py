"""Every file the agent, `replay`, `record`, `calibrate`, the textfile writer and the controller
write goes through mimesys.fsutil (issue 22): a unique temp created O_EXCL|O_NOFOLLOW, written
through its own descriptor (a path-taking writer gets /proc/self/fd/N), fsynced, checked and
renamed. A link planted by whoever owns the directory is never written through, and a temp
name swapped mid-write is refused rather than renamed into place."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import numpy as np
import pytest

from mimesys import fsutil
from mimesys.errors import ValidationError
from mimesys.metrics import MetricSpec

from conftest import ROOT
from test_api import cpu_plan

SECRET = "root:secret-hash:19000:0:99999:7:::\n"


def _victim(tmp_path) -> Path:
    v = tmp_path / "victim"
    v.write_text(SECRET)
    v.chmod(0o600)
    return v


def _untouched(victim: Path) -> None:
    assert victim.read_text() == SECRET
    assert stat.S_IMODE(victim.stat().st_mode) == 0o600


def test_textfile_writer_never_writes_through_a_planted_link(tmp_path, catalog, monkeypatch):
    """The reproduced finding: a symlink in node_exporter's textfile directory at the writer's
    temporary name got a 0600 file overwritten and made world-readable."""
    from agentd.prometheus.textfile import FILENAME, ReplayTextfile
    victim = _victim(tmp_path)
    textdir = tmp_path / "textfile"
    textdir.mkdir()
    pid = os.getpid()
    for name in (f".{FILENAME}.{pid}.tmp", f".{FILENAME}.tmp"):
        (textdir / name).symlink_to(victim)           # the fixed temporary names of older writers
    old = os.umask(0o077)                              # the unit's UMask=0077 ...
    try:
        tf = ReplayTextfile(textdir, cpu_plan(catalog, [[0.5, 0.5]]), [MetricSpec("cpu.util", "fraction")])
        tf.finish("done", 0)
    finally:
        os.umask(old)
    _untouched(victim)
    out = textdir / FILENAME
    assert not out.is_symlink() and "mimesys_replay_state" in out.read_text()
    assert stat.S_IMODE(out.stat().st_mode) == 0o644   # ... and node_exporter can still read it
    # The final name planted as a link: replaced (renamed over), not written through.
    out.unlink()
    out.symlink_to(victim)
    tf.write()
    _untouched(victim)
    assert not out.is_symlink()


def test_a_temp_name_swapped_mid_write_is_refused_and_the_writer_keeps_its_own_file(tmp_path):
    victim = _victim(tmp_path)
    target = tmp_path / "calibration.json"

    def write(tmp: Path) -> None:
        # The directory's owner replaces our temporary name with a link while we write.
        (name,) = [p for p in tmp_path.iterdir() if p.name.startswith(".calibration.json.")]
        name.unlink()
        name.symlink_to(victim)
        tmp.write_text('{"version": 1}')                 # through the descriptor: our file, not the link
    with pytest.raises(ValidationError, match="was replaced while it was written"):
        fsutil.atomic_write_with(target, write)
    _untouched(victim)
    assert not target.exists()


def test_h5_and_csv_writers_write_through_the_descriptor(tmp_path):
    from mimesys.trace import Trace
    tr = Trace(np.full((4, 1), 0.5, np.float32), [MetricSpec("cpu.util", "fraction")])
    tr.write(tmp_path / "t.h5")
    tr.write_csv(tmp_path / "t.csv")
    assert Trace.read(tmp_path / "t.h5").T == 4 and (tmp_path / "t.csv").read_text().startswith("window,start_s")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.csv", "t.h5"]      # no temp left behind


def test_record_never_follows_a_planted_temp_name(tmp_path):
    from mimesys.trace import Trace
    from agentd.trace_append import TraceAppender
    victim = _victim(tmp_path)
    out = tmp_path / "rec.h5"
    (tmp_path / ".rec.h5.new").symlink_to(victim)        # the old fixed name
    app = TraceAppender(out, [MetricSpec("cpu.util", "fraction")], window_s=1.0, host_fingerprint={},
                        provenance={}, simulated=True)
    for i in range(3):
        app.append(i * 10**9, [0.25])
    app.flush()
    app.finish()
    _untouched(victim)
    assert Trace.read(out).T == 3


# Writes in the agent (agentd/ and the core, mimesys/) that do not go through mimesys.fsutil: each is named here with why it is safe.
ALLOWED = {
    "mimesys/fsutil.py": "the helper itself",
    "mimesys/plan_h5.py": "h5py.File(BytesIO) for the wire body, in memory",
    "mimesys/h5io.py": "h5py.File on atomic_path's /proc/self/fd path",
    "agentd/trace_append.py": "h5py.File on fd_path of its own O_EXCL temp",
    "mimesys/trace.py": "csv on atomic_path's /proc/self/fd path",
}
WRITE = re.compile(r"""\.write_text\(|\.write_bytes\(|\bopen\([^)]*["'](w|wb|a|ab|w\+|r\+|x)["']|"""
                   r"""h5py\.File\([^)]*["'](w|a|w-|x|r\+)["']|\.savefig\([^)]*\)|\bchmod\(""")


def test_every_agent_write_goes_through_fsutil():
    offenders = []
    for path in sorted([*(ROOT / "mimesys").rglob("*.py"), *(ROOT / "agentd").rglob("*.py")]):
        rel = path.relative_to(ROOT).as_posix()
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if WRITE.search(line) and rel not in ALLOWED and "atomic_write_with" not in line:
                offenders.append(f"{rel}:{n}: {line.strip()}")
    assert not offenders, "write through mimesys.fsutil instead:\n" + "\n".join(offenders)
