import asyncio, json, numpy as np
from mimesys.catalog import load_catalog
from mimesys.plan import Plan
from agentd.runner import RunnerConfig, run_to_completion
cat = load_catalog('/work/fid3/wiops/catalog.toml')
names = ['disk_rand_write_4k_qd64', 'lab_rand_write_4k_qd64_256m', 'lab_rand_write_4k_qd64_512m']
T = 36; a = np.zeros((T, len(cat.names), 2), np.float32)
for t in range(T):
    a[t, cat.index(names[(t + t // 3) % 3]), :] = 1.0     # rotate the order
plan = Plan.from_catalog(a, cat, window_s=0.5)
rec = asyncio.run(run_to_completion(plan, RunnerConfig(cpus=(0, 1), catalog_path='/work/fid3/wiops/catalog.toml', scratch_dir='/var/tmp', scratch_budget_bytes=2 << 30)))
res = {n: [] for n in names}
for w in rec.windows:
    for n in names:
        m = cat.index(n)
        if w.ran_ns[m].sum() > 0:
            res[n].append(float(w.ops[m].sum() / (w.ran_ns[m].max() / 1e9)))
out = {n: {"iops_median": float(np.median(v)), "iops_all": [round(x) for x in v]} for n, v in res.items()}
print(json.dumps(out))
