"""Structure-aware fuzz of plan and trace bodies against a real agent process on 127.0.0.1
(issues 16, 41). Hypothesis builds HDF5 files feature by feature (dtypes, external storage, soft,
external and duplicate hard links, virtual datasets, chunking with unwritten chunks, filters,
declared sizes, attributes: since issue 41 every one must get 415, HDF5 never crosses the API),
raw-array plans and traces field by field (the wire format), and valid bodies with bytes
flipped, inserted, cut or repeated, and sends them to POST /v1/runs and POST /v1/generate,
in rounds until --minutes have passed. Measured: every status code (a 5xx is a failure), whether any answer
echoes a byte of a "secret" file that external storage points at, the agent's RSS, and
/healthz latency probed every 50 ms throughout from a process of its own, beside a bare control
server (a stall both show is the host's), and the agent's own event-loop lag.

The agent uses the simulated host backend (labelled simulated): what is fuzzed is the body
parsing and validation path, which is the same for every backend. A file with a feature the
untrusted-HDF5 gate must refuse (tests/hostile_h5.py: H5Case.hostile) that is accepted anyway
is counted (hostile_accepted).

Then (issue 22) the same plan files, once the agent's figures are taken, are given to `replay`
as files on disk, as an operator (root) would: `mimesys-agent replay FILE --no-record -- true`
with the real host backend whose runner is a sentinel script that runs nothing. Per case: the
exit status (documented: 1 or 4), no Python traceback, no spelling of the secret in stdout or
stderr, the seconds it took, and whether the runner was reached (never for a hostile file).
The JSON line's "replay" holds these figures.

    python bench/hardening_fuzz.py [--examples 300] [--replay-examples N] [--out bench/results/hardening/fuzz.jsonl]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import msgpack
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))   # hostile_h5, shared with the tests

from bench.hardening_agent import control_server, healthz_probing, healthz_summary, loop_lag, real_agent  # noqa: E402
from hostile_h5 import (CATALOG, M, SECRET_VALUE, ReplayHarness, h5_case, leaks,  # noqa: E402
                              replay_verdict, write_secrets)

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
    n = math.prod(shape) if shape else 0            # exact: np.prod wraps past 2^63
    nbytes = min(1 << 20, draw(st.sampled_from([n * 4, max(0, n * 4 - 4), n * 4 + 4, 0, 7])))
    return {"compositions": {"shape": shape, "dtype": draw(st.sampled_from(["<f4", "<f8", "|O", 5])),
                             "bytes": b"\0" * nbytes},
            "catalog_names": draw(st.sampled_from([CATALOG.names, ["x"], "names", []])),
            "catalog_hash": draw(st.sampled_from([CATALOG.hash, 1, ""])),
            "window_s": draw(st.sampled_from([1.0, float("nan"), "1", True, 1e30])),
            "seed": draw(st.sampled_from([0, -5, 2**64 - 1, 1.5]))}


@st.composite
def raw_trace(draw):
    """Trace.to_wire maps, valid or broken field by field (the only trace format the API takes)."""
    T, N = draw(st.integers(0, 6)), draw(st.integers(0, 4))
    dim = st.integers(0, 3) | st.integers(0, 10**7)
    shape = draw(st.sampled_from([[T, N], [T], [draw(dim), draw(dim)], []]))
    n = math.prod(shape) if shape else 0
    nbytes = min(1 << 20, draw(st.sampled_from([n * 4, max(0, n * 4 - 4), n * 4 + 4, 0])))
    name = st.sampled_from(["cpu.util", "disk.read_Bps", "x" * 300, "", "cpu.util.core0"])
    metrics = draw(st.sampled_from([[{"name": draw(name), "unit": "fraction"} for _ in range(N)], "m", [1], [{}]]))
    nest: object = {}
    for _ in range(draw(st.integers(0, 40))):
        nest = {"x": nest}
    return {"values": {"shape": shape, "dtype": draw(st.sampled_from(["<f4", "<f8", 3])),
                       "bytes": b"\0" * nbytes},
            "metrics": metrics, "window_s": draw(st.sampled_from([1.0, 0.0, -1.0, float("inf"), "1", None])),
            "provenance": draw(st.sampled_from([{}, nest, [1], "p"]))}


def _valid_body(path: str) -> bytes:
    if path == "/v1/runs":
        a = np.full((2, M, 1), 0.0, np.float32)
        a[:, 0, 0] = 0.1
        obj = {"plan": {"compositions": {"shape": [2, M, 1], "dtype": "<f4", "bytes": a.tobytes()},
                        "catalog_names": CATALOG.names, "catalog_hash": CATALOG.hash, "window_s": 0.05, "seed": 1},
               "options": {"record": False}}
    else:
        obj = {"trace": {"values": {"shape": [3, 1], "dtype": "<f4", "bytes": b"\0" * 12},
                         "metrics": [{"name": "cpu.util", "unit": "fraction"}], "window_s": 1.0}, "seed": 1}
    return msgpack.packb({"v": 1, **obj}, use_bin_type=True)


@st.composite
def mutated_body(draw):
    """A valid body with bytes flipped, inserted, cut or repeated: msgpack framing, lengths and
    type tags the typed strategies never write."""
    path = draw(st.sampled_from(["/v1/runs", "/v1/generate"]))
    b = bytearray(_valid_body(path))
    for _ in range(draw(st.integers(1, 8))):
        i = draw(st.integers(0, max(0, len(b) - 1)))
        op = draw(st.integers(0, 3))
        if op == 0 and b:
            b[i] = draw(st.integers(0, 255))
        elif op == 1:
            b[i:i] = bytes(draw(st.lists(st.integers(0, 255), min_size=1, max_size=9)))
        elif op == 2:
            del b[i:i + draw(st.integers(1, 16))]
        else:
            b[i:i] = b[i:i + draw(st.integers(1, 64))] * draw(st.integers(1, 50))
    return path, bytes(b)


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


def replay_files(plans: list[tuple[Path, "H5Case"]], work: Path) -> dict:
    """Each plan file the agent was sent, given to `mimesys-agent replay FILE --no-record -- true`
    (tests/hostile_h5.py: the real host backend, a sentinel for the runner)."""
    harness = ReplayHarness(work)
    statuses: Counter = Counter()
    wrong: list[str] = []
    tracebacks = leaked = reached = hostile = bypass = diag = 0
    seconds: list[float] = []
    t0 = time.monotonic()
    for path, case in plans:
        r = harness.replay(path)
        statuses[str(r["status"])] += 1
        seconds.append(r["seconds"])
        tracebacks += r["traceback"]
        leaked += r["leak"]
        reached += r["runner_started"]
        hostile += bool(case.hostile)
        bypass += bool(case.hostile) and r["runner_started"]
        diag += r["hdf5_diag"]
        verdict = replay_verdict(case, r)
        if verdict:
            wrong.append(f"{case.label()}: {'; '.join(verdict)}: {r['stderr'][-300:]!r}")
    return {"cases": len(plans), "hostile_cases": hostile, "seconds": round(time.monotonic() - t0, 1),
            "exit_status_counts": dict(sorted(statuses.items())),
            "tracebacks": tracebacks, "secret_leaks": leaked, "runner_reached": reached,
            "runner_reached_by_hostile": bypass, "hdf5_diag_on_stderr": diag,
            "max_seconds_per_case": round(max(seconds, default=0.0), 2),
            "median_seconds_per_case": round(float(np.median(seconds)) if seconds else 0.0, 2),
            "failures": len(wrong), "first_failures": wrong[:5],
            "how": "mimesys-agent replay FILE --no-record --no-progress -- true, backend host, runner = a sentinel "
                   "script that runs nothing; documented statuses 1 (file refused) and 4 (plan cannot run here)"}


def main(argv=None) -> None:
    args = parse_args(argv)
    tally = Tally()
    n_replay = args.examples if args.replay_examples is None else args.replay_examples
    with tempfile.TemporaryDirectory(prefix="mimesys-fuzz-") as d:
        tmp = Path(d)
        write_secrets(tmp)
        (tmp / "plans").mkdir()
        figures = fuzz_agent(args, tmp, tally, n_replay)
        # the prober's clock starts when it does, just after t_probe
        figures["healthz_base"] = healthz_summary(tmp / "healthz.txt", 0.0, args.baseline_s)
        figures["healthz_fuzzed"] = healthz_summary(tmp / "healthz.txt", figures["t0"] - figures["t_probe"])
        # After the agent's figures are taken: replay's processes would otherwise load the same CPUs.
        replay = replay_files(tally.plans, tmp / "replay")
    result = summary(args, tally, figures, replay)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("a") as f:
        f.write(json.dumps(result) + "\n")
    print(json.dumps(result))
    if tally.failures or tally.leaked or tally.bypasses or replay["failures"]:
        sys.exit(1)


def parse_args(argv) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--examples", type=int, default=300,
                    help="per body kind and round (plan HDF5, trace HDF5, raw plan, raw trace, mutated bytes)")
    ap.add_argument("--minutes", type=float, default=0.0, help="repeat rounds until this much time has passed")
    ap.add_argument("--replay-examples", type=int, default=None,
                    help="plan files given to `replay` too (the first N the agent was sent; default: all)")
    ap.add_argument("--out", type=Path, default=Path("bench/results/hardening/fuzz.jsonl"))
    ap.add_argument("--note", default="")
    ap.add_argument("--baseline-s", type=float, default=30.0,
                    help="probe /healthz this long with no fuzz traffic first (what the host's load alone costs)")
    return ap.parse_args(argv)


@dataclass
class Tally:
    """What the fuzz saw: every status code, the failures (5xx), the answers that echo the
    secret, the hostile files accepted, and the plan files kept for replay."""
    statuses: Counter = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)
    leaked: list[str] = field(default_factory=list)
    bypasses: list[str] = field(default_factory=list)
    plans: list[tuple[Path, object]] = field(default_factory=list)

    def send(self, agent, path, obj, label, hostile=()):
        status, body = post(agent, path, msgpack.packb({"v": 1, **obj}, use_bin_type=True))
        self.statuses[f"{label}:{status}"] += 1
        if hostile and (status < 400 or status == 501):   # 501: it passed every check, to the model step
            self.bypasses.append(f"{label} {status} for a file with {', '.join(hostile)}")
        if status == 501 and b"no generation model installed" in body:
            return   # a trace that passed every check reached the model step; none is installed here
        if status >= 500:
            self.failures.append(f"{label} {status}: {body[:300]!r}")
        if leaks(body):
            self.leaked.append(f"{label}: {body[:300]!r}")
        if status == 201:
            code = delete(agent, msgpack.unpackb(body)["run_id"])
            self.statuses[f"delete:{code}"] += 1
            if code >= 500:
                self.failures.append(f"DELETE {code}")

    def send_mutated(self, agent, path, body):
        label = "mutated_" + path.rsplit("/", 1)[1]
        status, answer = post(agent, path, body)
        self.statuses[f"{label}:{status}"] += 1
        if status >= 500 and not (status == 501 and b"no generation model installed" in answer):
            self.failures.append(f"{label} {status}: {answer[:300]!r}")
        if status == 201:
            delete(agent, msgpack.unpackb(answer)["run_id"])


def fuzzers(agent, tmp: Path, tally: Tally, examples: int, n_replay: int) -> tuple:
    """The five fuzz functions, one per body kind (each call draws `examples` new ones)."""
    common = settings(max_examples=examples, deadline=None, database=None,
                      suppress_health_check=list(HealthCheck))

    @common
    @given(h5_case(tmp, "plan"))
    def fuzz_plan_h5(case):
        tally.send(agent, "/v1/runs", {"plan": case.data}, "plan_h5", case.hostile)
        if len(tally.plans) < n_replay:     # the same file, for replay once the agent is gone
            path = tmp / "plans" / f"{len(tally.plans):05d}.h5"
            path.write_bytes(case.data)
            tally.plans.append((path, case))

    @common
    @given(h5_case(tmp, "trace"))
    def fuzz_trace_h5(case):
        tally.send(agent, "/v1/generate", {"trace": case.data}, "trace_h5", case.hostile)

    @common
    @given(raw_plan())
    def fuzz_plan_raw(obj):
        tally.send(agent, "/v1/runs", {"plan": obj}, "plan_raw")

    @common
    @given(raw_trace())
    def fuzz_trace_raw(obj):
        tally.send(agent, "/v1/generate", {"trace": obj}, "trace_raw")

    @common
    @given(mutated_body())
    def fuzz_mutated(case):
        tally.send_mutated(agent, *case)

    return fuzz_plan_h5, fuzz_trace_h5, fuzz_plan_raw, fuzz_trace_raw, fuzz_mutated


def fuzz_agent(args, tmp: Path, tally: Tally, n_replay: int) -> dict:
    """A real agent (and a bare control server) probed on /healthz throughout: the idle baseline,
    then rounds of every kind until the time budget is spent (each round draws new examples).
    -> the agent's figures (rounds, seconds, RSS, event-loop lag, alive at the end)."""
    with real_agent(tmp / "agent", speedup=0.0) as agent, control_server() as control, \
            healthz_probing(agent.url, control, {"Authorization": f"Bearer {agent.token}"}, tmp / "healthz.txt",
                            period_s=0.05):
        probe = RssProbe(agent)
        probe.start()
        t_probe = time.monotonic()
        time.sleep(args.baseline_s)
        t0 = time.monotonic()
        fns = fuzzers(agent, tmp, tally, args.examples, n_replay)
        rounds = 0
        while True:
            for fn in fns:
                fn()
            rounds += 1
            if time.monotonic() - t0 >= args.minutes * 60:
                break
        elapsed = time.monotonic() - t0
        probe.stop.set()
        probe.join(5)
        lag = asyncio.run(loop_lag(agent.url, {"Authorization": f"Bearer {agent.token}"}))
        alive = agent.proc.poll() is None
    return {"rounds": rounds, "elapsed": elapsed, "t0": t0, "t_probe": t_probe, "rss": probe.rss, "lag": lag,
            "alive": alive}


