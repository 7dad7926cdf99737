"""Probe the review's findings (issue 16) against whichever checkout is on PYTHONPATH, using only
APIs that existed before the fixes, so the same script gives the before (e177fa4) and after
columns of the report's table. One JSON line per finding: {"finding", "vulnerable", "detail"}.

    PYTHONPATH=/path/to/checkout python bench/hardening_findings.py
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import tempfile
import threading
import time
import tracemalloc
from pathlib import Path

import h5py
import msgpack
import numpy as np

from mimesys.catalog import load_catalog

CAT = load_catalog()
M = len(CAT)
out = []


def report(finding, vulnerable, detail):
    out.append({"finding": finding, "vulnerable": bool(vulnerable), "detail": str(detail)[:200]})


def plan_file(build) -> bytes:
    buf = io.BytesIO()
    with h5py.File(buf, "w") as f:
        build(f)
        f.attrs["format"] = "mimesys.plan"
        f.attrs["schema_version"] = 1
        f.attrs["catalog_hash"] = CAT.hash
        f.attrs["catalog_names"] = json.dumps(CAT.names)
    return buf.getvalue()


def peak_mib(fn):
    tracemalloc.start()
    err = None
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - the probe records whatever happened
        err = e
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    return peak, err


def main():
    d = Path(tempfile.mkdtemp(prefix="findings-"))
    probe_external_storage(d)
    probe_subarray_bomb()
    probe_window_start_bomb()
    probe_msgpack_bomb()
    probe_double_delete(d)
    probe_runner_capabilities()
    probe_importers(d)
    probe_campaign_opened_twice(d)
    victim = probe_lock_symlink(d)
    probe_planted_temp_name(d, victim)
    probe_world_writable_token(d)
    for line in out:
        print(json.dumps(line))


def probe_external_storage(d: Path):
    """1. external storage: a plan reads a file of the sender's choosing, and the error echoes it"""
    from mimesys.plan import Plan
    secret = d / "secret.key"
    secret.write_bytes(np.array([20308] * 64, "<u2").tobytes())
    data = plan_file(lambda f: f.create_dataset("compositions", shape=(1, M, 1), dtype="<u2",
                                                external=[(str(secret), 0, h5py.h5f.UNLIMITED)]))
    try:
        p = Plan.from_bytes(data, where="plan")
        p.validate(CAT)
        report("external storage leaks file bytes", True, "accepted")
    except Exception as e:  # noqa: BLE001
        report("external storage leaks file bytes", "20308" in str(e), e)


def probe_subarray_bomb():
    """2. a sub-array dtype: a tiny body declaring ~360 MB"""
    from mimesys.plan import Plan
    bomb = plan_file(lambda f: f.create_dataset("compositions", shape=(1, M, 1), dtype=np.dtype(("<f4", (5_000_000,))),
                                                chunks=(1, 1, 1)))
    peak, err = peak_mib(lambda: Plan.from_bytes(bomb, where="plan"))
    report("sub-array dtype allocation bomb", peak > 100, f"body {len(bomb)} B, peak {peak:.0f} MiB, {err}")


def probe_window_start_bomb():
    """3. /window_start_ns never size-checked"""
    from mimesys.trace import Trace
    buf = io.BytesIO()
    with h5py.File(buf, "w") as f:
        f.create_dataset("values", data=np.zeros((3, 1), np.float32))
        f.create_dataset("window_start_ns", shape=(20_000_000,), dtype="<i8", chunks=(1 << 16,))
        f.attrs["format"] = "mimesys.trace"
        f.attrs["schema_version"] = 1
        f.attrs["metrics"] = '[{"name": "cpu.util", "unit": "fraction"}]'
    peak, err = peak_mib(lambda: Trace.read(io.BytesIO(buf.getvalue())))
    report("window_start_ns allocation bomb", peak > 100, f"body {len(buf.getvalue())} B, peak {peak:.0f} MiB, {err}")


def probe_msgpack_bomb():
    """4. msgpack decoded with per-container limits only"""
    from mimesys import wire
    body = msgpack.packb({"a": [[] for _ in range(200_000)]})
    peak, err = peak_mib(lambda: wire.unpack(body))
    report("msgpack object bomb", err is None, f"body {len(body)} B, peak {peak:.0f} MiB, {err}")


def probe_double_delete(d: Path):
    """5. a second DELETE while the trace is written wedges the run"""
    from agentd import runloop
    os.environ["MIMESYS_SIM_SPEEDUP"] = "1"
    os.environ["MIMESYS_SIM_CPUS"] = "2"
    real = runloop.write_trace
    entered = threading.Event()

    def slow(*a, **kw):
        entered.set()
        time.sleep(0.5)
        return real(*a, **kw)
    runloop.write_trace = slow
    state = asyncio.run(double_delete(d, entered))
    runloop.write_trace = real
    report("double DELETE wedges the run", state == "running", f"state after both DELETEs: {state}")


