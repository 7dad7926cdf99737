"""Real application mixes for fidelity measurements: real servers and tools from Debian's
packages (redis-server + redis-benchmark, fio, SQLite through Python, zstd, gzip), on
127.0.0.1 only, in timed phases, no mimesys stressor among them.

    python bench/workloads/mixes.py NAME [--seconds 60] [--workdir DIR]   runs one mix, then cleans up
    python bench/workloads/mixes.py --list

Each mix is three phases of equal length; a phase runs its commands side by side and kills
them (their whole process group) when the phase ends. Servers a mix needs start before the
first phase on a free loopback port and stop after the last. Scratch files live in a private
directory under --workdir (default /var/tmp), removed at the end.

- kv_compress: a key-value server under small requests, then large pipelined values next to a
  zstd compressor, then snapshots to disk (BGSAVE) under light load.
- db_bulk: SQLite bank transactions with an fsync per commit, then a paced O_DIRECT bulk
  sequential writer (fio) next to in-memory transactions, then analytic scans of the database
  next to gzip.
- burst_serve: bursty serving, 4 s on / 4 s off: random 4 KiB direct reads (fio) and GET
  requests to the key-value server during bursts, nothing between them.
- net_stream: a fixed-rate TCP stream over loopback (iperf3, 2 Gbit/s), then nothing, then a
  slower stream (600 Mbit/s) next to a compressor.
- web_compile: a web server (nginx) under an HTTP load generator (wrk) serving small and 1 MiB
  files, then a C compiler building a source tree over and over, then both at once.

Held out (run only when named; the fidelity bench's --mixes): kinds the planners were not
checked against while they were built.

- pg_oltp: PostgreSQL under pgbench: read-write transactions (a WAL flush per commit), then
  select-only, then bulk loads with checkpoints.
- files_git: tar | xz of a tree, then large buffered writes flushed per file, then git
  committing and packing a copy of the tree.
- sysbench_files: sysbench's file IO benchmark doing random reads and writes with an fsync
  every 64 requests (direct IO), then its CPU benchmark paced at a fixed event rate on one
  thread, then its memory benchmark next to sequential buffered reads.
- sync_cache: an rsync daemon receiving a tree over loopback again and again, then a rate-
  limited rsync of one large file next to checksumming the tree (rsync -c, no transfer),
  then a memcached server under a load generator (memcslap).

Memory (run only when named): applications whose resident memory rises and falls by hundreds
of MiB, for the memory-held measurements (issue 42).

- kv_grow: a key-value server filled with 2 KiB values to ~600 MiB, emptied (FLUSHALL) and
  read from, then filled with 4 KiB values and emptied again and again.
- sort_xz: coreutils sort with a large in-memory buffer over a 200 MiB text file, then gzip
  (little memory), then xz at its highest preset (a 64 MiB dictionary and its match finder).
- pg_sort: PostgreSQL with a large work_mem: select-only pgbench, then in-memory sorts of
  millions of rows, then hash aggregates, each query on a connection of its own.
- sqlite_index: the sqlite3 shell with a 600 MiB page cache building a table of random rows
  and an index over it, then idle, then scanning and grouping it.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
PY = sys.executable
NEEDS = {"redis-server": "redis-server", "redis-benchmark": "redis-tools", "redis-cli": "redis-tools",
         "fio": "fio", "zstd": "zstd", "gzip": "gzip", "iperf3": "iperf3", "nginx": "nginx-light", "wrk": "wrk",
         "gcc": "gcc"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


NEEDS_HELD_OUT = {"pg_ctl": "postgresql", "git": "git", "xz": "xz-utils", "runuser": "util-linux",
                  "sysbench": "sysbench", "rsync": "rsync", "memcached": "memcached", "memcslap": "libmemcached-tools",
                  "sqlite3": "sqlite3"}


def missing_tools(held_out: bool = False) -> list[str]:
    """Debian packages to install for the mixes (empty when everything is there)."""
    needs = {**NEEDS, **(NEEDS_HELD_OUT if held_out else {})}
    return sorted({pkg for tool, pkg in needs.items() if shutil.which(tool) is None})


class MixRun:
    def __init__(self, workdir: Path):
        self.dir = Path(tempfile.mkdtemp(prefix="mimesys-mix-", dir=workdir))
        self.procs: list[subprocess.Popen] = []
        self.port = 0
        self.redis: subprocess.Popen | None = None

    # -- servers -----------------------------------------------------------------------
    def start_redis(self) -> None:
        self.port = free_port()
        self.redis = subprocess.Popen(
            ["redis-server", "--bind", "127.0.0.1", "--port", str(self.port), "--dir", str(self.dir),
             "--save", "", "--appendonly", "no", "--protected-mode", "yes", "--daemonize", "no",
             "--dbfilename", "dump.rdb", "--logfile", str(self.dir / "redis.log")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if subprocess.run(["redis-cli", "-p", str(self.port), "ping"], capture_output=True).stdout.strip() == b"PONG":
                return
            time.sleep(0.1)
        raise RuntimeError("redis-server did not answer within 10 s")

    def redis_fill(self, keys: int, size: int) -> None:
        subprocess.run(["redis-cli", "-p", str(self.port), "DEBUG", "POPULATE", str(keys), "key", str(size)],
                       capture_output=True, check=True)

    # -- phases ------------------------------------------------------------------------
    def phase(self, seconds: float, commands: list[list[str] | str]) -> None:
        procs = [subprocess.Popen(c, shell=isinstance(c, str), cwd=self.dir, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL, start_new_session=True) for c in commands]
        self.procs = procs
        time.sleep(seconds)
        self.kill(procs)

    @staticmethod
    def kill(procs) -> None:
        for p in procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        for p in procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()

    def close(self) -> None:
        self.kill(self.procs)
        if self.redis is not None:
            self.kill([self.redis])
        shutil.rmtree(self.dir, ignore_errors=True)

    def bench(self, *args: str) -> list[str]:
        return ["redis-benchmark", "-p", str(self.port), "-n", "1000000000", "-q", *args]

    def data_file(self, mib: int) -> Path:
        """Semi-compressible data (a third random, two thirds repetitive)."""
        path = self.dir / "data.bin"
        if not path.exists():
            rnd = os.urandom(1 << 20)
            rep = bytes(range(256)) * 4096
            with open(path, "wb") as fh:
                for i in range(mib):
                    fh.write(rnd if i % 3 == 0 else rep)
        return path


def kv_compress(run: MixRun, seconds: float) -> None:
    run.start_redis()
    run.redis_fill(200_000, 512)
    data = run.data_file(64)
    p = seconds / 3
    run.phase(p, [run.bench("-t", "set,get", "-c", "8", "-d", "256")])
    run.phase(p, [run.bench("-t", "get", "-c", "2", "-P", "16", "-d", "8192"),
                  f"while :; do zstd -q -3 -f -c {data} > {run.dir}/data.zst; done"])
    run.phase(p, [f"while :; do redis-cli -p {run.port} BGSAVE >/dev/null; sleep 2; done",
                  run.bench("-t", "get", "-c", "1", "-d", "512")])


def db_bulk(run: MixRun, seconds: float) -> None:
    db = run.dir / "bank.db"
    p = seconds / 3
    run.phase(p, [[PY, str(HERE / "sqlite_bank.py"), "--seconds", str(p + 5), "--db", str(db), "--accounts", "100000"]])
    run.phase(p, [["fio", "--name=bulk", f"--directory={run.dir}", "--rw=write", "--bs=1M", "--direct=1",
                   "--size=1G", "--rate=120m", "--time_based", f"--runtime={int(p) + 5}", "--ioengine=psync"],
                  [PY, str(HERE / "sqlite_bank.py"), "--seconds", str(p + 5), "--memory", "--accounts", "50000"]])
    scan = ("import sqlite3,sys,time\n"
            "c=sqlite3.connect(sys.argv[1])\n"
            "while True:\n"
            "    c.execute('select count(*), sum(balance), avg(balance) from accounts').fetchall()\n"
            "    c.execute('select * from history order by amount desc limit 50').fetchall()\n")
    data = run.data_file(48)
    run.phase(p, [[PY, "-c", scan, str(db)], f"while :; do gzip -1 -c {data} > {run.dir}/data.gz; done"])


def burst_serve(run: MixRun, seconds: float) -> None:
    run.start_redis()
    run.redis_fill(100_000, 1024)
    fio = ["fio", "--name=serve", f"--directory={run.dir}", "--rw=randread", "--bs=4k", "--direct=1",
           "--size=256M", "--iodepth=8", "--ioengine=libaio", "--time_based", "--runtime=600"]
    subprocess.run([*fio[:-2], "--runtime=1", "--rw=write", "--bs=1M", "--iodepth=1"], cwd=run.dir,
                   capture_output=True)   # lay the file out once, before the clock starts
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        on = min(4.0, end - time.monotonic())
        run.phase(on, [fio, run.bench("-t", "get", "-c", "4", "-d", "1024")])
        off = min(4.0, end - time.monotonic())
        if off > 0:
            time.sleep(off)


def net_stream(run: MixRun, seconds: float) -> None:
    port = free_port()
    server = subprocess.Popen(["iperf3", "-s", "-B", "127.0.0.1", "-p", str(port)], cwd=run.dir,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    run.procs = [server]
    try:
        time.sleep(0.5)
        p = seconds / 3
        stream = ["iperf3", "-c", "127.0.0.1", "-p", str(port), "-t", str(int(p) + 5)]
        run.phase(p, [[*stream, "-b", "2G"]])
        time.sleep(p)
        data = run.data_file(32)
        run.phase(p, [[*stream, "-b", "600M"], f"while :; do zstd -q -1 -f -c {data} > /dev/null; done"])
    finally:
        run.kill([server])


NGINX_CONF = """daemon off; worker_processes 1; pid {dir}/nginx.pid; error_log {dir}/error.log;
events {{ worker_connections 256; }}
http {{ access_log off; sendfile on;
  client_body_temp_path {dir}/tmp; proxy_temp_path {dir}/tmp; fastcgi_temp_path {dir}/tmp;
  uwsgi_temp_path {dir}/tmp; scgi_temp_path {dir}/tmp;
  server {{ listen 127.0.0.1:{port}; root {dir}/www; }} }}
