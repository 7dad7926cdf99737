import sys, numpy as np
sys.path.insert(0, '/work/s26/e2e/wt')
from mimesys.forward.model import load_forward_model
from mimesys.plan import Plan
from mimesys.trace import Trace
O = '/work/s26/e2e/out'; import os; L=os.environ.get('L','30min-disk')
fm = load_forward_model(f'{O}/{L}/forward')
for mix in ['burst_serve','kv_compress','db_bulk','net_stream','web_compile']:
  tgt = Trace.read(f'{O}/targets/{mix}.h5')
  for rep in (0, 1):
    d = f'{O}/{L}/eval-rep{rep}'
    for meth in ('inverse','single'):
      plan = Plan.read(f'{d}/plans/{mix}__{meth}.h5'); a = np.asarray(plan.compositions, float)
      ex = Trace.read(f'{d}/executed/{mix}__{meth}.h5')
      pf = fm.predict_plan(a, first_order_only=True)[0]
      pc = fm.predict_plan(a)[0]
      T = min(len(a), ex.T, tgt.T)
      s=[]
      for c in ('cpu.util.core0','cpu.util.core1'):
        n = fm.metric_names.index(c)
        t, e = tgt.column(c)[:T], ex.column(c)[:T]
        s.append(f"{c[-5:]} |pc-e| {np.nanmean(np.abs(pc[:T,n]-e)):.4f} |t-e| {np.nanmean(np.abs(t-e)):.4f} |t-pf| {np.nanmean(np.abs(t-pf[:T,n])):.4f} |pf-e| {np.nanmean(np.abs(pf[:T,n]-e)):.4f} bias(e-t) {np.nanmean(e-t):+.4f}")
      print(mix, rep, meth, ' | '.join(s))
