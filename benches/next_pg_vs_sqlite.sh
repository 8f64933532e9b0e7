#!/usr/bin/env bash
# Benchmark: `spice task next` on a graph of N tasks (default 10000), PostgreSQL against
# SQLite side by side in one run. The graph comes from ../shared/bench/gen_tasks.py
# (projects, phase tags, priorities, dependencies, ~5% completed); it is imported into
# SQLite with `spice task import --taskwarrior`, and the same rows (tasks, tags,
# dependencies) are copied into PostgreSQL's schema with COPY (import is not on
# PostgreSQL yet). Then `spice task next` is timed as a whole process on each backend,
# alternating, RUNS times each; prints the median ms per call and the ratio pg/sqlite.
# PostgreSQL is a throwaway cluster with fsync on (benches/pg_cluster.sh).
# usage: benches/next_pg_vs_sqlite.sh [N] [RUNS]   (SPICE=path to the binary)
set -euo pipefail
cd "$(dirname "$0")/.."
n="${1:-10000}"; runs="${2:-11}"
spice="${SPICE:-$PWD/target/release/spice}"
[ -x "$spice" ] || { echo "no release build: cargo build --release --locked (or SPICE=...)" >&2; exit 1; }
. benches/pg_cluster.sh
python3 ../shared/bench/gen_tasks.py "$n" >"$work/graph.json"
mkdir -p "$work/sqlite" "$work/pg-home"
SPICE_HOME="$work/sqlite" "$spice" task import --taskwarrior "$work/graph.json" >/dev/null
psql -c "CREATE DATABASE next_bench"
printf '[store]\nurl = "%s"\n' "$(pg_url next_bench)" >"$work/pg-home/config.toml"
SPICE_HOME="$work/pg-home" "$spice" task claims >/dev/null   # creates the schema
python3 - "$work/sqlite/spice.db" <<'PY' | "$pg_bin/psql" -q -v ON_ERROR_STOP=1 "$(pg_url next_bench)"
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
def field(v):
    if v is None:
        return "\\N"
    return str(v).replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")
for table, cols in [
    ("tasks", "id, uuid, title, body, project, phase, priority, due, wait, status, entry, end_at, modified"),
    ("tags", "task_id, tag"),
    ("deps", "task_id, dep_id"),
]:
    print(f"COPY {table} ({cols}) FROM STDIN;")
    for row in db.execute(f"SELECT {cols} FROM {table}"):
        print("\t".join(field(v) for v in row))
    print("\\.")
print("ANALYZE;")
PY
python3 - "$spice" "$work" "$runs" "$n" <<'PY'
import json, os, statistics, subprocess, sys, time
spice, work, runs, n = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
homes = {"sqlite": f"{work}/sqlite", "pg": f"{work}/pg-home"}
outs, times = {}, {b: [] for b in homes}
for i in range(runs + 1):  # the first round warms the caches and is not counted
    for b, home in homes.items():
        env = dict(os.environ, SPICE_HOME=home)
        t0 = time.perf_counter()
        p = subprocess.run([spice, "task", "next", "--json"], env=env, capture_output=True, text=True)
        dt = (time.perf_counter() - t0) * 1000
        if p.returncode != 0:
            sys.exit(f"{b}: spice task next failed: {p.stderr.strip()}")
        outs[b] = [c["id"] for c in json.loads(p.stdout)]
        if i:
            times[b].append(dt)
if outs["sqlite"] != outs["pg"]:
    sys.exit("the two backends ranked the graph differently")
s, p = statistics.median(times["sqlite"]), statistics.median(times["pg"])
print(f"`spice task next --json` on {n} tasks, median of {runs} runs each (both rank the same top 10)")
print(f"{'sqlite ms':>10} {'pg ms':>8} {'pg/sqlite':>9}")
print(f"{s:>10.1f} {p:>8.1f} {p / s:>9.2f}")
print("goal (#18): measured on both backends side by side; the issue sets no bound")
PY