"""


def web_compile(run: MixRun, seconds: float) -> None:
    port = free_port()
    (run.dir / "www").mkdir()
    (run.dir / "tmp").mkdir()
    (run.dir / "www" / "index.html").write_text("<html><body>" + "mimesys " * 200 + "</body></html>\n")
    (run.dir / "www" / "big.bin").write_bytes(os.urandom(1 << 20))
    (run.dir / "nginx.conf").write_text(NGINX_CONF.format(dir=run.dir, port=port))
    server = subprocess.Popen(["nginx", "-c", str(run.dir / "nginx.conf"), "-p", str(run.dir)], cwd=run.dir,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    # a source tree to build: the stressors' C sources, copied (a real compiler on real code)
    src = run.dir / "src"
    shutil.copytree(HERE.parents[1] / "stressors", src, ignore=shutil.ignore_patterns("build"))
    build = f"while :; do make -s -C {src} BUILD={run.dir}/build >/dev/null 2>&1; rm -rf {run.dir}/build; done"
    try:
        time.sleep(0.5)
        p = seconds / 3
        url = f"http://127.0.0.1:{port}"
        run.phase(p, [["wrk", "-t", "1", "-c", "8", "-d", f"{int(p) + 5}s", f"{url}/index.html"],
                      ["wrk", "-t", "1", "-c", "2", "-d", f"{int(p) + 5}s", f"{url}/big.bin"]])
        run.phase(p, [build])
        run.phase(p, [build, ["wrk", "-t", "1", "-c", "2", "-d", f"{int(p) + 5}s", f"{url}/index.html"]])
    finally:
        run.kill([server])


PG_BIN = next(iter(sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True)), Path("/usr/bin"))


def start_postgres(run: MixRun, *settings: str) -> tuple[subprocess.Popen, list[str]]:
    """PostgreSQL as the postgres user, its own data directory, 127.0.0.1 only; (server, the
    connection options). settings: extra "name=value" server settings."""
    run.dir.chmod(0o711)                  # the server runs as postgres: it must reach its data directory
    data = run.dir / "pg"
    data.mkdir()
    shutil.chown(data, "postgres", "postgres")
    as_pg = ["runuser", "-u", "postgres", "--"]
    subprocess.run([*as_pg, str(PG_BIN / "initdb"), "-D", str(data), "--auth=trust", "-U", "postgres", "--no-sync"],
                   capture_output=True, check=True)
    port = free_port()
    extra = [arg for kv in settings for arg in ("-c", kv)]
    server = subprocess.Popen([*as_pg, str(PG_BIN / "postgres"), "-D", str(data), "-p", str(port), "-k", str(data),
                               "-c", "listen_addresses=127.0.0.1", "-c", "shared_buffers=64MB",
                               "-c", "max_wal_size=256MB", *extra],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    run.procs = [server]
    conn = ["-h", "127.0.0.1", "-p", str(port), "-U", "postgres"]
    deadline = time.monotonic() + 30
    while subprocess.run([str(PG_BIN / "pg_isready"), *conn], capture_output=True).returncode != 0:
        if time.monotonic() > deadline or server.poll() is not None:
            run.kill([server])
            raise RuntimeError("postgres did not answer within 30 s")
        time.sleep(0.2)
    return server, conn


def pg_oltp(run: MixRun, seconds: float) -> None:
    """PostgreSQL (as the postgres user, its own data directory, 127.0.0.1 only) under pgbench."""
    server, conn = start_postgres(run)
    try:
        subprocess.run([str(PG_BIN / "pgbench"), *conn, "-i", "-q", "-s", "8", "postgres"], capture_output=True,
                       check=True)         # the tables, before the clock starts
        p = seconds / 3
        bench = [str(PG_BIN / "pgbench"), *conn, "-T", str(int(p) + 5)]
        bulk = (f"while :; do {PG_BIN / 'psql'} {' '.join(conn)} -q -c 'drop table if exists bulk' "
                "-c 'create table bulk as select g, md5(g::text) as h from generate_series(1, 400000) g' "
                "-c 'checkpoint' postgres >/dev/null; done")
        run.phase(p, [[*bench, "-c", "4", "-j", "2", "postgres"]])          # read-write: a WAL flush per commit
        run.phase(p, [[*bench, "-S", "-c", "8", "-j", "2", "postgres"]])    # select-only, from shared buffers
        run.phase(p, [bulk])                                                     # bulk load and checkpoints
    finally:
        run.kill([server])


def files_git(run: MixRun, seconds: float) -> None:
    """Buffered file work: tar | xz of a tree (compute reading the page cache), large buffered
    writes flushed at the end of each file (dd conv=fdatasync), then git committing and packing
    a copy of the tree."""
    tree = run.dir / "tree"
    # a tree of real files: Debian 12's Python standard library (54 MB, what the results in
    # bench/results/fidelity/heldout-2026-11-27 ran on), or elsewhere this Python's
    src = Path("/usr/lib/python3.11")
    src = src if src.is_dir() else Path(shutil.__file__).parent
    shutil.copytree(src, tree, symlinks=True, ignore=shutil.ignore_patterns("__pycache__", "site-packages"))
    p = seconds / 3
    git = "git -c user.email=mix@localhost -c user.name=mix"
    run.phase(p, [f"while :; do tar cf - -C {tree} . | xz -1 -T1 > {run.dir}/tree.tar.xz; done"])
    run.phase(p, [f"while :; do dd if=/dev/urandom of={run.dir}/big.bin bs=1M count=256 conv=fdatasync "
                  f"status=none; rm -f {run.dir}/big.bin; sleep 1; done"])
    run.phase(p, [f"while :; do rm -rf {run.dir}/repo && cp -r {tree} {run.dir}/repo && cd {run.dir}/repo && "
                  f"git init -q && git add -A && {git} commit -qm tree && git gc -q; cd {run.dir}; done"])


def sysbench_files(run: MixRun, seconds: float) -> None:
    """sysbench (fileio, cpu, memory): an IO benchmark with its own fsync pattern, a CPU load
    paced by event rate rather than by duty cycle, and memory traffic."""
    files = ["--file-num=4", "--file-total-size=512M"]
    subprocess.run(["sysbench", "fileio", *files, "prepare"], cwd=run.dir, capture_output=True, check=True)
    p = seconds / 3
    t = str(int(p) + 5)
    run.phase(p, [["sysbench", "fileio", *files, "--file-test-mode=rndrw", "--file-extra-flags=direct",
                   "--file-fsync-freq=64", "--threads=2", f"--time={t}", "run"]])
    run.phase(p, [["sysbench", "cpu", "--threads=1", "--rate=600", f"--time={t}", "run"]])
    run.phase(p, [["sysbench", "memory", "--threads=1", "--memory-total-size=1000T", "--memory-block-size=1M",
                   f"--time={t}", "run"],
                  ["sysbench", "fileio", *files, "--file-test-mode=seqrd", "--threads=1", f"--time={t}", "run"]])


RSYNCD_CONF = """pid file = {dir}/rsyncd.pid
use chroot = no
[dst]
  path = {dir}/dst
  read only = no
  uid = root
  gid = root
