"""Own-core share of IO stressors: the runner's accounting (calibration cpu_fraction, as now)
vs the profile's own core readings. First-order per-core error on replayed plans."""
import sys, glob, json, numpy as np
sys.path.insert(0, '/work/main')  # a checkout at e4b0595 or later
from mimesys.trace import Trace
from mimesys.plan import Plan
from mimesys.forward.model import load_forward_model
from controller.forward.profile import fit_first_order
from controller.forward.fit import profile_meta, catalog_classes
O = sys.argv[1]
fm = load_forward_model(f'{O}/forward'); base = fm.first
prof = Trace.read(sys.argv[2]); meta = profile_meta(prof, 'p')
classes = meta.get('catalog_classes') or catalog_classes(meta['catalog_names'])
# the fractions the fitted model used are its own[] for stressors with a calibration figure:
# rebuild with (a) the model as fitted, (b) no runner figures for IO classes
cal = {n: float(base.own[i]) for i, n in enumerate(base.catalog_names)}
io = {n for n, c in zip(meta['catalog_names'], classes) if c in ('disk',)}
def first(fr):
    return fit_first_order(prof, meta['catalog_names'], meta['thread_cores'], host_peaks=meta.get('host_peaks'),
                           metric_names=base.metric_names, classes=classes, cpu_fraction=fr, footprint=None)
# the models under O were fitted before e4b0595 (runner shares for every class); fit_first_order
# now takes disk shares from the profile whatever it is given
variants = {"runner accounting (as fitted)": base,
            "profile readings for IO stressors": first({n: v for n, v in cal.items() if n not in io})}
pairs = {}
for d in sorted(glob.glob(f'{O}/eval-rep*')):
    for p in sorted(glob.glob(f'{d}/plans/*.h5')):
        key = p.split('/')[-1][:-3]; meth = key.split('__')[-1]
        a = np.asarray(Plan.read(p).compositions, float); ex = Trace.read(f'{d}/executed/{key}.h5')
        T = min(len(a), ex.T)
        pairs.setdefault(meth, []).append((key, a[:T], ex))
for name, f in variants.items():
    for meth, lst in pairs.items():
        errs, per = [], {}
        for key, a, ex in lst:
            pr = f.predict(a)
            for c in ('cpu.util.core0', 'cpu.util.core1'):
                r = ex.column(c)[:len(a)] - pr[:, f.metric_names.index(c)]
                errs.append(np.abs(r[np.isfinite(r)]))
                per.setdefault(key.split('__')[0], []).append(np.nanmean(np.abs(r)))
        print(f"{name:36s} {meth:8s} mean |err| {np.concatenate(errs).mean():.4f}", {k: round(float(np.mean(v)), 4) for k, v in per.items()})
m = base.catalog_names.index('disk_rand_read_4k')
print("disk_rand_read_4k own:", {k: round(float(v.own[m]), 3) for k, v in variants.items()})
