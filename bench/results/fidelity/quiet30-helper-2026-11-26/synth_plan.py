import sys, numpy as np
from mimesys.catalog import load_catalog
from mimesys.plan import Plan
cat = load_catalog(); M = len(cat.names)
rows = []
def w(**kw):
    a = np.zeros((M, 2), np.float32)
    for k, v in kw.items():
        name, t = k.rsplit('_t', 1); a[cat.names.index(name), int(t)] = v
    rows.append(a)
for _ in range(4): w(sched_futex_pingpong_t0=1.0)
for _ in range(4): w(sched_futex_pingpong_t0=0.5)
for _ in range(4): w(sched_futex_pingpong_t0=0.5, cpu_fp_poly_t1=1.0)
for _ in range(4): w(cpu_contend_2x_t0=1.0)
for _ in range(4): w(cpu_contend_2x_t0=0.5)
for _ in range(4): w(disk_rand_read_4k_qd64_t0=0.7, cpu_fp_poly_t1=1.0)
for _ in range(4): w(disk_rand_read_4k_qd64_t0=0.7)
for _ in range(2): w()
Plan.from_catalog(np.stack(rows), cat).write(sys.argv[1]) if hasattr(Plan, 'write') else None
