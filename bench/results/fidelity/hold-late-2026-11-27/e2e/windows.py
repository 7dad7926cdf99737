import sys, glob, numpy as np, h5py, collections
sys.path.insert(0, "/work/main")
from mimesys.plan import Plan
acc = collections.defaultdict(list)
def cpu_of(ex):
    f = h5py.File(ex); names = [n.decode() if isinstance(n, bytes) else n for n in f["metric_names"][:]]
    v = f["values"][:]; return v[:, [names.index("cpu.util.core0"), names.index("cpu.util.core1")]]
suffix = sys.argv[1] if len(sys.argv) > 1 else "update"
for base in ["/work/s30/heldout/30min-fresh", "/work/s30/rep5/30min-fresh"]:
    for d in sorted(glob.glob(base + f"/eval-rep?-{suffix}")):
        for ex in sorted(glob.glob(d + "/executed/*__inverse.h5")):
            mix = ex.split("/")[-1].split("__")[0]
            tg = Plan.read(d + "/plans/" + ex.split("/")[-1]).core_busy_target
            inv = cpu_of(ex); sg = cpu_of(ex.replace("__inverse", "__single"))
            T = min(len(inv), len(tg), len(sg)); m = ~np.isnan(tg[:T])
            ei = np.abs(inv[:T] - tg[:T])[m]; es = np.abs(sg[:T] - tg[:T])[m]
            for k in (mix, "ALL"):
                acc[(k, "inverse")].append(ei); acc[(k, "single")].append(es)
for k in sorted(acc):
    v = np.concatenate(acc[k])
    print("%-12s %-8s n=%4d mean|e| %.4f within1 %.3f clipped %.4f  sum-excess %.3f" % (k[0], k[1], len(v), v.mean(), (v < 0.0105).mean(), np.minimum(v, 0.01).mean(), np.maximum(v - 0.01, 0).sum()))
