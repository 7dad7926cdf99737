"""Hostile HDF5 plan and trace files, built feature by feature, for the hardening fuzz: the one
builder that bench/hardening_fuzz.py (agent bodies and `replay` files) and tests/test_replay_fuzz.py
share, and the harness that hands a plan file to `mimesys-agent replay`. Under tests/ because the
Debian-packages test run (packaging/test-debian-python.sh) copies tests/ but not bench/.

A case is drawn as a spec (every choice made up front: dims, dtype, storage, filter, attributes),
then built. Kept apart so a test can name a spec outright (each storage kind once) and hypothesis
can draw them. `H5Case.hostile` names the features the untrusted-HDF5 gate (mimesys/untrusted.py)
must refuse whatever else the file says: external storage, a virtual dataset, a soft or external
link, a dtype that is not a plain number of at most 8 bytes, a filter outside the allow-list, or a
dataset declaring more bytes than the plan/trace limits. A hostile file may never be accepted
(201) by the agent nor reach the runner in `replay`.

The "secret" that external storage and the virtual dataset's source point at holds SECRET_VALUE
(31337) everywhere: no answer and no output may contain it in any spelling (`leaks`).
"""

from __future__ import annotations

import io
import json
import math
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import h5py
import numpy as np
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from mimesys.catalog import load_catalog  # noqa: E402
from mimesys.plan import PLAN_LIMITS  # noqa: E402
from mimesys.tracefile import TRACE_LIMITS  # noqa: E402

SECRET_VALUE = 31337                     # the secret file's every <u2, and the virtual source's every f4
CATALOG = load_catalog()
M = len(CATALOG)

DTYPES = ["<f4", "<f8", "<u2", "<i8", "|u1", "<f2", "<c8", "?", "compound", "subarray", "vlen_str", "S8"]
STORAGE = ["data", "chunked_unwritten", "external", "virtual", "soft_link", "external_link", "hard_dup"]
FILTERS = [None, "gzip", "lzf", "shuffle", "fletcher32", "scaleoffset"]

# The attribute values a case picks from: the good one first, then the bad ones.
PLAN_ATTRS = {
    "format": ["mimesys.plan", "other"],
    "schema_version": [1, 0, 7, np.array([1, 2]), "x"],
    "catalog_names": [json.dumps(CATALOG.names), "{bad", "[1, 2]", json.dumps(["x"] * 10)],
    "catalog_hash": [CATALOG.hash, "nope"],
    "window_s": [0.05, 0.001, float("nan"), -1.0, 1e300, np.array([1.0, 2.0])],
    "seed": [0, -1, 2.0 ** 70, np.int64(3)],
}
TRACE_ATTRS = {
    "format": ["mimesys.trace", "other"],
    "schema_version": [1, 0, 7, np.array([1, 2]), "x"],
    "metrics": [None, "{bad", '[{"name": 1}]', "[]"],    # None: the good list for the case's width
}


def write_secrets(tmp: Path) -> None:
    """The files a hostile case points at: secret.key (raw <u2) and src.h5 (/x, f4)."""
    (tmp / "secret.key").write_bytes(np.array([SECRET_VALUE] * 512, "<u2").tobytes())
    with h5py.File(tmp / "src.h5", "w") as f:
        f.create_dataset("x", data=np.full((4, 4, 4), SECRET_VALUE, "<f4"))


SECRET_SPELLINGS = (str(SECRET_VALUE).encode(),                       # 31337, 31337.0
                    b"3.1337",                                         # 3.1337e+04
                    np.array([SECRET_VALUE] * 2, "<u2").tobytes(),     # two raw <u2 (b"iziz")
                    np.float32(SECRET_VALUE).tobytes())                # one raw f4
# (not its hex, 7a69: run ids and the catalog hash are hex, and would match by chance)


def leaks(data: bytes) -> bool:
    """Whether `data` (an answer, a program's output) holds the secret in any spelling."""
    return any(s in data for s in SECRET_SPELLINGS)


