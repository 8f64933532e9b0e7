#!/usr/bin/env bash
# Benchmark: what a client attached with `spice fleet attach` costs the supervisor
# while its agent is quiet. Two supervisors run side by side, each on its own scratch
# repository and state directory with one lane of the built-in demo profile, whose
# agent waits for the operator before it starts (the demo's wait marker): a quiet
# agent under a PTY. A client attaches to the first (stdin a FIFO held open, so it
# neither types nor detaches); the second stays detached. Over a window of SECONDS the
# CPU of each supervisor (utime + stime of /proc/PID/stat, every thread) is read, and
# the two are printed with their ratio. Before the attach fix the attached one spun at
# half a core or more; now both are the lane's 250 ms ticks, a few clock ticks (10 ms
# each) in 10 s, so their ratio is mostly that rounding. (schedstat would be finer, but
# not every kernel fills it in.)
#
# usage: benches/attach_cpu.sh [SECONDS]      (default 10)
#        SPICE=target/debug/spice benches/attach_cpu.sh   to measure another build
# needs: cargo build --release (or SPICE=…), git, jq, bc
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-10}
spice=$(realpath "${SPICE:-target/release/spice}")
[ -x "$spice" ] || { echo "build first: cargo build --release (or set SPICE)" >&2; exit 2; }
for c in git jq bc; do command -v $c >/dev/null || { echo "$c is needed" >&2; exit 2; }; done
work=$(mktemp -d /tmp/spice-attach-cpu.XXXXXX)
. benches/fleet_common.sh
export HOME=$work/home
unset SPICE_HOME SPICE_LANE SPICE_SESSION SPICE_TASK BASH_ENV
mkdir -p "$HOME"
sups=(); client=

# in_fleet NAME CMD…: CMD in fleet NAME's repository, with its state, in the foreground.
in_fleet() {
  local name=$1; shift
  (cd "$work/$name" && SPICE_HOME=$work/$name-state exec "$@")
}

cleanup() {
  set +e
  [ -n "$client" ] && { printf '\035' >&3; wait_gone "$client" 5 || kill -TERM "$client"; }
  for name in attached detached; do in_fleet "$name" "$spice" fleet down >/dev/null 2>&1; done
  for s in "${sups[@]}"; do wait_gone "$s" 20 || kill -TERM "$s"; done
  reap_leftovers
  rm -rf "$work"
}
trap cleanup EXIT

for name in attached detached; do
  fleet_repo "$work/$name" 1 demo 5m
  commit_config "$work/$name"
  in_fleet "$name" "$spice" task add "Wait for the operator" --project demo \
    --body "demo: wait for the operator" >/dev/null
  # Not through in_fleet: $! must be the supervisor itself, not a shell around it.
  (cd "$work/$name" && SPICE_HOME=$work/$name-state exec "$spice" fleet up \
    >"$work/$name.out" 2>"$work/$name.err") &
  sups+=($!)
done

lane_state() { in_fleet "$1" "$spice" fleet status --json | jq -r '.lanes[0].state'; }
for _ in $(seq 600); do # up to 60 s for both agents to wait for input
  [ "$(lane_state attached)" = waiting ] && [ "$(lane_state detached)" = waiting ] && break
  for s in "${sups[@]}"; do kill -0 "$s" 2>/dev/null || die "a supervisor ended early: $(cat "$work"/*.err)"; done
  sleep 0.1
done
[ "$(lane_state attached)" = waiting ] && [ "$(lane_state detached)" = waiting ] ||
  die "the demo agents are not both waiting after 60 s"

mkfifo "$work/keys"
exec 3<>"$work/keys"
(cd "$work/attached" && SPICE_HOME=$work/attached-state exec "$spice" fleet attach l1 \
  <"$work/keys" >"$work/client.out" 2>&1) &
client=$!
for _ in $(seq 100); do grep -q "attached to lane l1" "$work/client.out" && break; sleep 0.1; done
grep -q "attached to lane l1" "$work/client.out" || die "the client did not attach: $(cat "$work/client.out")"
sleep 1 # let the attach (the screen's tail sent) settle before the window

a0=$(cpu_seconds "${sups[0]}"); d0=$(cpu_seconds "${sups[1]}"); t0=$EPOCHREALTIME
sleep "$secs"
a1=$(cpu_seconds "${sups[0]}"); d1=$(cpu_seconds "${sups[1]}"); t1=$EPOCHREALTIME
kill -0 "$client" 2>/dev/null || die "the client left during the window: $(cat "$work/client.out")"
[ "$(lane_state attached)" = waiting ] && [ "$(lane_state detached)" = waiting ] ||
  die "an agent stopped waiting during the window"
for s in "${sups[@]}"; do
  case $(tr '\0' ' ' < "/proc/$s/cmdline") in *" fleet up "*) ;; *) die "pid $s is not a supervisor" ;; esac
done

win=$(echo "$t1 - $t0" | bc)
pct() { echo "100 * ($2 - $1) / $win" | bc -l; }
att=$(pct "$a0" "$a1"); det=$(pct "$d0" "$d1")
printf 'supervisor CPU over %.1f s, one demo lane whose agent waits for input (%s):\n' "$win" "$spice"
printf '  attached (a client on its terminal): %.2f CPU-s = %.2f%% of a core\n' "$(echo "$a1 - $a0" | bc)" "$att"
printf '  detached:                            %.2f CPU-s = %.2f%% of a core\n' "$(echo "$d1 - $d0" | bc)" "$det"
if [ "$(echo "$d1 > $d0" | bc)" = 1 ]; then
  printf '  ratio attached / detached: %.2fx\n' "$(echo "($a1 - $a0) / ($d1 - $d0)" | bc -l)"
else
  echo "  ratio attached / detached: unbounded (the detached supervisor used no CPU)"
fi
echo "  (/proc counts CPU in ticks of 1/$(getconf CLK_TCK) s: a tick or two either way is rounding)"
