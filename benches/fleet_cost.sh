#!/usr/bin/env bash
# Benchmark: what the supervisor itself (`spice fleet up`, not its agents) costs with
# 8 demo lanes: CPU seconds per lane per minute, and RSS.
#
# A scratch repository gets LANES lanes of `slowdemo` (the built-in demo profile with
# `--command-seconds` long enough that every agent is still in its first work command
# when the window ends) and twice as many tasks. `fleet up` starts; once every lane is
# `working` (startup, i.e. claims, worktrees and launches, is reported apart), the
# supervisor's CPU (utime + stime of /proc/PID/stat, every thread) is read at the start
# and the end of a window of SECONDS, its RSS (VmRSS) every second, and VmHWM at the end.
# Its threads are broken down by /proc/PID/task/*/schedstat: the main thread, the lane
# threads (each ticks every 250 ms: transcript scan, claim check, lane row) and the PTY
# readers (agent-pty-*). Then `spice fleet down` stops it, timed.
#
# Baseline, side by side in the same window: the same demo agents (same command, same
# BASH_ENV shell redirector, own worktrees) each run under util-linux `script` with
# `-f -T` (a PTY, its output logged and flushed as it comes, with timing: what running
# agents under PTYs with recordings costs without spice). Its CPU is read from
# schedstat, since it rounds to zero in clock ticks. The ratio says how much more the
# supervisor costs than a bare PTY holder; what it buys (transcript following, ACKs,
# lease renewal, the lane rows) is the difference. Lanes use a 90 s lease, so each is
# renewed (every 30 s) within a 60 s window. RSS per lane is the total divided by the
# lanes; most of it is fixed, so for the marginal cost of a lane compare LANES=1 and 8.
#
# usage: benches/fleet_cost.sh [SECONDS] [LANES]     (default 60 s, 8 lanes)
#        PERF=20 benches/fleet_cost.sh  also profiles the supervisor with `perf record`
#        for 20 s after the window and prints its top symbols (not part of the figures;
#        it needs the build with symbols: cargo build --profile profiling)
# needs: cargo build --release, git, util-linux script, jq, bc
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}; lanes=${2:-8}
spice=$PWD/target/release/spice
[ -n "${PERF:-}" ] && spice=$PWD/target/profiling/spice
[ -x "$spice" ] || { echo "build first: cargo build --release (with PERF: --profile profiling)" >&2; exit 2; }
for c in git script jq bc; do command -v $c >/dev/null || { echo "$c is needed" >&2; exit 2; }; done
work=$(mktemp -d /tmp/spice-fleet-cost.XXXXXX)
. benches/fleet_common.sh
export HOME=$work/home SPICE_HOME=$work/spice
unset SPICE_LANE SPICE_SESSION SPICE_TASK BASH_ENV
mkdir -p "$HOME"
sup=; scripts=()

# Each baseline agent leads its own session under its script: TERM to its group.
stop_baseline() {
  local s a
  for s in "${scripts[@]}"; do
    for a in $(pgrep -P "$s"); do kill -TERM -- "-$a" 2>/dev/null; done
    kill -TERM "$s" 2>/dev/null
  done
  for s in "${scripts[@]}"; do wait_gone "$s" 10; done
  scripts=()
}

cleanup() {
  set +e
  stop_supervisor
  stop_baseline
  reap_leftovers
  rm -rf "$work"
}
trap cleanup EXIT

cmd_secs=$((secs + 600)) # every agent stays in its first work command
repo=$work/repo
fleet_repo "$repo" "$lanes" slowdemo 90s
slow_demo_profile "$repo" slowdemo "$cmd_secs"
commit_config "$repo"
(cd "$repo" && "$spice" fleet check >/dev/null)
for i in $(seq $((lanes * 2))); do
  (cd "$repo" && "$spice" task add "Slow task $i" --project demo >/dev/null)
done