"""


def sync_cache(run: MixRun, seconds: float) -> None:
    """rsync over loopback (a daemon, a real protocol with checksums), then memcached."""
    port = free_port()
    tree = run.dir / "tree"
    src = Path("/usr/lib/python3.11")
    src = src if src.is_dir() else Path(shutil.__file__).parent
    shutil.copytree(src, tree, symlinks=True, ignore=shutil.ignore_patterns("__pycache__", "site-packages"))
    (run.dir / "dst").mkdir()
    (run.dir / "rsyncd.conf").write_text(RSYNCD_CONF.format(dir=run.dir))
    big = run.data_file(128)
    daemon = subprocess.Popen(["rsync", "--daemon", "--no-detach", f"--config={run.dir / 'rsyncd.conf'}",
                               "--address=127.0.0.1", f"--port={port}"], cwd=run.dir,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    mc_port = free_port()
    mc = None
    try:
        time.sleep(0.5)
        url = f"rsync://127.0.0.1:{port}/dst"
        p = seconds / 3
        run.phase(p, [f"while :; do rsync -a --whole-file {tree}/ {url}/tree/ && rm -rf {run.dir}/dst/tree; done"])
        run.phase(p, [f"while :; do rsync --whole-file --bwlimit=40m {big} {url}/big.bin && "
                      f"rm -f {run.dir}/dst/big.bin; done",
                      f"while :; do rsync -a -c -n {tree}/ {run.dir}/tree-copy/ >/dev/null; done"])
        mc = subprocess.Popen(["memcached", "-l", "127.0.0.1", "-p", str(mc_port), "-U", "0", "-m", "256", "-u", "root"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        time.sleep(0.3)
        run.phase(p, [f"while :; do memcslap --servers=127.0.0.1:{mc_port} --concurrency=4 --execute-number=20000 "
                      f"--flag >/dev/null 2>&1; done"])
    finally:
        run.kill([daemon, *([mc] if mc else [])])


def kv_grow(run: MixRun, seconds: float) -> None:
    """redis-server's memory follows its keyspace: 300,000 keys of 2 KiB (~600 MiB), then none."""
    run.start_redis()
    cli = f"redis-cli -p {run.port}"
    p = seconds / 3
    run.phase(p, [run.bench("-t", "set", "-c", "4", "-d", "2048", "-r", "300000")])
    run.phase(p, [f"{cli} FLUSHALL >/dev/null; exec " + " ".join(run.bench("-t", "get", "-c", "2", "-d", "64"))])
    run.phase(p, [f"while :; do redis-benchmark -p {run.port} -q -t set -n 80000 -r 80000 -d 4096 -c 4 >/dev/null; "
                  f"{cli} FLUSHALL >/dev/null; sleep 2; done"])


