#!/usr/bin/env bash
# Benchmark: /api/tasks at full speed with 10,000 tasks (../shared/bench/gen_tasks.py, 50 of
# them claimed), beside a static asset of the same server (app.css) as the baseline.
# wrk -t2 -c16 at full speed (2 cores shared by wrk and the server): p50, p99 and the
# ratio of each p99 to the baseline's. Issue #14 asked for p99 <= 20 ms.
# usage: benches/serve_tasks.sh [seconds]    SPICE=path/to/spice to measure another build
# needs: cargo build --release (or SPICE=…), wrk, python3
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-10}
spice=${SPICE:-$PWD/target/release/spice}
gen=$(realpath "${SPICE_GEN_TASKS:-../shared/bench/gen_tasks.py}")
[ -x "$spice" ] || { echo "build first: cargo build --release (or set SPICE)" >&2; exit 2; }
command -v wrk >/dev/null || { echo "wrk is needed: apt-get install wrk" >&2; exit 2; }
work=$(mktemp -d)
pid=""
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
export SPICE_HOME=$work/home
mkdir -p "$work/repo" && git -C "$work/repo" init -q
cd "$work/repo"
echo "setting up 10,000 tasks with $spice" >&2
python3 "$gen" 10000 > "$work/tasks.json"
"$spice" task import --taskwarrior "$work/tasks.json" > /dev/null
for i in $(seq -w 1 50); do
  "$spice" task next --claim --claimant "sess-$i" --lease 2h --json > /dev/null
done
"$spice" serve --bind 127.0.0.1:0 > "$work/serve.out" &
pid=$!
for _ in $(seq 100); do grep -q listening "$work/serve.out" 2>/dev/null && break; sleep 0.1; done
url=$(sed -n 's/^listening on //p' "$work/serve.out")
curl -sf "${url}api/tasks?limit=1" > /dev/null  # the first table is built before timing

ms() { # wrk's latency ("1.23ms", "456.00us", "1.02s") in ms
  awk -v v="$1" 'BEGIN { n = v + 0; if (v ~ /us$/) n /= 1000; else if (v ~ /ms$/) n += 0; else if (v ~ /s$/) n *= 1000; printf "%.2f", n }'
}
base99=""
printf '%-44s %10s %10s %10s %8s\n' path req/s p50_ms p99_ms p99/base
for path in app.css "api/tasks?category=ready&limit=100" "api/tasks?category=blocked&limit=100&offset=500" \
            "api/tasks?q=task%2042&limit=100" "api/tasks?category=done&limit=100"; do
  out=$(wrk -t2 -c16 -d"${secs}s" --latency "${url}${path}")
  rps=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
  p50=$(ms "$(awk '/^ +50%/ {print $2}' <<<"$out")")
  p99=$(ms "$(awk '/^ +99%/ {print $2}' <<<"$out")")
  [ -z "$base99" ] && base99=$p99
  ratio=$(awk -v a="$p99" -v b="$base99" 'BEGIN { printf "%.1f", (b > 0 ? a / b : 0) }')
  printf '%-44s %10s %10s %10s %8s\n' "/$path" "$rps" "$p50" "$p99" "$ratio"
done