@dataclass
class H5Case:
    data: bytes
    spec: dict
    hostile: tuple[str, ...] = field(default=())   # the gate-refused features the file really has

    def label(self) -> str:
        s = self.spec
        return f"{s['kind']} dims={s['dims']} dtype={s['dtype']} storage={s['storage']} filter={s['filter']}"


@st.composite
def h5_spec(draw, kind: str) -> dict:
    """Every choice of one case. A third are valid files with at most one attribute varied, so the
    accepting path (a run started; in replay, the runner reached) and the checks after the gate
    are exercised too: otherwise nearly every drawn file has some feature the gate refuses."""
    ndim = 3 if kind == "plan" else 2
    big = draw(st.booleans())
    dims = [draw(st.integers(0, 4 if not big else 200_000)) for _ in range(ndim)]
    if kind == "plan" and draw(st.booleans()):
        dims[1] = M
    valid = draw(st.integers(0, 2)) == 0
    if valid:
        dims = [draw(st.integers(1, 6)) for _ in range(ndim)]
        if kind == "plan":
            dims[1], dims[2] = M, min(dims[2], 2)
    spec = {"kind": kind, "dims": dims, "valid": valid,
            "dtype": "<f4" if valid else draw(st.sampled_from(DTYPES)),
            "storage": "data" if valid else draw(st.sampled_from(STORAGE)),
            "filter": draw(st.sampled_from([None, "gzip", "shuffle", "fletcher32"] if valid else FILTERS)),
            "sub": draw(st.integers(1, 5_000_000)), "window_start_ns": None}
    if kind == "trace" and draw(st.booleans()):
        spec["window_start_ns"] = dims[0] if draw(st.booleans()) else draw(st.integers(0, 10**9))
    table = PLAN_ATTRS if kind == "plan" else TRACE_ATTRS
    spec["attrs"] = {k: 0 if valid else draw(st.integers(0, len(v) - 1)) for k, v in table.items()}
    if valid and draw(st.booleans()):
        # The one feature varied: an attribute, in a file the gate passes, so that what follows
        # the gate (the reader's own checks, validation, the schedule) sees bad values too.
        key = draw(st.sampled_from(sorted(table)))
        spec["attrs"][key] = draw(st.integers(1, len(table[key]) - 1))
    return spec


def _dtype(kind: str, sub: int):
    if kind == "compound":
        return np.dtype([("a", "<f4"), ("b", "<i2")])
    if kind == "subarray":
        return np.dtype(("<f4", (sub,)))
    if kind == "vlen_str":
        return h5py.string_dtype()
    return np.dtype(kind)


