"""End-to-end evaluation on this host: trace fidelity (DTW) of every method on an imported trace
and on traces recorded here from real applications, and a colocation result.

Prints ONE JSON line:
  dtw_mean            method -> mean normalized DTW over traces and scored metrics ("MEAN")
  dtw_by_trace        trace -> method -> MEAN
  colocation          {app, mix, method, degradation_mix_pct, degradation_plan_pct, difference_pp}
                      (only with --colocation-method)
  simulated           whether the agent is the simulated host (then nothing here is a measurement)
  loadavg_before/after the machine may be shared: read the figures with it
Writes results.json, results.csv, summary.csv, one PNG per trace and colocation.json to --outdir.

    python bench/eval_host.py --agent http://127.0.0.1:7433 --token-file TOKEN \\
        --trace bench/results/eval_host/num_vms_1_7_on_this_host.h5 \\
        --trace bench/results/eval_host/sqlite_bank_recorded.h5 \\
        --method model=MODEL_DIR --method aligned=ALIGNED_DIR --method nearest --method knn --method single \\
        --dataset DATASET.h5 [--colocation-method model --mix-trace bench/results/eval_host/mix_gzip_sort_recorded.h5]

Traces are made beforehand with `mimesys import ... --host AGENT` and `mimesys-agent record`
(see bench/results/eval_host/README.md for the exact commands that made the committed ones).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shlex
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mimesys.trace import Trace  # noqa: E402
from controller.commands._agents import one_agent  # noqa: E402
from controller.commands.evaluate import resolve_method  # noqa: E402
from controller.evaluate.colocation import AppSpec, colocation  # noqa: E402
from controller.evaluate.driver import EvalOptions, evaluate  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--agent", required=True)
    ap.add_argument("--token-file", default=None)
    ap.add_argument("--trace", action="append", required=True)
    ap.add_argument("--method", action="append", required=True)
    ap.add_argument("--dataset", default=None)
    ap.add_argument("--outdir", default=str(ROOT / "bench" / "results" / "eval_host"))
    ap.add_argument("--band", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--colocation-method", default=None, help="method whose plan (from --mix-trace) is co-located")
    ap.add_argument("--mix-trace", default=str(ROOT / "bench" / "results" / "eval_host" / "mix_gzip_sort_recorded.h5"))
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    outdir = Path(args.outdir)
    load_before = os.getloadavg()
    gens = dict(resolve_method(m, args.dataset) for m in args.method)
    targets = {Path(p).stem: Trace.read(p) for p in args.trace}

    async def run():
        client = one_agent(None, args.agent, Path(args.token_file) if args.token_file else None)
        try:
            res = await evaluate(targets, gens, client, EvalOptions(outdir=outdir, band=args.band, seed=args.seed))
            colo = None
            if args.colocation_method:
                mix_trace = Trace.read(args.mix_trace)
                plan = await asyncio.to_thread(gens[args.colocation_method].generate, mix_trace, seed=args.seed)
                plan_path = outdir / f"mix_plan_{args.colocation_method}.h5"
                plan.write(plan_path)
                py = shlex.quote(sys.executable)
                app = AppSpec(f"{py} {ROOT / 'bench/workloads/sqlite_bank.py'} --seconds 8", regex=r"([0-9.]+) tx/s")
                mix = f"PYTHON={py} sh {ROOT / 'bench/workloads/mix_gzip_sort.sh'}"
                colo = await colocation(app, mix, plan_path, client=client, repeats=args.repeats, warmup_s=3.0)
                colo["method"] = args.colocation_method
                (outdir / "colocation.json").write_text(json.dumps(colo, indent=1))
            return res, colo
        finally:
            await client.close()

    res, colo = asyncio.run(run())
    summary = res.summary()
    by_trace: dict = {}
    for r in res.runs:
        by_trace.setdefault(r["trace"], {})[r["method"]] = r.get("mean_dtw")
    out = {"dtw_mean": {m: v["all"]["MEAN"] for m, v in summary.items()},
           "dtw_by_level": {m: {lv: d["MEAN"] for lv, d in v.items() if lv != "all"} for m, v in summary.items()},
           "dtw_by_trace": by_trace, "simulated": res.meta.get("simulated"),
           "errors": [f"{r['trace']}/{r['method']}: {r['error']}" for r in res.runs if r.get("error")],
           "loadavg_before": [round(x, 2) for x in load_before], "loadavg_after": [round(x, 2) for x in os.getloadavg()]}
    if colo:
        out["colocation"] = {k: colo[k] for k in ("app", "mix", "method", "degradation_mix_pct", "degradation_plan_pct",
                                                  "difference_pp")}
    print(json.dumps(out, sort_keys=True))


if __name__ == "__main__":
    main()
