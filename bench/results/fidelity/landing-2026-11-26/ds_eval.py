"""First-order per-core error on the 30-minute campaign's samples (520 compositions measured
on this host; no first order is fitted on them): old model vs the thread-1 profile read the
old way vs fixed + other."""
import sys, json, numpy as np
sys.path.insert(0, '/work/rep25'); sys.path.insert(0, '/work/fid3/t1')
from controller.dataset import Dataset
import importlib.util
spec = importlib.util.spec_from_file_location('le', '/work/fid3/t1/landing_eval.py')
src = open('/work/fid3/t1/landing_eval.py').read().split("def vals(p):")[0]
ns = {}; exec(src, ns)
ds = Dataset.read('/work/fid3/out/30min-helper/dataset.h5')
names = ds.names
a = np.asarray(ds.action, float); o = np.asarray(ds.obs, float)
print(a.shape, o.shape)
out = {}
for lab, fo in (('old model', ns['old']), ('new profile, old way', ns['new_old_way']), ('new profile, fixed+other', ns['new'])):
    pr = fo.predict(a)
    errs = []
    for c in ('cpu.util.core0', 'cpu.util.core1'):
        i = names.index(c); j = fo.metric_names.index(c)
        errs.append(np.abs(pr[:, j] - o[:, i]))
    e = np.concatenate(errs); out[lab] = {"mean_abs": round(float(np.nanmean(e)), 4), "median_abs": round(float(np.nanmedian(e)), 4)}
print(json.dumps(out))
json.dump(out, open('/work/fid3/t1/ds_eval.json', 'w'))
