#!/usr/bin/env python3
"""Benchmark: claims per second, `spice task next --claim` against its floor.

A pool of independent ready tasks is drained by C concurrent claimers, each claim one
whole process, for C in 1, 16, 64:
  - spice:  `spice task next --claim --claimant cN --json` until it prints null;
  - floor:  the `sqlite3` shell doing the same guarded update in one BEGIN IMMEDIATE
            transaction on a copy of the same database, with the same durability
            (WAL, synchronous=FULL): take the next fence, insert a claim on the first
            pending task that has no claim and no open prerequisite, record it in the
            ledger, commit; until nothing is left.
Both drain identical pools, one after the other; the ratio spice/floor is printed per
claimer count (goal >= 0.8).

usage: benches/claims_vs_sqlite.py [--pool 1500] [--claimers 1,16,64] [--spice PATH]
Needs python3, sqlite3, and a release build (`cargo build --release`).
"""
import argparse, json, os, shutil, subprocess, sys, tempfile, time
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

FLOOR_SQL = """.timeout 60000
PRAGMA synchronous = FULL;
BEGIN IMMEDIATE;
CREATE TEMP TABLE pick AS SELECT t.id FROM tasks t
  WHERE t.status IN ('pending', 'waiting') AND (t.wait IS NULL OR t.wait <= {now})
    AND NOT EXISTS (SELECT 1 FROM claims c WHERE c.task_id = t.id)
    AND NOT EXISTS (SELECT 1 FROM deps d JOIN tasks p ON p.id = d.dep_id
                    WHERE d.task_id = t.id AND p.status IN ('pending', 'waiting'))
  ORDER BY t.priority, t.id LIMIT 1;
UPDATE meta SET value = value + 1 WHERE key = 'fence' AND EXISTS (SELECT 1 FROM pick);
INSERT INTO claims (task_id, claimant, lane, worktree, fence, lease_until, claimed_at, renewed_at)
  SELECT id, '{who}', NULL, NULL, (SELECT value FROM meta WHERE key = 'fence'), {until}, {now}, {now} FROM pick;
INSERT INTO ledger (task_id, at, kind, actor, fence, detail)
  SELECT id, {now}, 'claimed', '{who}', (SELECT value FROM meta WHERE key = 'fence'), '{{}}' FROM pick;
SELECT count(*) FROM pick;
COMMIT;
"""


def spice_bin(arg):
    for p in [arg, os.path.join(ROOT, "target", "release", "spice")]:
        if p and os.path.exists(p):
            return p
    sys.exit("no spice binary: run `cargo build --release` or pass --spice")


def run(cmd, env, stdin=None):
    p = subprocess.run(cmd, env=env, input=stdin, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd[:3])}... failed ({p.returncode}): {p.stderr.strip()}")
    return p.stdout


def drain(claimers, one_claim):
    """Runs `claimers` workers, each calling one_claim(worker) until it returns False."""
    def worker(w):
        n = 0
        while one_claim(w):
            n += 1
        return n
    t0 = time.perf_counter()
    with ThreadPoolExecutor(claimers) as ex:
        total = sum(ex.map(worker, range(claimers)))
    return total, time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pool", type=int, default=1500)
    ap.add_argument("--claimers", default="1,16,64")
    ap.add_argument("--spice")
    a = ap.parse_args()
    spice = spice_bin(a.spice)
    if not shutil.which("sqlite3"):
        sys.exit("sqlite3 is needed: apt-get install sqlite3")
    pool = json.dumps([
        {"uuid": f"00000000-0000-4000-8000-{i:012d}", "description": f"pool {i}",
         "status": "pending", "entry": "20261101T120000Z", "project": f"p{i % 7}"}
        for i in range(a.pool)
    ])
    print(f"spice: {spice}; pool of {a.pool} ready tasks, one process per claim")
    print(f"{'claimers':>8} {'spice/s':>9} {'floor/s':>9} {'ratio':>6}  (goal ratio >= 0.8)")
    worst = None
    with tempfile.TemporaryDirectory(prefix="spice-claims-") as d:
        for c in [int(x) for x in a.claimers.split(",")]:
            home = os.path.join(d, f"spice{c}")
            env = {"PATH": os.environ["PATH"], "SPICE_HOME": home, "HOME": d}
            run([spice, "task", "import", "--taskwarrior", "-"], env, pool)
            # The floor works on an identical database (copied before any claim).
            floor_db = os.path.join(d, f"floor{c}.db")
            run(["sqlite3", os.path.join(home, "spice.db"), f".backup '{floor_db}'"], env)
            run(["sqlite3", floor_db, "PRAGMA journal_mode = WAL;"], env)

            def spice_claim(w):
                out = run([spice, "task", "next", "--claim", "--claimant", f"c{w}", "--json"], env)
                return out.strip() != "null"

            def floor_claim(w):
                now = int(time.time() * 1e6)
                sql = FLOOR_SQL.format(now=now, until=now + 1800 * 10**6, who=f"c{w}")
                return run(["sqlite3", floor_db], env, sql).strip() == "1"

            fn, ft = drain(c, floor_claim)
            sn, st = drain(c, spice_claim)
            if sn != a.pool or fn != a.pool:
                sys.exit(f"claimed spice {sn}, floor {fn} of {a.pool}")
            s_rate, f_rate = sn / st, fn / ft
            worst = s_rate / f_rate if worst is None else min(worst, s_rate / f_rate)
            print(f"{c:>8} {s_rate:>9.1f} {f_rate:>9.1f} {s_rate / f_rate:>6.2f}", flush=True)
    print(f"worst ratio spice/floor = {worst:.2f} (goal >= 0.8)")


if __name__ == "__main__":
    main()
