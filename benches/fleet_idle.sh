#!/usr/bin/env bash
# Benchmark: what a supervisor (`spice fleet up`) costs while every lane is idle, with
# 8 and 32 lanes, on an empty store and on a graph of TASKS tasks (issue #20: "the
# supervisor's idle cost must not depend on the graph's size").
#
# Each lane takes only project "idle", which no task carries, so nothing is ever
# eligible and no agent starts: what is measured is the idle wait itself. The graph is
# ../shared/bench/gen_tasks.py TASKS (Taskwarrior format, `spice task import`: 10
# projects, dependencies, 5% done). For each lane count and graph, `fleet up` starts;
# once every lane is `idle` and 2 s more have passed, the supervisor's CPU (utime +
# stime of /proc/PID/stat, every thread, and the threads' schedstat nanoseconds, finer
# than clock ticks) is read at the start and end of a window of SECONDS, its RSS
# (VmRSS) every second; then `fleet down`.
#
# Baseline, in the same run: the same lanes on the empty store. Printed: CPU-s per
# lane-minute of each run, the ratio of the TASKS-task run to the empty one (goal 1x),
# RSS per lane (total / lanes) and the marginal RSS of a lane (32 lanes against 8 on
# the same graph). Goals: the same CPU per lane-minute with TASKS as with none,
# <= 0.03 CPU-s per lane-minute, <= 1 MB RSS per lane.
#
# usage: benches/fleet_idle.sh [SECONDS] [TASKS]       (default 20 s, 10000 tasks)
#        SPICE_BIN=/path/to/spice benches/fleet_idle.sh   measures another build
# needs: cargo build --release, git, jq, bc, python3
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-20}; ntasks=${2:-10000}
spice=${SPICE_BIN:-$PWD/target/release/spice}
[ -x "$spice" ] || { echo "build first: cargo build --release" >&2; exit 2; }
for c in git jq bc python3; do command -v $c >/dev/null || { echo "$c is needed" >&2; exit 2; }; done
gen=../shared/bench/gen_tasks.py
[ -f "$gen" ] || { echo "$gen is needed" >&2; exit 2; }
work=$(mktemp -d /tmp/spice-fleet-idle.XXXXXX)
. benches/fleet_common.sh
export HOME=$work/home
unset SPICE_LANE SPICE_SESSION SPICE_TASK BASH_ENV
mkdir -p "$HOME"
sup=; repo=

cleanup() {
  set +e
  stop_supervisor
  reap_leftovers
  rm -rf "$work"
}
trap cleanup EXIT

# The graph, imported once per store.
python3 "$gen" "$ntasks" > "$work/tasks.json"
mkdir -p "$work/empty" "$work/graph"
SPICE_HOME=$work/graph "$spice" task import --taskwarrior "$work/tasks.json" > /dev/null
open=$(SPICE_HOME=$work/graph "$spice" task list --json | jq length)

