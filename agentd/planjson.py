"""A plan as JSON a person can read and write: per thread, a list of phases, each holding one
composition for a number of windows (rt-app users write per-thread phases the same way).

    {
      "format": "mimesys.plan-json", "version": 1,
      "window_s": 1.0, "seed": 0,
      "threads": [
        {"phases": [{"windows": 10, "run": {"cpu_int_crc32": 0.5}},
                    {"windows": 5,  "run": {}},
                    {"windows": 5,  "run": {"mem_stream_triad_256M": 0.3, "cpu_fp_poly": 0.2}}]},
        {"phases": [{"windows": 20, "run": {"disk_seq_write_fdatasync": 0.25}}]}
      ],
      "memory_held": [{"windows": 10, "MiB": 0}, {"windows": 10, "MiB": 512}]
    }

`run` maps stressor names (the catalog's) to the share of each window that stressor runs on
the thread; what is not listed is idle. A phase may add `"core_busy": 0.6`: the busy fraction
of the thread's core the runner holds in those windows by sizing its compute
(Plan.core_busy_target). Every thread covers the same number of windows.
`memory_held` (optional) lists, in the same phases of windows, the memory the plan holds
resident beside its stressors' buffers (Plan.mem_held_B), in MiB; it covers every window too.
Optional: `catalog_hash` (checked against the catalog), `provenance`, `host_fingerprint`.
Conversion is exact both ways up to float32: to_json(from_json(x)) keeps the numbers.
"""

from __future__ import annotations

import json
import math

import numpy as np

from mimesys.catalog import Catalog
from mimesys.errors import PlanError
from mimesys.plan import Plan

FORMAT = "mimesys.plan-json"
VERSION = 1
MAX_WINDOWS = 10_000_000
MAX_THREADS = 4096


def to_json(plan: Plan, catalog: Catalog | None = None) -> dict:
    """The plan as phases: consecutive windows with the same composition on a thread merge."""
    names = list(plan.catalog_names)
    a = np.asarray(plan.compositions, np.float32)
    busy = plan.core_busy_target
    threads = []
    for k in range(plan.K):
        phases = []
        prev = None
        for t in range(plan.T):
            col = a[t, :, k]
            # The shortest decimal that is the same float32 (0.3, not 0.30000001192092896).
            run = {names[m]: float(str(col[m])) for m in np.nonzero(col)[0]}
            hold = None if busy is None or not np.isfinite(busy[t, k]) else float(str(busy[t, k]))
            if prev is not None and run == prev["run"] and hold == prev.get("core_busy"):
                prev["windows"] += 1
            else:
                prev = {"windows": 1, "run": run} | ({} if hold is None else {"core_busy": hold})
                phases.append(prev)
        threads.append({"phases": phases})
    doc = {"format": FORMAT, "version": VERSION, "window_s": float(plan.window_s), "seed": int(plan.seed),
           "catalog_hash": plan.catalog_hash, "threads": threads}
    if plan.mem_held_B is not None:
        doc["memory_held"] = _held_phases(plan.mem_held_B)
    if plan.provenance:
        doc["provenance"] = plan.provenance
    if plan.host_fingerprint:
        doc["host_fingerprint"] = plan.host_fingerprint
    return doc


def _held_phases(held: np.ndarray) -> list[dict]:
    phases: list[dict] = []
    for b in np.asarray(held, np.float64):
        mib = float(b) / 2**20
        if phases and phases[-1]["MiB"] == mib:
            phases[-1]["windows"] += 1
        else:
            phases.append({"windows": 1, "MiB": mib})
    return phases


def _held_from(phases, T: int, where: str) -> np.ndarray:
    w = f"{where}: memory_held"
    if not isinstance(phases, list):
        raise PlanError(f"{w}: expected a list of {{\"windows\": N, \"MiB\": size}}")
    out, t = np.zeros(T, np.float64), 0
    for p, ph in enumerate(phases):
        wp = f"{w}[{p}]"
        if not isinstance(ph, dict) or set(ph) - {"windows", "MiB"}:
            raise PlanError(f"{wp}: expected {{\"windows\": N, \"MiB\": size}}")
        n, mib = ph.get("windows", 1), ph.get("MiB", 0)
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise PlanError(f"{wp}.windows: expected a positive integer, got {n!r}")
        if isinstance(mib, bool) or not isinstance(mib, (int, float)) or not math.isfinite(mib) or mib < 0:
            raise PlanError(f"{wp}.MiB: expected a size in MiB >= 0, got {mib!r}")
        if t + n > T:
            raise PlanError(f"{w}: covers more than the threads' {T} windows")
        out[t:t + n] = float(mib) * 2**20
        t += n
    if t != T:
        raise PlanError(f"{w}: covers {t} windows, the threads {T}")
    return out


