"""Structure-aware fuzz of plan and trace bodies against a real agent process on 127.0.0.1
(issue 16). Hypothesis builds HDF5 files feature by feature (dtypes, external storage, soft,
external and duplicate hard links, virtual datasets, chunking with unwritten chunks, filters,
declared sizes, attributes) and raw-array wire bodies, and sends them to POST /v1/runs and
POST /v1/generate. Measured: every status code (a 5xx is a failure), whether any answer
echoes a byte of a "secret" file that external storage points at, the agent's RSS, and
/healthz latency probed every 50 ms throughout from a process of its own, beside a bare control
server (a stall both show is the host's), and the agent's own event-loop lag.

The agent uses the simulated host backend (labelled simulated): what is fuzzed is the body
parsing and validation path, which is the same for every backend.

    python bench/hardening_fuzz.py [--examples 300] [--out bench/results/hardening/fuzz.jsonl]
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import math
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path

import h5py
import msgpack
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agentd.catalog import load_catalog  # noqa: E402
from bench.hardening_agent import control_server, healthz_probing, healthz_summary, loop_lag, real_agent  # noqa: E402

SECRET_VALUE = 31337                     # the first <u2 of the secret file: must never appear in an answer
CATALOG = load_catalog()
M = len(CATALOG)

DTYPES = ["<f4", "<f8", "<u2", "<i8", "|u1", "<f2", "<c8", "?", "compound", "subarray", "vlen_str", "S8"]
STORAGE = ["data", "chunked_unwritten", "external", "virtual", "soft_link", "external_link", "hard_dup"]
FILTERS = [None, "gzip", "lzf", "shuffle", "fletcher32", "scaleoffset"]


def _dtype(kind: str, sub: int):
    if kind == "compound":
        return np.dtype([("a", "<f4"), ("b", "<i2")])
    if kind == "subarray":
        return np.dtype(("<f4", (sub,)))
    if kind == "vlen_str":
        return h5py.string_dtype()
    return np.dtype(kind)


@st.composite
def h5_body(draw, tmp: Path, kind: str):
    """HDF5 bytes of a plan (kind="plan", /compositions) or trace (kind="trace", /values)."""
    name = "compositions" if kind == "plan" else "values"
    ndim = 3 if kind == "plan" else 2
    big = draw(st.booleans())
    dims = [draw(st.integers(0, 4 if not big else 200_000)) for _ in range(ndim)]
    if kind == "plan" and draw(st.booleans()):
        dims[1] = M
    # A third are valid files with at most one feature varied, so the accepting path (201, a
    # run started and cancelled) is exercised too, not only refusals.
    valid = draw(st.integers(0, 2)) == 0
    if valid:
        dims = [draw(st.integers(1, 6)) for _ in range(ndim)]
        if kind == "plan":
            dims[1], dims[2] = M, min(dims[2], 2)
    dtype_kind = "<f4" if valid else draw(st.sampled_from(DTYPES))
    storage = "data" if valid else draw(st.sampled_from(STORAGE))
    filt = draw(st.sampled_from([None, "gzip", "shuffle", "fletcher32"] if valid else FILTERS))
    buf = io.BytesIO()
    with h5py.File(buf, "w") as f:
        try:
            dt = _dtype(dtype_kind, draw(st.integers(1, 5_000_000)))
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
            if storage == "data":
                nbytes = math.prod(shape) * max(1, np.dtype(dt).itemsize)   # Python ints: no overflow
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
        if kind == "trace" and draw(st.booleans()):
            with_ok = draw(st.booleans())
            try:
                f.create_dataset("window_start_ns", shape=(dims[0] if with_ok else draw(st.integers(0, 10**9)),),
                                 dtype="<i8", chunks=(1024,), maxshape=(None,))
            except (ValueError, TypeError, OSError):
                pass
        fmt = "mimesys.plan" if kind == "plan" else "mimesys.trace"
        pick = (lambda good, bad: good) if valid else (lambda good, bad: draw(st.sampled_from([good, *bad])))
        f.attrs["format"] = pick(fmt, ["other"])
        f.attrs["schema_version"] = pick(1, [0, 7, np.array([1, 2]), "x"])
        if kind == "plan":
            f.attrs["catalog_names"] = pick(json.dumps(CATALOG.names), ["{bad", "[1, 2]", json.dumps(["x"] * 10)])
            f.attrs["catalog_hash"] = pick(CATALOG.hash, ["nope"])
            f.attrs["window_s"] = pick(0.05, [0.001, float("nan"), -1.0, 1e300, np.array([1.0, 2.0])])
            f.attrs["seed"] = pick(0, [-1, 2.0 ** 70, np.int64(3)])
        else:
            metrics = json.dumps([{"name": "cpu.util", "unit": "fraction"}] + [{"name": f"m.x{i}", "unit": ""}
                                                                               for i in range(max(0, dims[1] - 1))])
            f.attrs["metrics"] = pick(metrics, ["{bad", '[{"name": 1}]', "[]"])
    return buf.getvalue()


@st.composite
def raw_plan(draw):
    if draw(st.integers(0, 2)) == 0:     # valid, with random fractions that may break the sums
        T, K = draw(st.integers(1, 8)), draw(st.integers(1, 2))
        a = np.asarray(draw(st.lists(st.sampled_from([0.0, 0.1, 0.5, 1.0, -0.1, float("nan"), 2.0]),
                                     min_size=T * M * K, max_size=T * M * K)), "<f4").reshape(T, M, K) * 0.05
        return {"compositions": {"shape": [T, M, K], "dtype": "<f4", "bytes": a.tobytes()},
                "catalog_names": CATALOG.names, "catalog_hash": CATALOG.hash, "window_s": 0.05, "seed": 0}
    dim = st.integers(0, 3) | st.integers(0, 10**6).filter(lambda x: x != SECRET_VALUE)
    shape = [draw(dim) for _ in range(draw(st.integers(0, 4)))]
    n = int(np.prod(shape)) if shape else 0
    nbytes = draw(st.sampled_from([n * 4, max(0, n * 4 - 4), n * 4 + 4, 0, 7]))
    return {"compositions": {"shape": shape, "dtype": draw(st.sampled_from(["<f4", "<f8", "|O", 5])),
                             "bytes": b"\0" * min(nbytes, 1 << 20)},
            "catalog_names": draw(st.sampled_from([CATALOG.names, ["x"], "names", []])),
            "catalog_hash": draw(st.sampled_from([CATALOG.hash, 1, ""])),
            "window_s": draw(st.sampled_from([1.0, float("nan"), "1", True, 1e30])),
            "seed": draw(st.sampled_from([0, -5, 2**64 - 1, 1.5]))}


class RssProbe(threading.Thread):
    """The agent's RSS every second (/healthz is probed by a process of its own)."""

    def __init__(self, agent):
        super().__init__(daemon=True)
        self.agent, self.rss, self.stop = agent, [], threading.Event()

    def run(self):
        while not self.stop.is_set():
            self.rss.append(self.agent.rss_mib())
            self.stop.wait(1.0)