# The baseline agents, started first so their startup is long over by the window.
"$spice" shell-init bash > "$work/bashenv"
mkdir -p "$work/base"
for i in $(seq "$lanes"); do
  wt=$work/base/b$i
  git -C "$repo" worktree add -q --detach "$wt"
  printf 'Baseline agent %s: do the demo task.\n' "$i" > "$work/base/b$i.md"
  cmd="$spice demo-agent --session-id $(cat /proc/sys/kernel/random/uuid) --brief-file $work/base/b$i.md --interactive --command-seconds $cmd_secs"
  (cd "$wt" && exec env -i PATH="$PATH" HOME="$HOME" TERM=xterm-256color SPICE_HOME="$work/base-state" \
     BASH_ENV="$work/bashenv" script -q -f -T "$work/base/b$i.timing" -c "$cmd" "$work/base/b$i.log" \
     < /dev/null > /dev/null 2>&1) &
  scripts+=($!)
done

t_launch=$EPOCHREALTIME
(cd "$repo" && exec "$spice" fleet up > "$work/fleet.out" 2> "$work/fleet.err") &
sup=$!
working=0; stopped=0
for _ in $(seq 600); do # up to 60 s for every lane to be working (or to have failed)
  status=$(cd "$repo" && "$spice" fleet status --json)
  working=$(jq '[.lanes[] | select(.state == "working")] | length' <<< "$status")
  stopped=$(jq '[.lanes[] | select(.state == "stopped")] | length' <<< "$status")
  [ $((working + stopped)) = "$lanes" ] && break
  kill -0 "$sup" 2>/dev/null || { cat "$work/fleet.err" >&2; die "fleet up ended early"; }
  sleep 0.1
done
[ $((working + stopped)) = "$lanes" ] && [ "$working" -gt 0 ] ||
  { (cd "$repo" && "$spice" fleet status) >&2; die "only $working of $lanes lanes working after 60 s"; }
# A lane that failed to start is reported, and the figures are per running lane.
jq -r '.lanes[] | select(.state == "stopped") | "warning: lane \(.lane) failed at startup: \(.last_error)"' <<< "$status" >&2
run_lanes=$working
t_ready=$EPOCHREALTIME
startup_cpu=$(cpu_seconds "$sup")
startup_rss=$(status_kb "$sup" VmRSS)
sleep 2 # let the first scans of each transcript settle

base_ns() { local s; for s in "${scripts[@]}"; do thread_ns "$s"; done | awk '{ n += $3 } END { print n + 0 }'; }
base_rss() { local s n=0; for s in "${scripts[@]}"; do n=$((n + $(status_kb "$s" VmRSS))); done; echo $n; }
t0=$EPOCHREALTIME
cpu0=$(cpu_seconds "$sup"); thread_ns "$sup" > "$work/threads0"; b0=$(base_ns)
rss_sum=0; rss_max=0; brss_sum=0; samples=0
end=$(echo "$t0 + $secs" | bc)
while [ "$(echo "$EPOCHREALTIME < $end" | bc)" = 1 ]; do
  r=$(status_kb "$sup" VmRSS); br=$(base_rss)
  rss_sum=$((rss_sum + r)); brss_sum=$((brss_sum + br)); samples=$((samples + 1))
  [ "$r" -gt "$rss_max" ] && rss_max=$r
  sleep 1
done
t1=$EPOCHREALTIME
cpu1=$(cpu_seconds "$sup"); thread_ns "$sup" > "$work/threads1"; b1=$(base_ns)
alive=0; for s in "${scripts[@]}"; do pgrep -P "$s" > /dev/null && alive=$((alive + 1)); done
hwm=$(status_kb "$sup" VmHWM); threads=$(wc -l < "$work/threads1")
still=$(cd "$repo" && "$spice" fleet status --json | jq '[.lanes[] | select(.state == "working")] | length')

sup_pid=$sup
if [ -n "${PERF:-}" ]; then # optional: where the supervisor's CPU goes, after the window
  perf record -q -F 4999 --call-graph dwarf,16384 -p "$sup" -o "$work/perf.data" -- sleep "$PERF" > /dev/null 2>&1
  # Inclusive time (children) of the spice functions and SQLite's entry points.
  perf report -i "$work/perf.data" --stdio --children --percent-limit 3 -g none --sort sym 2> /dev/null |
    grep -v '(inlined)' | grep -E 'spice::|sqlite3_(prepare|step)|rusqlite' | head -25 > "$work/perf.txt"
