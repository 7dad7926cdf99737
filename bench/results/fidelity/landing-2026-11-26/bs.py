import sys, h5py, numpy as np, glob
sys.path.insert(0, '/work/rep25')
from mimesys.forward.model import load_forward_model
from mimesys.plan import Plan
from mimesys.trace import Trace
fm = load_forward_model('/work/fid3/out-t1/30min-t1/forward'); first = fm.first
tgt = Trace.read('/work/fid3/out-t1/targets/burst_serve.h5')
for mix in sys.argv[1:]:
  tgt = Trace.read(f'/work/fid3/out-t1/targets/{mix}.h5')
  for rep in (0, 1):
    d = f'/work/fid3/out-t1/30min-t1/eval-rep{rep}'
    for meth in ('inverse', 'single'):
        plan = Plan.read(f'{d}/plans/{mix}__{meth}.h5'); a = np.asarray(plan.compositions, float)
        ex = Trace.read(f'{d}/executed/{mix}__{meth}.h5')
        pr = first.predict(a)
        for c in ('cpu.util.core0', 'cpu.util.core1'):
            t = tgt.column(c)[:len(a)]; e = ex.column(c)[:len(a)]; p = pr[:, first.metric_names.index(c)]
            print(mix, rep, meth, c, "tgt-exec %.4f  pred-exec %.4f  tgt-pred %.4f  bias(exec-tgt) %+.4f" % (np.nanmean(np.abs(t-e)), np.nanmean(np.abs(p-e)), np.nanmean(np.abs(t-p)), np.nanmean(e-t)))
