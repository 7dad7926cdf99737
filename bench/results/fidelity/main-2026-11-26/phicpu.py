"""Does scaling an IO stressor's CPU (own/other/fixed) by its device group's contention factor
φ (the factor its IO rate gets) predict per-core CPU better on the replays?"""
import sys, glob, numpy as np
sys.path.insert(0, '/work/s26/e2e/wt')
from mimesys.forward.model import load_forward_model
from mimesys.forward.firstorder import SATURATION_P
from mimesys.plan import Plan
from mimesys.trace import Trace
from controller.dataset import Dataset
O = sys.argv[1] if len(sys.argv) > 1 else '/work/s26/e2e/out/30min-main'
fm = load_forward_model(f'{O}/forward'); f = fm.first
print("groups", list(f.groups), "usage>0 counts", (f.usage > 0).sum(0))
io = np.array([c in ('disk', 'network') for c in f.classes])
def predict_phi(a, p=SATURATION_P):
    L = f.group_load(a)
    phi_g = (1.0 + np.power(np.clip(L, 0, None), p)) ** (-1.0 / p)       # [B, G]
    # each stressor's factor: that of the group it loads most (1 for compute)
    g_of = np.argmax(f.usage, axis=1); has = f.usage.max(axis=1) > 0
    phi_m = np.where((io & has)[None], phi_g[:, g_of], 1.0)               # [B, M]
    x = f.predict(a)
    cores = np.asarray(f.thread_cores)
    own = np.einsum("bmk,m,bm->bk", a, f.own, phi_m)
    spill = np.einsum("bmk,m,bm->bk", a, f.other, phi_m)
    for n, j in f.core_metrics:
        on = cores == j
        u = np.clip(own[:, on].sum(axis=1), 0.0, 1.0)
        s = np.clip(spill[:, ~on].sum(axis=1) + np.einsum("bmk,m,bm->b", a, f.fixed[:, n], phi_m), 0.0, 1.0)
        x[:, n] = 1.0 - (1.0 - f.idle[n]) * (1.0 - u) * (1.0 - s)
    return x, phi_g
def err(pairs, fn):
    out = []
    for a, obs, names in pairs:
        x = fn(a)
        for c in ('cpu.util.core0', 'cpu.util.core1'):
            r = obs[:, names.index(c)] - x[:, f.metric_names.index(c)]
            out.append(r[np.isfinite(r)])
    r = np.concatenate(out); return np.abs(r).mean(), r.mean()
for meth in ('inverse', 'single'):
    pairs = []
    for d in sorted(glob.glob(f'{O}/eval-rep*')):
        for p in sorted(glob.glob(f'{d}/plans/*{meth}.h5')):
            key = p.split('/')[-1][:-3]
            a = np.asarray(Plan.read(p).compositions, float); ex = Trace.read(f'{d}/executed/{key}.h5')
            T = min(len(a), ex.T)
            pairs.append((a[:T], np.stack([ex.column(n)[:T] for n in ex.names], 1), ex.names))
    print(meth, "first order  |err| %.4f bias %+.4f" % err(pairs, f.predict), " φ on IO CPU |err| %.4f bias %+.4f" % err(pairs, lambda a: predict_phi(a)[0]))
    phis = np.concatenate([predict_phi(a)[1] for a, _, _ in pairs]); print("  φ per group min/median", phis.min(0).round(3), np.median(phis, 0).round(3))
ds = Dataset.read(f'{O}/dataset.h5')
pairs = [(ds.action.astype(float), ds.obs.astype(float), ds.names)]
print("campaign first order |err| %.4f bias %+.4f" % err(pairs, f.predict), " φ: |err| %.4f bias %+.4f" % err(pairs, lambda a: predict_phi(a)[0]))
