import sys, numpy as np, os
sys.path.insert(0,'/work/main'); sys.path.insert(0,'/work/main/bench')
from hold import run
from mimesys.catalog import load_catalog
from mimesys.plan import Plan
from pathlib import Path
cat=load_catalog('/work/main/stressors/catalog.toml')
blocks=[{'cpu_simd_dist_256':.6},{'cpu_simd_dist_256':.3,'cpu_int_crc32':.3},
        {'cpu_simd_dist_256':.15,'cpu_int_crc32':.15,'cpu_zstd_compress':.15,'cpu_fp_poly':.15},
        {'cpu_simd_dist_256':.3,'net_tcp_rpc_128':.3},{'cpu_simd_dist_256':.3,'sched_futex_pingpong':.3},
        {'cpu_simd_dist_256':.55,'net_tcp_rpc_128':.02,'sched_futex_pingpong':.02,'net_udp_sink':.01}]
B=int(os.environ.get('B','10'))
a=np.zeros((B*len(blocks),len(cat),2),np.float32)
for i,bl in enumerate(blocks):
    for n,f in bl.items(): a[i*B:(i+1)*B, cat.index(n), :]=f
p=Plan.from_catalog(a,cat,window_s=1.0,seed=0)
b=run(os.environ.get('RUNNER','/work/main/stressors/build/mimesys-runner'), p, cat, [0,1], Path('/var/tmp'))
for i,bl in enumerate(blocks):
    x=b[i*B+1:(i+1)*B]-sum(bl.values())
    print(f"{'+'.join(k.split('_',1)[1][:8]+str(v) for k,v in bl.items()):60s} bias {x.mean(0).round(4)} abs {np.abs(x).mean(0).round(4)}")
