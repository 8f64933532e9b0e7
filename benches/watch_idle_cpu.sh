#!/usr/bin/env bash
# Benchmark: what `spice watch` costs while the files it follows are quiet. FILES small
# Claude Code transcripts (default 1000) are written to a scratch directory, then
# followed side by side, each by its own process:
#   - `spice watch DIR`             (the directory's whole tree)
#   - `spice watch FILE…`           (every file named)
#   - `tail -F -n 0 FILE…`          (the baseline: GNU tail, inotify, by name)
#   - `$BASELINE watch DIR`         (only when BASELINE names another spice build, e.g.
#                                    one from before inotify, which re-read every file
#                                    and re-listed the tree every 250 ms)
# Once every spice process has printed every file's first prompt, the CPU of each
# (utime + stime of /proc/PID/stat, every thread) is read over a window of SECONDS in
# which nothing is written, and printed with its ratio to tail's. Each has its own copy
# of the files (one process's opens would wake the others' watches). A last check
# appends a line to one file of each and waits for it to be printed: quiet is not dead.
#
# usage: benches/watch_idle_cpu.sh [SECONDS] [FILES]      (default 20, 1000)
#        SPICE=target/debug/spice BASELINE=/tmp/spice-old benches/watch_idle_cpu.sh
# needs: cargo build --release (or SPICE=…), GNU tail, bc
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-20}
files=${2:-1000}
spice=$(realpath "${SPICE:-target/release/spice}")
[ -x "$spice" ] || { echo "build first: cargo build --release (or set SPICE)" >&2; exit 2; }
baseline=${BASELINE:+$(realpath "$BASELINE")}
for c in tail bc; do command -v $c >/dev/null || { echo "$c is needed" >&2; exit 2; }; done
work=$(mktemp -d /tmp/spice-watch-cpu.XXXXXX)
. benches/fleet_common.sh
pids=()
cleanup() {
  set +e
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT
ulimit -n "$(ulimit -Hn)" # tail -F holds every file open, as spice does

mkdir -p "$work/dir/sub"
line() { # line N TEXT: a Claude Code user line
  printf '{"type":"user","uuid":"u%s","parentUuid":null,"sessionId":"s%s","cwd":"/w","version":"2.1.0","timestamp":"2026-11-29T12:00:00.000Z","message":{"role":"user","content":"%s"}}\n' "$1" "$1" "$2"
}
for i in $(seq "$files"); do
  d=$work/dir; [ $((i % 10)) = 0 ] && d=$work/dir/sub # a tree, not one flat directory
  line "$i" "idle prompt $i" > "$d/t$i.jsonl"
done
# Each follower has its own copy: one process opening files (the baseline's re-reads)
# must not wake the others' watches and be counted as theirs.
for c in 1 2 3 4; do cp -r "$work/dir" "$work/copy$c"; done
files_of() { find "$work/copy$1" -name '*.jsonl' | sort; }
mapfile -t all2 < <(files_of 2)
mapfile -t all3 < <(files_of 3)

names=(); outs=(); firsts=()
start() { # start NAME FIRST-FILE CMD…: in the background, stdout to $work/NAME.out
  local name=$1 first=$2; shift 2
  "$@" > "$work/$name.out" 2> "$work/$name.err" &
  pids+=($!); names+=("$name"); outs+=("$work/$name.out"); firsts+=("$first")
}
start "spice watch DIR" "$(files_of 1 | head -1)" "$spice" watch "$work/copy1"
start "spice watch FILE..." "${all2[0]}" "$spice" watch "${all2[@]}"
start "tail -F FILE..." "${all3[0]}" tail -F -n 0 "${all3[@]}"
[ -n "$baseline" ] && start "baseline watch DIR" "$(files_of 4 | head -1)" "$baseline" watch "$work/copy4"

for _ in $(seq 600); do # up to 60 s for every spice process to print every file
  ready=1
  for k in "${!names[@]}"; do
    case ${names[$k]} in tail*) continue ;; esac
    [ "$(grep -c 'idle prompt' "${outs[$k]}")" -ge "$files" ] || ready=0
  done
  [ "$ready" = 1 ] && break
  for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null || die "a follower ended early: $(cat "$work"/*.err)"; done
  sleep 0.1
done
[ "$ready" = 1 ] || die "not every spice process printed all $files files in 60 s"
sleep 1 # let the start (directory watches being added) settle before the window

c0=(); c1=()
for p in "${pids[@]}"; do c0+=("$(cpu_seconds "$p")"); done
t0=$EPOCHREALTIME
sleep "$secs"
for p in "${pids[@]}"; do c1+=("$(cpu_seconds "$p")"); done
t1=$EPOCHREALTIME
for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null || die "a follower ended during the window"; done

for k in "${!names[@]}"; do
  line 0 "wake up" >> "${firsts[$k]}"
  for _ in $(seq 100); do grep -q 'wake up' "${outs[$k]}" && break; sleep 0.1; done
  grep -q 'wake up' "${outs[$k]}" || die "${names[$k]} did not print a line appended after the window"
done

win=$(echo "$t1 - $t0" | bc)
tailcpu=; basecpu=
for k in "${!names[@]}"; do
  case ${names[$k]} in
    tail*) tailcpu=$(echo "${c1[$k]} - ${c0[$k]}" | bc) ;;
    baseline*) basecpu=$(echo "${c1[$k]} - ${c0[$k]}" | bc) ;;
  esac
done
printf 'CPU over %.1f s while %s transcripts are quiet (%s):\n' "$win" "$files" "$spice"
for k in "${!names[@]}"; do
  used=$(echo "${c1[$k]} - ${c0[$k]}" | bc)
  if [ "$(echo "$tailcpu > 0" | bc)" = 1 ]; then
    ratio=$(printf '%.1fx tail' "$(echo "$used / $tailcpu" | bc -l)")
  else
    ratio="tail used none"
  fi
  if [ -n "$basecpu" ] && [ "$(echo "$used > 0" | bc)" = 1 ]; then
    ratio="$ratio; baseline / this $(printf '%.1fx' "$(echo "$basecpu / $used" | bc -l)")"
  fi
  printf '  %-22s %6.2f CPU-s = %6.2f%% of a core   (%s)\n' "${names[$k]}" "$used" \
    "$(echo "100 * $used / $win" | bc -l)" "$ratio"
done
echo "  (/proc counts CPU in ticks of 1/$(getconf CLK_TCK) s: a tick or two either way is rounding)"
