# Sourced by the PostgreSQL benchmarks: starts a throwaway cluster in a temp dir
# (unix socket only, fsync ON: each commit synced, as SQLite's synchronous=FULL syncs
# its own), stopped and removed on exit. Sets $work (the temp dir), $pg_bin, and
# pg_url DB (a URL for database DB); `psql` runs against the `postgres` database.
# As root the server runs as Debian's postgres user, as PostgreSQL insists.
work="$(mktemp -d /tmp/spice-bench-pg.XXXXXX)"
pg_bin="$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)"
pg_run() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
trap 'pg_run "$pg_bin/pg_ctl" -D "$work/pg/data" -w -m immediate stop >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
chmod 755 "$work"; mkdir -p "$work/pg"; if [ "$(id -u)" = 0 ]; then chown postgres:postgres "$work/pg"; fi
pg_run "$pg_bin/initdb" -D "$work/pg/data" -U postgres --auth=trust -E UTF8 --locale=C >/dev/null
pg_run "$pg_bin/pg_ctl" -D "$work/pg/data" -w -l "$work/pg/log" \
  -o "-k $work/pg -c listen_addresses='' -c max_connections=200 -c fsync=on" start >/dev/null
pg_url() { echo "postgresql:///$1?host=$work/pg&user=postgres"; }
psql() { "$pg_bin/psql" -q -v ON_ERROR_STOP=1 "$(pg_url postgres)" "$@"; }
