"""First-order per-core error on the 30-minute campaign's real replays (plans + executed traces
of inverse and single, two sessions): the old model's first order (solo on thread 0 only,
spill to 'other cores') vs the same fitted from a profile with the thread-1 step (fixed +
other). Same own-core shares (the old model's, i.e. the calibration's) in both."""
import glob, json, sys, h5py, numpy as np
sys.path.insert(0, '/work/rep25')
from mimesys.forward.model import load_forward_model
from mimesys.forward.firstorder import FirstOrder
from mimesys.plan import Plan
from mimesys.trace import Trace
from controller.forward.profile import fit_first_order, windows_of
old = load_forward_model('/work/fid3/out/30min-helper/forward').first
prof = Trace.read('/work/fid3/t1/profile-t1.h5')
meta = prof.provenance
frac = {n: float(old.own[m]) for m, n in enumerate(old.catalog_names)}
new = fit_first_order(prof, meta['catalog_names'], meta['thread_cores'], metric_names=old.metric_names,
                      classes=old.classes, cpu_fraction=frac)
# the same new profile read the old way: no fixed part, spill = solo on thread 0's other core
rows = windows_of(len(old.catalog_names), meta['layout'])
v = prof.select(old.metric_names).astype(float)
idle = np.nanmedian(v[rows['idle']], 0)
c1 = old.metric_names.index('cpu.util.core1')
oth = np.clip(np.nan_to_num(v[rows['solo'], c1]) - idle[c1], 0, 1)
oth[np.array([c in ('cpu', 'cache', 'memory') for c in old.classes])] = 0
d = new.to_dict(); d['core_fixed'] = None; d['other'] = oth.tolist()
new_old_way = FirstOrder.from_dict(d)
cls = np.array(old.classes)
print("fixed share on core1 (disk/network stressors):")
for m, n in enumerate(new.catalog_names):
    if cls[m] in ('disk', 'network'):
        print(f"  {n:40s} own {new.own[m]:.3f} fixed c0 {new.fixed[m, old.metric_names.index('cpu.util.core0')]:.3f} "
              f"c1 {new.fixed[m, c1]:.3f} other {new.other[m]:.3f} | old other {old.other[m]:.3f}")
def vals(p):
    f = h5py.File(p); n = [x.decode() if isinstance(x, bytes) else x for x in f['metric_names'][:]]
    return f['values'][:], n
res = {k: [] for k in ('old model', 'new profile, old way', 'new profile, fixed+other')}
per = {}
for dd in sorted(glob.glob('/work/fid3/out/30min-helper/eval-rep[01]*')):
    if 'combined' in dd: continue
    for p in sorted(glob.glob(dd + '/plans/*.h5')):
        a = np.asarray(Plan.read(p).compositions, np.float64)
        ex, n = vals(p.replace('/plans/', '/executed/'))
        key = p.split('/')[-1][:-3]
        for lab, fo in (('old model', old), ('new profile, old way', new_old_way), ('new profile, fixed+other', new)):
            pr = fo.predict(a)
            e = np.concatenate([np.abs(ex[:, n.index(c)] - pr[:, fo.metric_names.index(c)]) for c in ('cpu.util.core0', 'cpu.util.core1')])
            res[lab].append(e); per.setdefault(key, {}).setdefault(lab, []).append(e.mean())
out = {lab: round(float(np.concatenate(e).mean()), 4) for lab, e in res.items()}
print(json.dumps(out))
for k, r in per.items():
    print(f"{k:28s}", "  ".join(f"{np.mean(x):.4f}" for x in r.values()))
json.dump({"mean_abs_core_error": out, "per_plan": {k: {l: round(float(np.mean(x)), 4) for l, x in r.items()} for k, r in per.items()},
           "fixed": {n: [round(float(x), 4) for x in new.fixed[m, [old.metric_names.index('cpu.util.core0'), c1]]] for m, n in enumerate(new.catalog_names) if new.fixed[m].any()},
           "other_new": {n: round(float(new.other[m]), 4) for m, n in enumerate(new.catalog_names) if cls[m] in ('disk','network')},
           "other_old": {n: round(float(old.other[m]), 4) for m, n in enumerate(new.catalog_names) if cls[m] in ('disk','network')}},
          open('/work/fid3/t1/landing_eval.json', 'w'), indent=1)
