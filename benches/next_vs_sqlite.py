#!/usr/bin/env python3
"""Benchmark: `spice task next` against its floor, `sqlite3` reading the same rows.

For each graph size, the same generated graph (shared/bench/gen_tasks.py) is imported,
then two whole processes are timed, alternating, and their medians compared:
  - spice:  `spice task next` (reads the open tasks, tags, dependencies, annotations and
            claims in one transaction, ranks, prints ten candidates);
  - floor:  the `sqlite3` shell running the very queries of that read, output discarded.
The ratio spice/floor is printed per size (goal <= 2.0 at every size, so the growth is
linear), with spice's peak RSS.

usage: benches/next_vs_sqlite.py [--tasks 1000,10000,100000] [--runs 11] [--spice PATH]
Needs python3, sqlite3, and a release build (`cargo build --release`).
"""
import argparse, os, shutil, statistics, subprocess, sys, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GEN = os.path.join(ROOT, "..", "shared", "bench", "gen_tasks.py")

# The snapshot's queries (src/store/snapshot.rs, src/store/tasks.rs list_tasks,
# src/store/claims.rs all_claims), in one read transaction as spice runs them.
FLOOR_SQL = """BEGIN;
SELECT id, uuid, title, body, project, phase, priority, due, wait, status, entry, end_at, modified
  FROM tasks WHERE status IN ('pending','waiting') ORDER BY id;
SELECT task_id, tag FROM tags ORDER BY task_id, tag;
SELECT task_id, dep_id FROM deps ORDER BY task_id, dep_id;
SELECT task_id, entry, description FROM annotations ORDER BY task_id, entry, rowid;
SELECT c.task_id, t.project, t.title, c.claimant, c.lane, c.worktree, c.fence, c.lease_until,
  c.claimed_at, c.renewed_at FROM claims c JOIN tasks t ON t.id = c.task_id
  ORDER BY c.claimed_at, c.fence;
COMMIT;
"""


def spice_bin(arg):
    for p in [arg, os.path.join(ROOT, "target", "release", "spice")]:
        if p and os.path.exists(p):
            return p
    sys.exit("no spice binary: run `cargo build --release` or pass --spice")


def timed(cmd, env, stdin=None):
    t0 = time.perf_counter()
    p = subprocess.run(cmd, env=env, input=stdin, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    dt = time.perf_counter() - t0
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({p.returncode}): {p.stderr.strip()}")
    return dt


def peak_rss_kib(cmd, env):
    """Peak RSS of one run, from wait4's rusage of that child alone."""
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, ru = os.wait4(p.pid, 0)
    if status != 0:
        sys.exit(f"{' '.join(cmd)} failed ({status})")
    return ru.ru_maxrss


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", default="1000,10000,100000")
    ap.add_argument("--runs", type=int, default=11)
    ap.add_argument("--spice")
    a = ap.parse_args()
    spice = spice_bin(a.spice)
    if not shutil.which("sqlite3"):
        sys.exit("sqlite3 is needed: apt-get install sqlite3")
    print(f"spice: {spice}")
    print(f"{'tasks':>7} {'spice ms':>9} {'floor ms':>9} {'ratio':>6} {'RSS MiB':>8}  (median of {a.runs} alternating runs; goal ratio <= 2.0)")
    worst = 0.0
    for n in [int(x) for x in a.tasks.split(",")]:
        with tempfile.TemporaryDirectory(prefix="spice-next-") as d:
            graph = subprocess.run([sys.executable, GEN, str(n)], capture_output=True, text=True, check=True).stdout
            env = {"PATH": os.environ["PATH"], "SPICE_HOME": os.path.join(d, "home"), "HOME": d}
            timed([spice, "task", "import", "--taskwarrior", "-"], env, graph)
            db = os.path.join(d, "home", "spice.db")
            spice_cmd = [spice, "task", "next"]
            floor_cmd = ["sqlite3", db, FLOOR_SQL]
            timed(spice_cmd, env), timed(floor_cmd, env)  # warm the page cache
            s, f = [], []
            for _ in range(a.runs):
                s.append(timed(spice_cmd, env))
                f.append(timed(floor_cmd, env))
            sm, fm = statistics.median(s), statistics.median(f)
            rss = peak_rss_kib(spice_cmd, env) / 1024
            worst = max(worst, sm / fm)
            print(f"{n:>7} {sm * 1000:>9.1f} {fm * 1000:>9.1f} {sm / fm:>6.2f} {rss:>8.1f}", flush=True)
    print(f"worst ratio spice/floor = {worst:.2f} (goal <= 2.0)")


if __name__ == "__main__":
    main()
