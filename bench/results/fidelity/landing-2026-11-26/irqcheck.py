"""Where does disk/net kernel work land? Replay error per core vs disk/net share per thread."""
import glob, sys, h5py, numpy as np
sys.path.insert(0, '/work/rep25')
from mimesys.forward.model import load_forward_model
from mimesys.plan import Plan
fm = load_forward_model('/work/fid3/out/30min-helper/forward')
first = fm.first
cls = np.array(first.classes)
def vals(p):
    f=h5py.File(p); n=[x.decode() if isinstance(x,bytes) else x for x in f['metric_names'][:]]
    return f['values'][:], n
X, E = [], []
for d in sorted(glob.glob('/work/fid3/out/30min-helper/eval-rep[01]*')):
    if 'combined' in d: continue
    for p in sorted(glob.glob(d + '/plans/*.h5')):
        plan = Plan.read(p); a = np.asarray(plan.compositions, np.float64)
        v, n = vals(p.replace('/plans/', '/executed/'))
        pred = first.predict(a)
        e = np.stack([v[:, n.index(c)] - pred[:, first.metric_names.index(c)] for c in ('cpu.util.core0','cpu.util.core1')], 1)
        feats = []
        for c in ('disk', 'network'):
            sel = cls == c
            feats += [a[:, sel, 0].sum(1), a[:, sel, 1].sum(1)]
        X.append(np.stack(feats, 1)); E.append(e)
X = np.concatenate(X); E = np.concatenate(E)
A = np.c_[X, np.ones(len(X))]
print("windows", len(X), "features: disk_t0 disk_t1 net_t0 net_t1 const")
for j in range(2):
    coef, *_ = np.linalg.lstsq(A, E[:, j], rcond=None)
    print(f"core{j} err(meas-pred) coef", np.round(coef, 4))
for lab, sel in (("disk on t0 only", (X[:,0]>0.2)&(X[:,1]<0.02)), ("disk on t1 only", (X[:,1]>0.2)&(X[:,0]<0.02)), ("no disk", (X[:,0]+X[:,1])<0.02)):
    print(lab, sel.sum(), "mean err core0 %.4f core1 %.4f" % tuple(E[sel].mean(0)), "|err| %.4f %.4f" % tuple(np.abs(E[sel]).mean(0)))
