"""A real database benchmark for colocation and trace recording: SQLite (the library Python
links), a bank-transfer transaction mix in the spirit of TPC-B: each transaction reads two
random accounts, moves money between them and appends a history row, committed with
synchronous=FULL (an fsync per commit, so the disk sees it). Prints `<n> tx/s` at the end.

    python bench/workloads/sqlite_bank.py --seconds 20 [--db /tmp/bank.db | --memory] [--accounts 200000]

With --memory the database lives in RAM and commits do not fsync: the benchmark is CPU and
memory bound (the contention a CPU-heavy neighbour mix creates).
"""

from __future__ import annotations

import argparse
import os
import random
import sqlite3
import tempfile
import time


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--db", default=None, help="database file (default: a fresh temporary file)")
    ap.add_argument("--memory", action="store_true", help="in-memory database, no fsync: CPU and memory bound")
    ap.add_argument("--accounts", type=int, default=200_000)
    ap.add_argument("--scan-every", type=int, default=200, help="a range aggregate every N transactions")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    tmpdir = None
    if args.memory:
        args.db = ":memory:"
    elif args.db is None:
        tmpdir = tempfile.mkdtemp(prefix="sqlite_bank.")
        args.db = os.path.join(tmpdir, "bank.db")
    rng = random.Random(args.seed)
    con = sqlite3.connect(args.db, isolation_level=None)
    if not args.memory:
        con.execute("PRAGMA journal_mode=WAL")
        con.execute("PRAGMA synchronous=FULL")
    con.execute("CREATE TABLE IF NOT EXISTS account(id INTEGER PRIMARY KEY, balance INTEGER, pad TEXT)")
    con.execute("CREATE TABLE IF NOT EXISTS history(id INTEGER PRIMARY KEY, src INTEGER, dst INTEGER, amount INTEGER, ts REAL)")
    if con.execute("SELECT count(*) FROM account").fetchone()[0] < args.accounts:
        con.execute("BEGIN")
        con.executemany("INSERT OR REPLACE INTO account VALUES (?, ?, ?)",
                        ((i, 10_000, "x" * 80) for i in range(args.accounts)))
        con.execute("COMMIT")
    n = 0
    t0 = time.perf_counter()
    end = t0 + args.seconds
    while time.perf_counter() < end:
        a, b = rng.randrange(args.accounts), rng.randrange(args.accounts)
        amt = rng.randrange(1, 100)
        con.execute("BEGIN IMMEDIATE")
        (ba,) = con.execute("SELECT balance FROM account WHERE id=?", (a,)).fetchone()
        con.execute("SELECT balance FROM account WHERE id=?", (b,)).fetchone()
        con.execute("UPDATE account SET balance=? WHERE id=?", (ba - amt, a))
        con.execute("UPDATE account SET balance=balance+? WHERE id=?", (amt, b))
        con.execute("INSERT INTO history(src, dst, amount, ts) VALUES (?, ?, ?, ?)", (a, b, amt, time.time()))
        con.execute("COMMIT")
        n += 1
        if n % args.scan_every == 0:
            lo = rng.randrange(args.accounts - 5000)
            con.execute("SELECT sum(balance), avg(length(pad)) FROM account WHERE id BETWEEN ? AND ?", (lo, lo + 5000)).fetchone()
    dt = time.perf_counter() - t0
    con.close()
    if tmpdir:
        for f in os.listdir(tmpdir):
            os.unlink(os.path.join(tmpdir, f))
        os.rmdir(tmpdir)
    print(f"{n / dt:.1f} tx/s ({n} transactions in {dt:.2f} s)")


if __name__ == "__main__":
    main()