async def double_delete(d: Path, entered: threading.Event) -> str:
    """A sim run cancelled, and cancelled again once its trace is being written: its state after."""
    from mimesys.backend import RunOptions
    from mimesys.plan import Plan
    from agentd.backend_registry import create_backend
    from agentd.config import config_from_dict
    from agentd.runs import RunManager
    cfg = config_from_dict({"agent": {"backend": "sim", "state_dir": str(d / "state"),
                                      "scratch_dir": str(d / "state" / "scratch")}})
    backend = create_backend(cfg)
    mgr = RunManager(backend, CAT, state_dir=d / "state", max_threads=2)
    a = np.zeros((30, M, 2), np.float32)
    a[:, 0, :] = 0.5
    run = await mgr.start(Plan.from_catalog(a, CAT, window_s=0.05), RunOptions())
    while run.windows_done < 2:
        await asyncio.sleep(0.02)
    first = asyncio.create_task(mgr.cancel(run.run_id))
    while not entered.is_set():
        await asyncio.sleep(0.01)
    await mgr.cancel(run.run_id)
    await asyncio.sleep(1.0)
    with __import__("contextlib").suppress(BaseException):
        await asyncio.wait_for(first, 2)
    state = mgr.book.status(run.run_id)["state"]
    await backend.close()
    return state


def probe_runner_capabilities():
    """6. the runner keeps the agent's capabilities"""
    from mimesys.plan import Plan
    from agentd.runner import RunnerConfig, start_runner

    async def caps():
        a = np.zeros((3, M, 1), np.float32)
        a[:, CAT.index("cpu_fp_poly"), :] = 0.5
        h = await start_runner(Plan.from_catalog(a, CAT, window_s=0.2), RunnerConfig(cpus=(0,)))
        st = Path(f"/proc/{h.pid}/status").read_text()
        await h.wait()
        return st.split("CapEff:")[1].split()[0]
    eff = asyncio.run(caps())
    report("runner inherits capabilities", int(eff, 16) != 0, f"CapEff {eff} (test run as root)")


def probe_importers(d: Path):
    """7. importers: NaN timestamps, huge CSV field"""
    from controller.importers import get
    p = d / "ali.csv"
    p.write_text("m_1,nan,41,92,,,43.04,31.03,4\nm_1,10,43,92,,,43.05,31.04,4\n")
    try:
        get("alibaba").load(p)
        report("importer: NaN timestamp", True, "accepted")
    except Exception as e:  # noqa: BLE001
        report("importer: NaN timestamp", type(e).__name__ != "TraceImportError", f"{type(e).__name__}: {e}")
    p = d / "huge.csv"
    p.write_text("timestamp,cpu.util\n1,\"" + "9" * 300_000 + "\"\n2,0.5\n")
    try:
        get("csv").load(p)
        report("importer: huge CSV field", True, "accepted")
    except Exception as e:  # noqa: BLE001
        report("importer: huge CSV field", type(e).__name__ != "TraceImportError", f"{type(e).__name__}: {str(e)[:80]}")


def probe_campaign_opened_twice(d: Path):
    """8. two openers of one campaign's sample log"""
    from controller.campaign.store import RecordLog
    a = RecordLog(d / "camp" / "samples.log")
    try:
        RecordLog(d / "camp" / "samples.log")
        report("campaign opened twice", True, "second open succeeded")
    except Exception as e:  # noqa: BLE001
        report("campaign opened twice", False, e)
    a.close()


def probe_lock_symlink(d: Path) -> Path:
    """9. the run lock follows a symlink planted by the directory's owner -> the file it points at"""
    from agentd.hostlock import host_run_lock
    victim = d / "shadow"
    victim.write_text("root:hash\n")
    (d / "run").mkdir()
    (d / "run" / "run.lock").symlink_to(victim)
    try:
        with host_run_lock(d / "run" / "run.lock"):
            pass
    except Exception:  # noqa: BLE001
        pass
    report("run lock follows a symlink", victim.read_text() != "root:hash\n", f"victim now {victim.read_text()!r}")
    return victim


def probe_planted_temp_name(d: Path, victim: Path):
    """10. a fixed temporary name lets the directory's owner redirect calibrate's write"""
    from mimesys import calibration
    victim.write_text("root:hash\n")
    (d / ".calibration.json.tmp").symlink_to(victim)
    try:
        calibration.write({"version": 1}, d / "calibration.json")
    except Exception:  # noqa: BLE001
        pass
    report("atomic write through a planted temp name", victim.read_text() != "root:hash\n",
           f"victim now {victim.read_text()[:30]!r}")


def probe_world_writable_token(d: Path):
    """11. a world-writable token is accepted"""
    from agentd.config import config_from_dict
    tok = d / "token"
    tok.write_text("0123456789abcdef0123\n")
    tok.chmod(0o602)
    try:
        config_from_dict({"api": {"token_file": str(tok)}}).read_token()
        report("world-writable token accepted", True, "accepted")
    except Exception as e:  # noqa: BLE001
        report("world-writable token accepted", False, e)


if __name__ == "__main__":
    main()
