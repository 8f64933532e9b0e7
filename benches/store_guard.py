#!/usr/bin/env python3
"""Benchmark: what the store's write guard costs a command.

A connection's first write runs `PRAGMA quick_check` before it writes (a corrupt
store takes no writes). This measures, on the same spice database of N tasks:
  - `PRAGMA quick_check` alone, against
  - one write transaction as spice commits it (WAL, synchronous=FULL), and
  - a whole `spice task add` process (which includes the guard),
and reports the ratios. Medians of alternating runs.

usage: benches/store_guard.py [--tasks 2000,20000] [--runs 15] [--spice PATH]
Needs python3 and a spice binary (default target/release/spice, else target/debug/spice).
"""
import argparse, json, os, sqlite3, statistics, subprocess, sys, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def spice_bin(arg):
    for p in [arg, os.path.join(ROOT, "target", "release", "spice"), os.path.join(ROOT, "target", "debug", "spice")]:
        if p and os.path.exists(p):
            return p
    sys.exit("no spice binary: run `cargo build --release` or pass --spice")


def timed(f):
    t0 = time.perf_counter()
    f()
    return time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", default="2000,20000")
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--spice")
    a = ap.parse_args()
    spice = spice_bin(a.spice)
    print(f"spice: {spice}")
    print(f"{'tasks':>7} {'db KiB':>8} {'quick_check ms':>15} {'write txn ms':>13} {'task add ms':>12} {'check/txn':>10} {'check/add':>10}")
    for n in [int(x) for x in a.tasks.split(",")]:
        with tempfile.TemporaryDirectory() as d:
            env = dict(os.environ, SPICE_HOME=os.path.join(d, "home"))
            tasks = [{"uuid": f"00000000-0000-4000-8000-{i:012d}", "description": f"bench task {i} with a title of ordinary length",
                      "status": "pending", "entry": "20261101T120000Z", "project": f"p{i % 7}"} for i in range(n)]
            p = subprocess.run([spice, "task", "import", "--taskwarrior", "-"], input=json.dumps(tasks), env=env,
                               capture_output=True, text=True)
            if p.returncode != 0:
                sys.exit(f"import failed: {p.stderr.strip()}")
            db = os.path.join(d, "home", "spice.db")
            checks, txns, adds = [], [], []
            for i in range(a.runs):
                c = sqlite3.connect(db, isolation_level=None)
                c.execute("PRAGMA synchronous = FULL")
                checks.append(timed(lambda: c.execute("PRAGMA quick_check").fetchall()))
                def txn():
                    c.execute("BEGIN IMMEDIATE")
                    c.execute("INSERT INTO ledger (task_id, at, kind) VALUES ('x', 0, 'bench')")
                    c.execute("COMMIT")
                txns.append(timed(txn))
                c.close()
                adds.append(timed(lambda: subprocess.run([spice, "task", "add", f"added {i}"], env=env,
                                                         capture_output=True, check=True)))
            qc, tx, ad = (statistics.median(x) * 1000 for x in (checks, txns, adds))
            print(f"{n:>7} {os.path.getsize(db) // 1024:>8} {qc:>15.2f} {tx:>13.2f} {ad:>12.2f} {qc / tx:>10.2f} {qc / ad:>10.2f}")


if __name__ == "__main__":
    main()