def summary(args, tally: Tally, figures: dict, replay: dict) -> dict:
    """The JSON line: the fuzz's tally, the agent's figures, the replays'."""
    rss, failures = figures["rss"], tally.failures
    load = open("/proc/loadavg").read().split()[:3]
    return {"bench": "hardening_fuzz", "examples_per_kind": args.examples, "rounds": figures["rounds"],
            "requests": sum(tally.statuses.values()),
            "seconds": round(figures["elapsed"], 1), "backend": "sim (simulated host; a real agent process on 127.0.0.1)",
            "status_counts": dict(sorted(tally.statuses.items())),
            "5xx": len(failures), "5xx_note": "501 'no generation model installed' (the documented answer to a "
            "trace that passed every check, on an agent without a model) is counted in status_counts, not as a failure", "first_5xx": failures[:5],
            "secret_leaks": len(tally.leaked), "first_leaks": tally.leaked[:3],
            "hostile_accepted": len(tally.bypasses), "first_hostile_accepted": tally.bypasses[:3],
            "rss_mib_first": round(rss[0], 1), "rss_mib_max": round(max(rss), 1),
            "rss_mib_last": round(rss[-1], 1),
            **figures["healthz_fuzzed"], **figures["lag"],
            "healthz_idle_baseline": {"seconds": args.baseline_s, **figures["healthz_base"]},
            "loadavg_at_end": load, "agent_alive_at_end": figures["alive"], "replay": replay, "note": args.note}


if __name__ == "__main__":
    main()
