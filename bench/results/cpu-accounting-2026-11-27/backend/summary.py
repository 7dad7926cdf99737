"""Per measurement (old: tick-sampled busy fields; new: wall - idle) and method: |core busy - plan target|
over the windows inverse's plan names a core target for, per mix and all; single scored against the same targets."""
import json, os, sys, numpy as np, collections, tomllib
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../../..")
sys.path.insert(0, ROOT)
from mimesys.plan import Plan
D = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
cls = {e["name"]: e["class"] for e in tomllib.load(open(os.path.join(ROOT, "stressors/catalog.toml"), "rb"))["stressor"]}
acc = collections.defaultdict(list)
for v in ("old", "new"):
    for m in ("inv", "single"):
        try: runs = json.load(open(f"{D}/{v}-{m}.json"))
        except FileNotFoundError: continue
        for p, r in runs.items():
            mix = p.split("/")[-1].split("__")[0]
            plans = os.path.join(ROOT, "bench/results/fidelity/hold-late-2026-11-27/plans")
            ip = Plan.read(os.path.join(plans, os.path.basename(p).replace("__single", "__inverse")))
            tg = ip.core_busy_target
            iscpu = np.array([cls[n] == "cpu" for n in ip.catalog_names])
            cpu = np.array(r["cpu"]); T = min(len(cpu), len(tg))
            for t in range(T):
                for k in range(tg.shape[1]):
                    if np.isnan(tg[t, k]): continue
                    col = ip.compositions[t, :, k]; io = col[~iscpu].sum() > 0; comp = col[iscpu].sum() > 0
                    kind = "held" if io else "compute-only" if comp else "idle"
                    e = cpu[t, k] - tg[t, k]
                    for key in (mix, "ALL", "kind:" + kind):
                        acc[(key, v, m)].append(e)
for key in sorted({k[0] for k in acc}):
    for v in ("old", "new"):
        for m in ("inv", "single"):
            e = np.array(acc.get((key, v, m), []))
            if len(e): print("%-18s %-3s %-6s n=%4d mean|e| %.4f bias %+.4f within1 %.3f" % (key, v, m, len(e), np.abs(e).mean(), e.mean(), (np.abs(e) < 0.0105).mean()))
