import sys, numpy as np
sys.path.insert(0, '/work/main')
from mimesys.trace import Trace
from mimesys.forward.model import load_forward_model
from controller.forward.profile import fit_first_order
from controller.forward.fit import profile_meta, catalog_classes
from controller.dataset import Dataset
O, P = sys.argv[1], sys.argv[2]
base = load_forward_model(f'{O}/forward').first
prof = Trace.read(P); meta = profile_meta(prof, 'p')
classes = meta.get('catalog_classes') or catalog_classes(meta['catalog_names'])
cal = {n: float(base.own[i]) for i, n in enumerate(base.catalog_names)}
new = fit_first_order(prof, meta['catalog_names'], meta['thread_cores'], metric_names=base.metric_names, classes=classes, cpu_fraction=cal)
ds = Dataset.read(f'{O}/dataset.h5'); a = ds.action.astype(float)
for tag, f in (("runner accounting for disk", base), ("profile share for disk", new)):
    e = []
    for c in ('cpu.util.core0', 'cpu.util.core1'):
        r = ds.obs[:, ds.names.index(c)] - f.predict(a)[:, f.metric_names.index(c)]
        e.append(np.abs(r[np.isfinite(r)]))
    e = np.concatenate(e); print(f"{tag:28s} campaign samples per-core mean |err| {e.mean():.4f} median {np.median(e):.4f}")
