#!/bin/bash
# A paced sender against the kernel's CPU accounting (issue 25; run on the development VM).
# iperf3 over loopback at RATE (default 2G; 0 = unpaced) for 10 s. Per core over the same 10 s:
#   tick-busy   user + nice + system + irq + softirq of /proc/stat (charged by sampling each tick)
#   wall-idle   wall time − idle − iowait − steal (idle is accounted by the idle loop itself)
# and the ground truth: the iperf3 threads' run time from /proc/PID/task/TID/schedstat (ns).
# usage: RATE=2G ./paced_loopback.sh
set -eu
PORT=${PORT:-5998}
iperf3 -s -B 127.0.0.1 -p $PORT >/dev/null 2>&1 & S=$!
sleep 0.5
iperf3 -c 127.0.0.1 -p $PORT -t 12 -b ${RATE:-2G} >/dev/null 2>&1 & C=$!
sleep 1
snap() { awk '/^cpu[0-9]/{print $1, $2+$3+$4+$7+$8, $5, $6, $9}' /proc/stat; }
runtime() { local s=0; for p in $S $C; do for t in /proc/$p/task/*; do s=$((s + $(cut -d' ' -f1 $t/schedstat))); done; done; echo $s; }
a=$(snap); r0=$(runtime); t0=$(date +%s%N)
sleep 10
t1=$(date +%s%N); b=$(snap); r1=$(runtime)
hz=$(getconf CLK_TCK); wall=$(( (t1 - t0) / 1000000 ))
echo "rate ${RATE:-2G}: wall $wall ms; iperf3 threads ran $(( (r1 - r0) / 1000000 )) ms (schedstat)"
paste <(echo "$a") <(echo "$b") | awk -v w=$wall -v hz=$hz \
  '{printf "  %s tick-busy %5d ms   wall-idle %5d ms\n", $1, ($7-$2)*1000/hz, w-(($8-$3)+($9-$4)+($10-$5))*1000/hz}'
wait $C; kill $S