fi
td=$(date +%s.%N); (cd "$repo" && "$spice" fleet down) > /dev/null; wait "$sup" || true; down=$(echo "$(date +%s.%N) - $td" | bc)
sup=
stop_baseline
left=$(leftovers)

win=$(echo "$t1 - $t0" | bc)
lm=$(echo "$run_lanes * $win / 60" | bc -l) # lane-minutes in the window
cpu=$(echo "$cpu1 - $cpu0" | bc)
bcpu=$(echo "($b1 - $b0) / 1000000000" | bc -l)
rss_avg=$((rss_sum / samples)); brss_avg=$((brss_sum / samples))
# Where the supervisor's CPU went, per thread kind (schedstat ns, live threads).
split=$(join <(sort "$work/threads0") <(sort "$work/threads1") | awk -v pid="$sup_pid" '
  { d = $5 - $3; kind = ($1 == pid) ? "main" : ($2 ~ /^agent-pty/ ? "pty readers" : "lanes"); k[kind] += d; t += d }
  END { for (x in k) printf "%s %.0f%%, ", x, (t ? 100 * k[x] / t : 0) }')
printf 'supervisor cost, %d of %d demo lanes running, %.0f s window after they were all working (%d lanes still working, %d baseline agents still running at its end):\n' "$run_lanes" "$lanes" "$win" "$still" "$alive"
if [ "$(echo "$bcpu > 0" | bc)" = 1 ]; then
  ratio=$(printf '%.0fx' "$(echo "$cpu / $bcpu" | bc -l)")
else
  ratio="unbounded (the baseline used no CPU at all: script sleeps in poll while its agent is silent)"
fi
printf '  CPU: spice fleet up %.2f s = %.4f CPU-s per running lane-minute (%.2f%% of one core); baseline %d x script %.6f s = %.6f CPU-s per lane-minute; ratio %s\n' \
  "$cpu" "$(echo "$cpu / $lm" | bc -l)" "$(echo "100 * $cpu / $win" | bc -l)" "$lanes" "$bcpu" "$(echo "$bcpu / ($lanes * $win / 60)" | bc -l)" "$ratio"
printf '  RSS: spice fleet up %.1f MB mean, %.1f MB max, %.1f MB peak (VmHWM) = %.2f MB per running lane; baseline %d x script %.1f MB = %.2f MB per lane; per-lane ratio %.1fx\n' \
  "$(echo "$rss_avg / 1024" | bc -l)" "$(echo "$rss_max / 1024" | bc -l)" "$(echo "$hwm / 1024" | bc -l)" "$(echo "$rss_avg / 1024 / $run_lanes" | bc -l)" \
  "$lanes" "$(echo "$brss_avg / 1024" | bc -l)" "$(echo "$brss_avg / 1024 / $lanes" | bc -l)" "$(echo "($rss_avg / $run_lanes) / ($brss_avg / $lanes)" | bc -l)"
printf '  supervisor threads: %d; its CPU in the window by thread: %s\n' "$threads" "${split%, }"
printf '  startup (launch to %d lanes working): %.2f s wall, %.2f CPU-s, RSS %.1f MB; fleet down: %.2f s\n' \
  "$run_lanes" "$(echo "$t_ready - $t_launch" | bc)" "$startup_cpu" "$(echo "$startup_rss / 1024" | bc -l)" "$down"
printf '  processes left behind after fleet down and the baseline stopped (cwd or command line in the temp dir, e.g. demo-agent): %s\n' "${left:-none}"
ticks=$(echo "$run_lanes * $win * 4" | bc) # each lane loop ticks every 250 ms
printf '  per lane tick (4 a second per lane): %.0f us of supervisor CPU\n' "$(echo "1000000 * $cpu / $ticks" | bc -l)"
[ -s "$work/perf.txt" ] && { echo "  perf, ${PERF} s after the window (inclusive time, share of the supervisor's samples):"; sed 's/^/    /' "$work/perf.txt"; }
exit 0