def sort_xz(run: MixRun, seconds: float) -> None:
    """sort's in-memory buffer, then gzip's few MiB, then xz -9's dictionary and match finder."""
    lines = run.dir / "lines.txt"
    subprocess.run(f"base64 -w 100 /dev/urandom | head -c 200M > {lines}", shell=True, check=True)
    data = run.data_file(96)
    p = seconds / 3
    run.phase(p, [f"while :; do sort -S 600M --parallel=1 -T {run.dir} {lines} > /dev/null; sleep 1; done"])
    run.phase(p, [f"while :; do gzip -1 -c {data} > /dev/null; done"])
    run.phase(p, [f"while :; do xz -9 -T1 -c {data} > /dev/null; done"])


def pg_sort(run: MixRun, seconds: float) -> None:
    """PostgreSQL sorting and hashing in memory (work_mem 700 MB): a backend per query."""
    server, conn = start_postgres(run, "work_mem=700MB", "hash_mem_multiplier=1")
    psql = f"{PG_BIN / 'psql'} {' '.join(conn)} -q -X postgres"
    try:
        subprocess.run([str(PG_BIN / "pgbench"), *conn, "-i", "-q", "-s", "4", "postgres"], capture_output=True,
                       check=True)
        p = seconds / 3
        sort = ("select count(*) from (select md5(g::text) h from generate_series(1, 2000000) g order by h) s")
        group = ("select count(*) from (select md5((g % 1500000)::text) k, count(*) from "
                 "generate_series(1, 3000000) g group by 1) s")
        run.phase(p, [[str(PG_BIN / "pgbench"), *conn, "-S", "-c", "2", "-j", "1", "-T", str(int(p) + 5), "postgres"]])
        run.phase(p, [f"while :; do {psql} -c \"{sort}\" >/dev/null; sleep 1; done"])
        run.phase(p, [f"while :; do {psql} -c \"{group}\" >/dev/null; sleep 1; done"])
    finally:
        run.kill([server])


