"""Per-process storage IO each second (/proc/PID/io read_bytes/write_bytes) + diskstats totals:
attributes the replays' small reads/writes to whoever caused them. JSON lines on stdout."""
import json, os, sys, time
def snap():
    out = {}
    for pid in os.listdir('/proc'):
        if not pid.isdigit(): continue
        try:
            with open(f'/proc/{pid}/io') as f:
                d = dict(l.split(': ') for l in f.read().split('\n') if l)
            with open(f'/proc/{pid}/comm') as f:
                comm = f.read().strip()
            out[int(pid)] = (comm, int(d['read_bytes']), int(d['write_bytes']))
        except (OSError, KeyError, ValueError):
            pass
    return out
def disk():
    r = w = 0
    for l in open('/proc/diskstats'):
        p = l.split()
        if p[2].startswith(('loop', 'ram', 'dm-')) or p[2][-1].isdigit() and not p[2].startswith('nvme'): continue
        r += int(p[5]) * 512; w += int(p[9]) * 512
    return r, w
prev, pd = snap(), disk()
while True:
    time.sleep(1.0 - (time.time() % 1.0))
    cur, cd = snap(), disk()
    procs = []
    for pid, (comm, rb, wb) in cur.items():
        if pid in prev:
            dr, dw = rb - prev[pid][1], wb - prev[pid][2]
            if dr or dw: procs.append([pid, comm, dr, dw])
    print(json.dumps({'t': round(time.time(), 3), 'disk_r': cd[0] - pd[0], 'disk_w': cd[1] - pd[1], 'procs': procs}), flush=True)
    prev, pd = cur, cd
