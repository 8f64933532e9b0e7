#!/usr/bin/env bash
# Benchmark: claims per second through `spice task next --claim`, PostgreSQL against
# SQLite side by side in one run. For each claimer count C (default 1 16 64), a pool of
# N independent tasks (default 400) is added to a fresh store of each backend, then C
# concurrent loops each run `spice task next --claim --claimant cK --json` (one process
# per claim) until it prints null. Prints claims/s per backend and the ratio pg/sqlite.
# PostgreSQL is a throwaway cluster in a temp dir (unix socket only, fsync on), stopped
# on exit. usage: benches/claims_pg_vs_sqlite.sh [N] [C...]  (SPICE=path to the binary)
set -euo pipefail
cd "$(dirname "$0")/.."
n="${1:-400}"; shift || true
claimers=("${@:-1 16 64}"); read -r -a claimers <<<"${claimers[*]}"
spice="${SPICE:-$PWD/target/release/spice}"
[ -x "$spice" ] || spice="$PWD/target/debug/spice"
work="$(mktemp -d /tmp/spice-bench-pg.XXXXXX)"
pg_bin="$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)"
pg_run() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
trap 'pg_run "$pg_bin/pg_ctl" -D "$work/pg/data" -w -m immediate stop >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
chmod 755 "$work"; mkdir -p "$work/pg"; [ "$(id -u)" = 0 ] && chown postgres:postgres "$work/pg"
pg_run "$pg_bin/initdb" -D "$work/pg/data" -U postgres --auth=trust -E UTF8 --locale=C >/dev/null
pg_run "$pg_bin/pg_ctl" -D "$work/pg/data" -w -l "$work/pg/log" \
  -o "-k $work/pg -c listen_addresses='' -c max_connections=200" start >/dev/null
psql() { "$pg_bin/psql" -q "postgresql:///postgres?host=$work/pg&user=postgres" "$@"; }

drain() { # home claimers -> seconds
  local home="$1" c="$2" start end
  start=$(date +%s.%N)
  for k in $(seq 1 "$c"); do
    ( while out=$(SPICE_HOME="$home" "$spice" task next --claim --claimant "c$k" --json) \
          && [ "$out" != null ]; do :; done ) &
  done
  wait
  end=$(date +%s.%N)
  echo "$end - $start" | bc -l
}

printf '%-9s %14s %14s %8s\n' claimers "sqlite claims/s" "pg claims/s" "pg/sqlite"
for c in "${claimers[@]}"; do
  for b in sqlite pg; do
    home="$work/$b-$c"; mkdir -p "$home"
    if [ "$b" = pg ]; then
      psql -c "CREATE DATABASE b$c"
      printf '[store]\nurl = "postgresql:///b%s?host=%s&user=postgres"\n' "$c" "$work/pg" >"$home/config.toml"
    fi
    for i in $(seq 1 "$n"); do SPICE_HOME="$home" "$spice" task add "t$i" >/dev/null; done
    secs=$(drain "$home" "$c")
    got=$(SPICE_HOME="$home" "$spice" task claims --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')
    [ "$got" = "$n" ] || { echo "$b with $c claimers: $got claims of $n" >&2; exit 1; }
    eval "rate_$b=\$(echo \"$n / $secs\" | bc -l)"
  done
  printf '%-9s %14.0f %14.0f %8.2f\n' "$c" "$rate_sqlite" "$rate_pg" "$(echo "$rate_pg / $rate_sqlite" | bc -l)"
done