def sqlite_index(run: MixRun, seconds: float) -> None:
    """The sqlite3 shell with a 600 MiB page cache: build, then (a new process) query."""
    db = run.dir / "rows.db"
    cache = "PRAGMA cache_size=-600000; PRAGMA temp_store=MEMORY; PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF;"
    build = (f"{cache} DROP TABLE IF EXISTS r; CREATE TABLE r(k INTEGER, v TEXT); "
             "INSERT INTO r SELECT abs(random()) % 1000000, hex(randomblob(48)) FROM generate_series(1, 2500000); "
             "CREATE INDEX r_v ON r(v);")
    query = f"{cache} SELECT k % 1000, count(*), max(v) FROM r GROUP BY 1 ORDER BY 3 LIMIT 5; SELECT count(*) FROM r WHERE v > 'A';"
    p = seconds / 3
    run.phase(p, [f"while :; do sqlite3 {db} \"{build}\" >/dev/null; done"])
    run.phase(p, ["sleep 3600"])
    run.phase(p, [f"while :; do sqlite3 {db} \"{query}\" >/dev/null; sleep 1; done"])


MIXES = {"kv_compress": kv_compress, "db_bulk": db_bulk, "burst_serve": burst_serve, "net_stream": net_stream,
         "web_compile": web_compile}
