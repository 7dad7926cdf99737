"""Per mix and binary: mean |agent-measured core busy - target| over the held windows of runs/*.json
(single plans are scored against the inverse plan's target: the same target trace)."""
import json, glob, os, sys, numpy as np, collections
RUNS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "runs")
acc = collections.defaultdict(list)
targets = {}
files = sorted(glob.glob(f"{RUNS}/ab2-*-*.json"))
for f in files:
    for p, r in json.load(open(f)).items():
        if r["target"] is not None: targets[p.split("/")[-1].split("__")[0]] = np.array(r["target"], float)
for f in files:
    b = f.split("/")[-1].split("-")[1]; rep = f.split("-")[-1][:-5]
    for p, r in json.load(open(f)).items():
        mix = p.split("/")[-1].split("__")[0]
        cpu = np.array(r["cpu"]); tg = targets[mix]; T = min(len(cpu), len(tg))
        e = (cpu[:T] - tg[:T]); m = ~np.isnan(e)
        acc[(b, mix)].append(np.abs(e[m])); acc[(b, "ALL")].append(np.abs(e[m])); acc[(b, "rep" + rep)].append(np.abs(e[m]))
for k in sorted(acc, key=lambda k: (k[1], k[0])):
    v = np.concatenate(acc[k])
    print("%-12s %-7s n=%4d mean|e| %.4f within1 %.3f clipped %.4f sum-excess %.3f" % (k[1], k[0], len(v), v.mean(), (v < 0.0105).mean(), np.minimum(v, 0.01).mean(), np.maximum(v - 0.01, 0).sum()))