def build(spec: dict, tmp: Path) -> H5Case:
    """The HDF5 bytes of a spec: a plan (/compositions) or trace (/values). A feature h5py refuses
    to write falls back to a plain 1x1(x1) dataset."""
    kind, dims, storage, filt = spec["kind"], list(spec["dims"]), spec["storage"], spec["filter"]
    name = "compositions" if kind == "plan" else "values"
    ndim = 3 if kind == "plan" else 2
    buf = io.BytesIO()
    with h5py.File(buf, "w") as f:
        try:
            dt = _dtype(spec["dtype"], spec["sub"])
            shape = tuple(dims)
            kw = {}
            if filt in ("gzip", "lzf"):
                kw["compression"] = filt
            elif filt == "shuffle":
                kw["shuffle"] = True
            elif filt == "fletcher32":
                kw["fletcher32"] = True
            elif filt == "scaleoffset":
                kw["scaleoffset"] = 0 if np.dtype(dt).kind in "iu" else 2
            itemsize = max(1, np.dtype(dt).itemsize)
            if storage == "data":
                nbytes = math.prod(shape) * itemsize   # Python ints: no overflow
                data = np.zeros(shape, dt) if nbytes < 1 << 22 else None
                if data is None:
                    f.create_dataset(name, shape=shape, dtype=dt, chunks=True, **kw)
                else:
                    f.create_dataset(name, data=data, **kw)
            elif storage == "chunked_unwritten":
                f.create_dataset(name, shape=shape, dtype=dt, chunks=tuple(max(1, min(d, 64)) for d in shape)
                                 if all(shape) else None, maxshape=tuple(None for _ in shape), **kw)
            elif storage == "external":
                f.create_dataset(name, shape=shape, dtype="<u2", external=[(str(tmp / "secret.key"), 0,
                                                                             h5py.h5f.UNLIMITED)])
            elif storage == "virtual":
                layout = h5py.VirtualLayout(shape=shape, dtype="<f4")
                layout[...] = h5py.VirtualSource(str(tmp / "src.h5"), "x", shape=shape)
                f.create_virtual_dataset(name, layout, fillvalue=0)
            elif storage == "soft_link":
                f.create_dataset("real", shape=shape, dtype="<f4")
                f[name] = h5py.SoftLink("/real")
            elif storage == "external_link":
                f[name] = h5py.ExternalLink(str(tmp / "src.h5"), "/x")
            elif storage == "hard_dup":
                f.create_dataset(name, shape=shape, dtype="<f4")
                f["grp/again"] = f[name]
        except (ValueError, TypeError, OSError, OverflowError, MemoryError):
            if name not in f:
                f.create_dataset(name, data=np.zeros((1,) * ndim, "<f4"))
        if spec["window_start_ns"] is not None:
            try:
                f.create_dataset("window_start_ns", shape=(spec["window_start_ns"],), dtype="<i8", chunks=(1024,),
                                 maxshape=(None,))
            except (ValueError, TypeError, OSError):
                pass
        table = PLAN_ATTRS if kind == "plan" else TRACE_ATTRS
        for key, values in table.items():
            value = values[spec["attrs"][key]]
            if key == "metrics" and value is None:
                value = json.dumps([{"name": "cpu.util", "unit": "fraction"}]
                                   + [{"name": f"m.x{i}", "unit": ""} for i in range(max(0, dims[1] - 1))])
            f.attrs[key] = value
        hostile = what_the_gate_must_refuse(f, PLAN_LIMITS if kind == "plan" else TRACE_LIMITS)
    return H5Case(buf.getvalue(), spec, tuple(hostile))


def what_the_gate_must_refuse(f: h5py.File, limits) -> list[str]:
    """The features of a built file (read from what h5py wrote, not from the spec: numpy folds a
    sub-array into the shape, a failed write may leave the dataset behind) that the gate must
    refuse. Written apart from mimesys/untrusted.py on purpose: an oracle, not a copy."""
    found, total = [], 0
    for key in f:
        link = f.get(key, getlink=True)
        if isinstance(link, h5py.SoftLink):
            found.append("soft_link")
            continue
        if isinstance(link, h5py.ExternalLink):
            found.append("external_link")
            continue
        ds = f[key]
        if not isinstance(ds, h5py.Dataset):
            continue
        dcpl = ds.id.get_create_plist()
        if dcpl.get_external_count() > 0:
            found.append("external")
        if dcpl.get_layout() == h5py.h5d.VIRTUAL:
            found.append("virtual")
        for i in range(dcpl.get_nfilters()):
            code = dcpl.get_filter(i)[0]
            if code not in (h5py.h5z.FILTER_DEFLATE, h5py.h5z.FILTER_SHUFFLE, h5py.h5z.FILTER_FLETCHER32):
                found.append(f"filter {code}")
        tid = ds.id.get_type()
        if tid.get_class() not in (h5py.h5t.INTEGER, h5py.h5t.FLOAT) or tid.get_size() > 8:
            found.append(f"dtype class {tid.get_class()}")
            continue
        nbytes = math.prod(ds.shape or ()) * tid.get_size()
        total += nbytes
        if nbytes > limits.max_dataset_bytes:
            found.append(f"declared size of /{key}")
    if total > limits.max_total_bytes:
        found.append("declared size in total")
    return found


def h5_case(tmp: Path, kind: str):
    """A strategy of H5Case: kind "plan" or "trace"."""
    return h5_spec(kind).map(lambda spec: build(spec, tmp))


