#!/bin/sh
# A real neighbour mix for colocation: gzip compressing a 96 MiB file over and over (CPU and
# page-cache/disk reads) next to a Python process sorting 2 M-element lists (CPU and memory).
# Runs until killed; the process group is killed by `mimesys evaluate colocation`.
set -e
dir=$(mktemp -d /tmp/mix_gzip_sort.XXXXXX)
trap 'rm -rf "$dir"' EXIT INT TERM
PY=${PYTHON:-python3}
"$PY" -c "import os,sys; r=os.urandom(1<<20); t=bytes(range(256))*4096; f=open(sys.argv[1],'wb'); [f.write(r if i%3==0 else t) for i in range(96)]" "$dir/data"
( while :; do gzip -1 -c "$dir/data" > "$dir/data.gz"; sync "$dir/data.gz" 2>/dev/null || sync; done ) &
"$PY" -c "
import random, time
rng = random.Random(7)
while True:
    xs = [rng.random() for _ in range(2_000_000)]
    xs.sort()
    time.sleep(0.5)
" &
wait
