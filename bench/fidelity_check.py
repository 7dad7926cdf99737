"""Issue 12's must-show, read off a bench/fidelity_real.py result:

    python bench/fidelity_check.py bench/results/fidelity/30min/fidelity.json

per method the mean DTW, per-core CPU and added activity; for each forward-model planner its
ratio to the single-stressor baseline, per-core CPU against twice the noise floor, the metrics
where it is worse than single by more than the floor, and whether it beats nearest and model.
"""
import json, sys
d = json.load(open(sys.argv[1]))
M, F = d["methods"], d["floor"]
print(f"floor mean {F['mean']:.3f} per-core {F['per_core_cpu']:.3f}")
for m in sorted(M, key=lambda k: M[k]["mean"]):
    print(f"  {m:10s} mean {M[m]['mean']:.3f} per-core {M[m]['per_core_cpu']:.3f} added/run {M[m]['added_activity_per_run']:.1f} by_mix " +
          " ".join(f"{k}={v:.3f}" for k, v in M[m]["by_mix"].items()))
s = M["single"]
for best in ("inverse", "select"):
    if best not in M: continue
    b = M[best]
    print(f"{best}: mean/single = {b['mean']/s['mean']:.2f} (<=0.5?), per-core {b['per_core_cpu']:.3f} vs 2xfloor {2*F['per_core_cpu']:.3f}")
    worse = [(k, b['per_metric'][k], s['per_metric'].get(k), F['per_metric'].get(k, 0)) for k in b['per_metric']
             if s['per_metric'].get(k) is not None and b['per_metric'][k] > s['per_metric'][k] + F['per_metric'].get(k, 0)]
    print(f"  metrics worse than single by > floor: {len(worse)}")
    for k, x, y, f in worse: print(f"    {k}: {x:.3f} vs single {y:.3f} (floor {f:.3f})")
    for other in ("nearest", "model"):
        if other in M: print(f"  beats {other}? {b['mean'] < M[other]['mean']} ({b['mean']:.3f} vs {M[other]['mean']:.3f})")
# Issue 25's must-show, on the target's own scale (controller/evaluate/own_scale.py)
O = d.get("own_scale")
if O:
    OM, OF = O["methods"], O["floor"]
    print(f"own scale (CPU, disk, loopback; the target's own peak): floor resource mean {OF['resource_mean']:.3f} "
          f"per-core {OF['per_core_cpu']:.3f}, idle windows with activity added by the same mix again "
          f"{OF.get('idle_windows_added', '-')} (the host's own background)")
    for m in sorted(OM, key=lambda k: OM[k]["resource_mean"] if OM[k]["resource_mean"] is not None else 9):
        o = OM[m]
        print(f"  {m:10s} resource mean {o['resource_mean']:.3f} per-core {o['per_core_cpu']:.3f} "
              f"idle windows with added activity {o['idle_windows_added']} (max share {o['max_added_share']}) by_mix " +
              " ".join(f"{k}={v['per_core_cpu']:.3f}/{v['resource_mean']:.3f}" for k, v in o["by_mix"].items()))
    if "single" in OM:
        s = OM["single"]
        for best in ("inverse", "select"):
            if best not in OM: continue
            b = OM[best]
            print(f"{best}: resource mean/single = {b['resource_mean']/s['resource_mean']:.2f} (<=0.5?), per-core "
                  f"{b['per_core_cpu']:.3f} vs single {s['per_core_cpu']:.3f} (<=?), idle windows with added activity "
                  f"{sum(b['idle_windows_added'].values())}, of them where the plan drove that resource "
                  f"{sum(b.get('idle_windows_added_by_plan', {}).values()) if 'idle_windows_added_by_plan' in b else '-'} (0?)")
    spread, diff = O.get("replay_spread"), O.get("inverse_minus_single")
    if spread:
        print("each plan's replays against each other (the least difference these replays can tell): " +
              ", ".join(f"{m} per-core {v['per_core_cpu']:.4f} resource mean {v['resource_mean']:.3f}"
                        for m, v in sorted(spread.items()) if v["per_core_cpu"] is not None))
    if diff:
        se = diff["standard_error"]
        print(f"per-core CPU, inverse − single: {diff['mean']:+.4f}" + (f" ± {se:.4f} (standard error over mixes)" if se else "")
              + " by_mix " + " ".join(f"{k}={v:+.4f}" for k, v in diff["by_mix"].items()))