def h5_body(tmp: Path, kind: str):
    """A strategy of HDF5 bytes (what the agent's bodies carry)."""
    return h5_case(tmp, kind).map(lambda c: c.data)


# -- replay: a plan file on disk, read by `mimesys-agent replay` as it would be by root -----------
REPLAY_TIMEOUT_S = 60.0

SENTINEL = """#!/bin/sh
# Stands in for mimesys-runner: notes that it was started, runs nothing, and fails.
echo started >> "{marker}"
exit 1
"""


@dataclass
class ReplayHarness:
    """`mimesys-agent replay FILE --no-record -- true` with the real host backend (as an operator
    runs it, as root here when the bench is) whose runner is a sentinel script: every check the
    replay makes before starting the runner is the real one, and a plan that gets past them
    starts the sentinel (counted) instead of any stressor."""
    work: Path

    def __post_init__(self):
        self.work.mkdir(parents=True, exist_ok=True)
        self.marker = self.work / "runner-started"
        runner = self.work / "sentinel-runner"
        runner.write_text(SENTINEL.format(marker=self.marker))
        runner.chmod(0o755)
        self.config = self.work / "agent.toml"
        self.config.write_text(f'[agent]\nbackend = "host"\nstate_dir = "{self.work}/state"\n'
                               f'scratch_dir = "{self.work}/scratch"\nrun_lock = "{self.work}/run.lock"\n'
                               f'runner = "{runner}"\n')
        self.env = {**os.environ, "PYTHONPATH": str(ROOT), "MIMESYS_TOKEN": "", "MIMESYS_FLEET": "",
                    "MIMESYS_CONFIG": str(self.config)}
        self.cmd = [sys.executable, "-m", "agentd.cli", "replay", "--config", str(self.config)]

    def replay(self, plan_path: Path, timeout_s: float = REPLAY_TIMEOUT_S) -> dict:
        """Replay one plan file; what a script and an operator would see."""
        self.marker.unlink(missing_ok=True)
        t0 = time.monotonic()
        try:
            r = subprocess.run(self.cmd + [str(plan_path), "--no-record", "--no-progress", "--", "true"],
                               capture_output=True, stdin=subprocess.DEVNULL, cwd=self.work, env=self.env,
                               timeout=timeout_s)
            status, out, err = r.returncode, r.stdout, r.stderr
        except subprocess.TimeoutExpired as e:
            status, out, err = None, e.stdout or b"", e.stderr or b""
        return {"status": status, "seconds": time.monotonic() - t0, "stdout": out, "stderr": err,
                "runner_started": self.marker.exists(), "traceback": b"Traceback" in err or b"Traceback" in out,
                "leak": leaks(out) or leaks(err), "hdf5_diag": b"HDF5-DIAG" in err}


def replay_verdict(case: H5Case, r: dict) -> list[str]:
    """What is wrong with one replay of a case (empty: nothing). The documented statuses
    (mimesys/exitstatus.py) for a plan replay refuses: 1 (the file, refused on reading) or 4 (a plan
    that cannot run here: validation, too many threads, the runner's refusal). A file with a
    feature the gate must refuse is refused on reading (1), before any backend exists."""
    from mimesys.exitstatus import ERROR, WORKLOAD
    wrong = []
    if r["status"] is None:
        wrong.append(f"did not end within {REPLAY_TIMEOUT_S:.0f} s")
    elif r["status"] not in (ERROR, WORKLOAD):
        wrong.append(f"exit status {r['status']}, not {ERROR} or {WORKLOAD}")
    if r["traceback"]:
        wrong.append("a Python traceback")
    if r["leak"]:
        wrong.append("the secret in its output")
    if case.hostile and r["runner_started"]:
        wrong.append(f"the runner was started for a file with {', '.join(case.hostile)}")
    elif case.hostile and r["status"] not in (None, ERROR):
        wrong.append(f"exit status {r['status']} for a file with {', '.join(case.hostile)}: not refused on reading")
    return wrong