# Kinds the fidelity bench does not run unless asked (--mixes): applications the planners were
# never checked against while they were built, to see whether a plan generalizes.
HELD_OUT = {"pg_oltp": pg_oltp, "files_git": files_git, "sysbench_files": sysbench_files, "sync_cache": sync_cache}
# Memory held: run only when named, for the memory-held measurements.
MEMORY = {"kv_grow": kv_grow, "sort_xz": sort_xz, "pg_sort": pg_sort, "sqlite_index": sqlite_index}


def run_mix(name: str, seconds: float, workdir: Path = Path("/var/tmp")) -> None:
    mixes = {**MIXES, **HELD_OUT, **MEMORY}
    if name not in mixes:
        raise SystemExit(f"unknown mix {name!r}; known: {', '.join(mixes)}")
    run = MixRun(workdir)
    try:
        mixes[name](run, seconds)
    finally:
        run.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("name", nargs="?")
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--workdir", type=Path, default=Path("/var/tmp"))
    ap.add_argument("--list", action="store_true")
    args = ap.parse_args()
    if args.list or not args.name:
        print("\n".join([*MIXES, *(f"{name} (held out)" for name in HELD_OUT),
                         *(f"{name} (memory)" for name in MEMORY)]))
        return
    missing = missing_tools(held_out=args.name in HELD_OUT or args.name in MEMORY)
    if missing:
        raise SystemExit(f"missing Debian packages for the mixes: {' '.join(missing)} (apt-get install them)")
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    run_mix(args.name, args.seconds, args.workdir)


if __name__ == "__main__":
    main()