def from_json(doc, catalog: Catalog, where: str = "plan JSON") -> Plan:
    """Parse and check a person-written plan; errors name the thread, phase and key."""
    if not isinstance(doc, dict):
        raise PlanError(f"{where}: expected a JSON object")
    known = {"format", "version", "window_s", "seed", "catalog_hash", "threads", "provenance", "host_fingerprint",
             "memory_held"}
    unknown = sorted(set(doc) - known)
    if unknown:
        raise PlanError(f"{where}: unknown key(s) {unknown}; valid: {', '.join(sorted(known))}")
    if doc.get("format", FORMAT) != FORMAT:
        raise PlanError(f"{where}: format {doc.get('format')!r}, expected {FORMAT!r}")
    if doc.get("version", VERSION) != VERSION:
        raise PlanError(f"{where}: version {doc.get('version')!r} not supported (this build reads {VERSION})")
    window_s = doc.get("window_s", 1.0)
    if isinstance(window_s, bool) or not isinstance(window_s, (int, float)) or not (0 < window_s <= 3600):
        raise PlanError(f"{where}: window_s must be a number of seconds in (0, 3600], got {window_s!r}")
    seed = doc.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**63:
        raise PlanError(f"{where}: seed must be a non-negative integer, got {seed!r}")
    if "catalog_hash" in doc and doc["catalog_hash"] != catalog.hash:
        raise PlanError(f"{where}: catalog_hash {doc['catalog_hash']!r} is not this agent's catalog "
                        f"({catalog.hash}); remove the key to use this catalog's stressors by name")
    threads = doc.get("threads")
    if not isinstance(threads, list) or not threads:
        raise PlanError(f"{where}: threads must be a non-empty list")
    if len(threads) > MAX_THREADS:
        raise PlanError(f"{where}: {len(threads)} threads; at most {MAX_THREADS}")
    index = {s.name: i for i, s in enumerate(catalog.stressors)}
    columns = []
    for k, th in enumerate(threads):
        w = f"{where}: threads[{k}]"
        if not isinstance(th, dict) or set(th) - {"phases", "name"} or not isinstance(th.get("phases"), list):
            raise PlanError(f"{w}: expected {{\"phases\": [...]}} (and optionally \"name\")")
        total = 0
        rows = []
        for p, ph in enumerate(th["phases"]):
            wp = f"{w}.phases[{p}]"
            if not isinstance(ph, dict) or set(ph) - {"windows", "run", "core_busy"}:
                raise PlanError(f"{wp}: expected {{\"windows\": N, \"run\": {{stressor: fraction}}}} "
                                f"(and optionally \"core_busy\": fraction)")
            hold = ph.get("core_busy")
            if hold is not None and (isinstance(hold, bool) or not isinstance(hold, (int, float))
                                     or not math.isfinite(hold) or not 0 <= hold <= 1):
                raise PlanError(f"{wp}.core_busy: expected a fraction in [0, 1], got {hold!r}")
            n = ph.get("windows", 1)
            if isinstance(n, bool) or not isinstance(n, int) or n < 1:
                raise PlanError(f"{wp}.windows: expected a positive integer, got {n!r}")
            total += n
            if total > MAX_WINDOWS:
                raise PlanError(f"{w}: more than {MAX_WINDOWS} windows")
            run = ph.get("run", {})
            if not isinstance(run, dict):
                raise PlanError(f"{wp}.run: expected an object of stressor: fraction")
            col = np.zeros(len(catalog), np.float32)
            for name, frac in run.items():
                if name not in index:
                    close = [s for s in index if s.split("_")[0] == str(name).split("_")[0]][:5]
                    raise PlanError(f"{wp}.run: unknown stressor {name!r}"
                                    + (f" (this catalog has {', '.join(close)})" if close else ""))
                if isinstance(frac, bool) or not isinstance(frac, (int, float)) or not math.isfinite(frac) \
                        or not 0 <= frac <= 1:
                    raise PlanError(f"{wp}.run.{name}: expected a fraction in [0, 1], got {frac!r}")
                col[index[name]] = frac
            if float(col.astype(np.float64).sum()) > 1 + 1e-6:
                raise PlanError(f"{wp}.run: fractions sum to {float(col.sum()):.6g} > 1 (a window holds at most "
                                f"all of itself)")
            rows.append((n, col, hold))
        columns.append((total, rows))
    lengths = {t for t, _ in columns}
    if len(lengths) != 1:
        raise PlanError(f"{where}: threads cover different numbers of windows: "
                        + ", ".join(f"threads[{k}] {t}" for k, (t, _) in enumerate(columns)))
    T = lengths.pop()
    a = np.zeros((T, len(catalog), len(threads)), np.float32)
    busy = np.full((T, len(threads)), np.nan, np.float32)
    for k, (_, rows) in enumerate(columns):
        t = 0
        for n, col, hold in rows:
            a[t:t + n, :, k] = col
            if hold is not None:
                busy[t:t + n, k] = hold
            t += n
    prov, fp = doc.get("provenance", {}), doc.get("host_fingerprint", {})
    if not isinstance(prov, dict) or not isinstance(fp, dict):
        raise PlanError(f"{where}: provenance and host_fingerprint must be objects")
    plan = Plan.from_catalog(a, catalog, window_s=float(window_s), seed=int(seed),
                             provenance={"by": "plan from-json", **prov}, host_fingerprint=fp,
                             core_busy_target=busy if np.isfinite(busy).any() else None,
                             mem_held_B=_held_from(doc["memory_held"], T, where) if "memory_held" in doc else None)
    return plan.validate(catalog)


def dumps(doc: dict) -> str:
    """Indented JSON with one phase per line (what a person edits)."""
    head = {k: v for k, v in doc.items() if k not in ("threads", "memory_held")}
    lines = ["{"] + [f" {json.dumps(k)}: {json.dumps(v, sort_keys=True)}," for k, v in head.items()]
    lines.append(' "threads": [')
    for k, th in enumerate(doc["threads"]):
        lines.append('  {"phases": [')
        for p, ph in enumerate(th["phases"]):
            lines.append("    " + json.dumps(ph) + ("," if p < len(th["phases"]) - 1 else ""))
        lines.append("  ]}" + ("," if k < len(doc["threads"]) - 1 else ""))
    if "memory_held" in doc:
        lines += [" ],", ' "memory_held": ['] + [f"  {json.dumps(ph)}," for ph in doc["memory_held"]]
        lines[-1] = lines[-1].rstrip(",")
    lines += [" ]", "}"]
    return "\n".join(lines) + "\n"
