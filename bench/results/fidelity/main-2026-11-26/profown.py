import sys, numpy as np
sys.path.insert(0, '/work/s26/e2e/wt')
from mimesys.trace import Trace
from controller.forward.profile import windows_of
from controller.forward.fit import profile_meta
tr = Trace.read('/work/s26/e2e/out/profile.h5'); meta = profile_meta(tr, 'p')
M = len(meta['catalog_names']); rows = windows_of(M, tr.provenance.get('layout'))
print(meta.get('cpu_fraction', {}).get('disk_rand_read_4k'), 'profile meta cpu_fraction')
v = tr.select(['cpu.util.core0', 'cpu.util.core1'])
idle = np.nanmedian(v[rows['idle']], 0)
for nm in ('disk_rand_read_4k', 'disk_rand_read_4k_qd64', 'disk_seq_read_direct', 'disk_seq_write_fdatasync'):
    m = meta['catalog_names'].index(nm)
    print(nm, 'solo t0', np.round(v[rows['solo'][m]] - idle, 3), 'solo t1', np.round(v[rows['solo1'][m]] - idle, 3) if rows['solo1'] else None)