def post(agent, path, body: bytes) -> tuple[int, bytes]:
    req = urllib.request.Request(agent.url + path, data=body, method="POST",
                                 headers={"Authorization": f"Bearer {agent.token}",
                                          "Content-Type": "application/msgpack"})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def delete(agent, run_id) -> int:
    req = urllib.request.Request(f"{agent.url}/v1/runs/{run_id}", method="DELETE",
                                 headers={"Authorization": f"Bearer {agent.token}"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            r.read()
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--examples", type=int, default=300, help="per body kind (plan HDF5, trace HDF5, raw plan)")
    ap.add_argument("--out", type=Path, default=Path("bench/results/hardening/fuzz.jsonl"))
    ap.add_argument("--note", default="")
    ap.add_argument("--baseline-s", type=float, default=30.0,
                    help="probe /healthz this long with no fuzz traffic first (what the host's load alone costs)")
    args = ap.parse_args(argv)
    statuses: Counter = Counter()
    failures: list[str] = []
    leaks: list[str] = []
    with tempfile.TemporaryDirectory(prefix="mimesys-fuzz-") as d:
        tmp = Path(d)
        (tmp / "secret.key").write_bytes(np.array([SECRET_VALUE] * 512, "<u2").tobytes())
        with h5py.File(tmp / "src.h5", "w") as f:
            f.create_dataset("x", data=np.full((4, 4, 4), SECRET_VALUE, "<f4"))
        with real_agent(tmp / "agent", speedup=0.0) as agent, control_server() as control, \
                healthz_probing(agent.url, control, {"Authorization": f"Bearer {agent.token}"}, tmp / "healthz.txt",
                                period_s=0.05):
            probe = RssProbe(agent)
            probe.start()
            t_probe = time.monotonic()
            time.sleep(args.baseline_s)
            t0 = time.monotonic()

            def send(path, obj, label):
                status, body = post(agent, path, msgpack.packb({"v": 1, **obj}, use_bin_type=True))
                statuses[f"{label}:{status}"] += 1
                if status == 501 and b"no generation model installed" in body:
                    return   # a trace that passed every check reached the model step; none is installed here
                if status >= 500:
                    failures.append(f"{label} {status}: {body[:300]!r}")
                if str(SECRET_VALUE).encode() in body:
                    leaks.append(f"{label}: {body[:300]!r}")
                if status == 201:
                    code = delete(agent, msgpack.unpackb(body)["run_id"])
                    statuses[f"delete:{code}"] += 1
                    if code >= 500:
                        failures.append(f"DELETE {code}")

            common = settings(max_examples=args.examples, deadline=None, database=None,
                              suppress_health_check=list(HealthCheck))

            @common
            @given(h5_body(tmp, "plan"))
            def fuzz_plan_h5(data):
                send("/v1/runs", {"plan": data}, "plan_h5")

            @common
            @given(h5_body(tmp, "trace"))
            def fuzz_trace_h5(data):
                send("/v1/generate", {"trace": data}, "trace_h5")

            @common
            @given(raw_plan())
            def fuzz_plan_raw(obj):
                send("/v1/runs", {"plan": obj}, "plan_raw")

            for fn in (fuzz_plan_h5, fuzz_trace_h5, fuzz_plan_raw):
                fn()
            elapsed = time.monotonic() - t0
            probe.stop.set()
            probe.join(5)
            lag = asyncio.run(loop_lag(agent.url, {"Authorization": f"Bearer {agent.token}"}))
            alive = agent.proc.poll() is None
        # the prober's clock starts when it does, just after t_probe
        base = healthz_summary(tmp / "healthz.txt", 0.0, args.baseline_s)
        fuzzed = healthz_summary(tmp / "healthz.txt", t0 - t_probe)
    load = open("/proc/loadavg").read().split()[:3]
    result = {"bench": "hardening_fuzz", "examples_per_kind": args.examples, "requests": sum(statuses.values()),
              "seconds": round(elapsed, 1), "backend": "sim (simulated host; a real agent process on 127.0.0.1)",
              "status_counts": dict(sorted(statuses.items())),
              "5xx": len(failures), "5xx_note": "501 'no generation model installed' (the documented answer to a "
              "trace that passed every check, on an agent without a model) is counted in status_counts, not as a failure", "first_5xx": failures[:5],
              "secret_leaks": len(leaks), "first_leaks": leaks[:3],
              "rss_mib_first": round(probe.rss[0], 1), "rss_mib_max": round(max(probe.rss), 1),
              "rss_mib_last": round(probe.rss[-1], 1),
              **fuzzed, **lag, "healthz_idle_baseline": {"seconds": args.baseline_s, **base},
              "loadavg_at_end": load, "agent_alive_at_end": alive, "note": args.note}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("a") as f:
        f.write(json.dumps(result) + "\n")
    print(json.dumps(result))
    if failures or leaks:
        sys.exit(1)


if __name__ == "__main__":
    main()
