import glob, sys, numpy as np
sys.path.insert(0, "/work/main")
from mimesys.trace import Trace
for base in sys.argv[1:]:
    print(base)
    for mix in ("burst_serve","db_bulk","kv_compress","net_stream","web_compile"):
        tg = Trace.read(f"/work/s30/rep5/targets/{mix}.h5"); t = np.nanmean(tg.column("mem.used_B"))
        out = [mix, "target %.0f MB" % (t/1e6)]
        for m in ("inverse", "single"):
            v = [np.nanmean(Trace.read(f"{d}/executed/{mix}__{m}.h5").column("mem.used_B")) for d in sorted(glob.glob(base + "/eval-rep?-update"))]
            out.append("%s %.0f MB (%.2fx)" % (m, np.mean(v)/1e6, np.mean(v)/t))
        print("  ", *out)