# A repository with LANES lanes taking project "idle" only.
# usage: idle_repo DIR LANES
idle_repo() {
  fleet_repo "$1" "$2" demo 30m
  for f in "$1"/lanes/*.toml; do echo 'projects = ["idle"]' >> "$f"; done
  commit_config "$1"
}

sum_ns() { thread_ns "$1" | awk '{ n += $NF } END { printf "%.0f\n", n }'; } # mawk would print 1e+10

# Runs one supervisor with LANES lanes on the store STATE; sets m_ticks and m_sched
# (CPU-s by clock ticks and by schedstat), m_rss (mean VmRSS, kB) and m_win (s).
# usage: measure LANES STATE
measure() {
  local lanes=$1 state=$2 idle status t0 t1 c0 c1 n0 n1 rss_sum=0 samples=0 end
  repo=$work/repo-$lanes
  [ -d "$repo" ] || idle_repo "$repo" "$lanes"
  (cd "$repo" && SPICE_HOME=$state exec "$spice" fleet up > "$work/fleet.out" 2> "$work/fleet.err") &
  sup=$!
  for _ in $(seq 600); do # up to 60 s for every lane to be idle
    status=$(cd "$repo" && SPICE_HOME=$state "$spice" fleet status --json)
    idle=$(jq "[.lanes[] | select(.state == \"idle\" and (.lane | test(\"^l[0-9]+$\")))] | length" <<< "$status")
    [ "$idle" -ge "$lanes" ] && break
    kill -0 "$sup" 2>/dev/null || { cat "$work/fleet.err" >&2; die "fleet up ended early"; }
    sleep 0.1
  done
  [ "$idle" -ge "$lanes" ] || die "only $idle of $lanes lanes idle after 60 s"
  sleep 2
  t0=$EPOCHREALTIME; c0=$(cpu_seconds "$sup"); n0=$(sum_ns "$sup")
  end=$(echo "$t0 + $secs" | bc)
  while [ "$(echo "$EPOCHREALTIME < $end" | bc)" = 1 ]; do
    rss_sum=$((rss_sum + $(status_kb "$sup" VmRSS))); samples=$((samples + 1))
    sleep 1
  done
  t1=$EPOCHREALTIME; c1=$(cpu_seconds "$sup"); n1=$(sum_ns "$sup")
  (cd "$repo" && SPICE_HOME=$state "$spice" fleet down) > /dev/null
  wait "$sup" || true
  sup=
  m_ticks=$(echo "$c1 - $c0" | bc); m_sched=$(echo "($n1 - $n0) / 1000000000" | bc -l)
  m_rss=$((rss_sum / samples)); m_win=$(echo "$t1 - $t0" | bc)
}

declare -A cpu rss
printf 'supervisor idle cost, nothing eligible (every lane takes project "idle"), %s s windows, %s\n' "$secs" "$spice"
printf '  %5s %7s %10s %12s %16s %9s %12s\n' lanes tasks "CPU-s" "CPU-s sched" "CPU-s/lane-min" "RSS MB" "RSS/lane MB"
for lanes in 8 32; do
  for graph in empty graph; do
    measure "$lanes" "$work/$graph"
    ticks=$m_ticks sched=$m_sched rss_kb=$m_rss win=$m_win
    n=0; [ "$graph" = graph ] && n=$open
    lm=$(echo "$lanes * $win / 60" | bc -l)
    # schedstat is the finer measure; clock ticks are shown beside it.
    per=$(echo "$sched / $lm" | bc -l)
    cpu[$lanes.$graph]=$per; rss[$lanes.$graph]=$rss_kb
    printf '  %5d %7d %10.2f %12.3f %16.4f %9.1f %12.2f\n' "$lanes" "$n" "$ticks" "$sched" "$per" \
      "$(echo "$rss_kb / 1024" | bc -l)" "$(echo "$rss_kb / 1024 / $lanes" | bc -l)"
  done
done
ratio() { if [ "$(echo "$2 > 0" | bc -l)" = 1 ]; then printf '%.2fx' "$(echo "$1 / $2" | bc -l)"; else echo "n/a (no CPU at 0 tasks)"; fi; }
printf '  CPU per lane-minute, %d open tasks against none (goal 1x): 8 lanes %s, 32 lanes %s\n' "$open" \
  "$(ratio "${cpu[8.graph]}" "${cpu[8.empty]}")" "$(ratio "${cpu[32.graph]}" "${cpu[32.empty]}")"
worst=$(printf '%s\n' "${cpu[@]}" | sort -g | tail -1)
printf '  highest CPU per lane-minute: %.4f CPU-s (goal <= 0.03)\n' "$worst"
printf '  marginal RSS per lane (32 lanes against 8, same store; goal <= 1 MB): empty %.2f MB, %d tasks %.2f MB\n' \
  "$(echo "(${rss[32.empty]} - ${rss[8.empty]}) / 24 / 1024" | bc -l)" "$open" \
  "$(echo "(${rss[32.graph]} - ${rss[8.graph]}) / 24 / 1024" | bc -l)"
left=$(leftovers)
printf '  processes left behind: %s\n' "${left:-none}"
