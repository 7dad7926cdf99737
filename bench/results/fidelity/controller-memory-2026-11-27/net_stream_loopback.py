import sys, numpy as np
sys.path.insert(0, "/work/main")
from mimesys.plan import Plan
from mimesys.trace import Trace
from mimesys.forward.model import load_forward_model
d = sys.argv[1]; mix = sys.argv[2] if len(sys.argv) > 2 else "net_stream"
p = Plan.read(f"{d}/plans/{mix}__inverse.h5"); ex = Trace.read(f"{d}/executed/{mix}__inverse.h5")
tg = Trace.read(f"/work/s30/rep5/targets/{mix}.h5")
fm = load_forward_model("/work/s30/rep5/30min-fresh/forward")
pred, _ = fm.predict_plan(p.compositions)
j = fm.metric_names.index("net.lo.tx_Bps")
lo = [i for i, n in enumerate(p.catalog_names) if n.startswith("net_")]
for t in range(min(p.T, 60)):
    fr = {p.catalog_names[i]: np.round(p.compositions[t, i], 3).tolist() for i in lo if p.compositions[t, i].sum() > 0}
    print(t, "tgt %7.1f pred %7.1f meas %7.1f MB/s cpu tgt %s" % (tg.column("net.lo.tx_Bps")[t]/1e6, pred[t, j]/1e6, ex.column("net.lo.tx_Bps")[t]/1e6,
          np.round([tg.column("cpu.util.core0")[t], tg.column("cpu.util.core1")[t]], 2)), fr)
