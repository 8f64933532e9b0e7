#!/usr/bin/env bash
# Benchmark: time from launching `spice fleet up` to the first agent running, i.e. its
# first transcript line written (the demo agent writes its brief as line 1 the moment
# it starts, where Claude Code would). Milestones on the way come from the task's
# ledger (`spice task show ID --json`): `claimed` (config loaded, store opened, lock
# taken, task allocated) and `launched` (worktree created, brief written, agent spawned
# under its PTY with its recording).
#
# Each run gets a fresh copy of a scratch repository (LANES lanes of the built-in demo
# profile with `--command-seconds 30`, one task per lane, the store already created by
# `task add`), a fresh state directory and agent HOME; the transcript directory is
# polled every millisecond (no fork per poll), then `spice fleet down` ends the run.
# With several lanes the first agent of any lane counts. `launched` is noted after the
# spawn returns, so with several lanes writing to the store at once it can come after
# the agent's own first line.
#
# Baseline, alternating with it: the same demo agent started directly
# (`setsid spice demo-agent --session-id … --brief-file …` in a worktree of the same
# repository, no supervisor, no PTY) until its first transcript line, polled the same
# way. The ratio and the difference say what the supervisor adds before an agent runs.
#
# usage: benches/fleet_first_agent.sh [RUNS] [LANES]     (default 10 runs, 1 lane)
# needs: cargo build --release, git, jq
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-10}; lanes=${2:-1}
spice=$PWD/target/release/spice
[ -x "$spice" ] || { echo "build first: cargo build --release" >&2; exit 2; }
for c in git jq; do command -v $c >/dev/null || { echo "$c is needed" >&2; exit 2; }; done
work=$(mktemp -d /tmp/spice-first-agent.XXXXXX)
. benches/fleet_common.sh
unset SPICE_LANE SPICE_SESSION SPICE_TASK BASH_ENV
sup=; agent=; repo=

cleanup() {
  set +e
  if [ -n "$sup" ] && kill -0 "$sup" 2>/dev/null; then
    (cd "$repo" && "$spice" fleet down) >/dev/null 2>&1 || kill -TERM "$sup"
    wait_gone "$sup" 20
  fi
  [ -n "$agent" ] && kill -TERM -- "-$agent" 2>/dev/null
  reap_leftovers
  rm -rf "$work"
}
trap cleanup EXIT

fleet_repo "$work/template" "$lanes" slowdemo 5m
slow_demo_profile "$work/template" slowdemo 30
commit_config "$work/template"
# A 1 ms nap without a fork: a read that times out on a FIFO nobody writes.
mkfifo "$work/nap"; exec {nap}<> "$work/nap"

# Waits up to 30 s for a non-empty transcript under $HOME/.claude/projects; sets `seen`
# to the moment, in microseconds since the epoch.
wait_transcript() {
  local f limit=$(( ${EPOCHREALTIME/./} + 30000000 ))
  while :; do
    for f in "$HOME"/.claude/projects/*/*.jsonl; do
      [ -s "$f" ] && { seen=${EPOCHREALTIME/./}; return 0; }
    done
    [ "${EPOCHREALTIME/./}" -lt "$limit" ] || return 1
    read -r -t 0.001 -u "$nap" _ || true
  done
}

us() { date -d "$1" +%s%6N; } # an RFC 3339 ledger time in microseconds
median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }

: > "$work/claimed"; : > "$work/launched"; : > "$work/fleet"; : > "$work/direct"
for run in $(seq "$runs"); do
  dir=$work/r$run
  mkdir -p "$dir"
  cp -a "$work/template" "$dir/repo"
  repo=$dir/repo
  export HOME=$dir/home SPICE_HOME=$dir/spice
  mkdir -p "$HOME"
  ids=()
  for i in $(seq "$lanes"); do
    ids+=("$(cd "$repo" && "$spice" task add "Task $i of run $run" --project demo)")
  done

  t0=${EPOCHREALTIME/./}
  (cd "$repo" && exec "$spice" fleet up > "$dir/fleet.out" 2> "$dir/fleet.err") &
  sup=$!
  wait_transcript || { cat "$dir/fleet.err" >&2; die "run $run: no transcript from fleet up after 30 s"; }
  echo $((seen - t0)) >> "$work/fleet"
  (cd "$repo" && "$spice" fleet down > /dev/null)
  wait "$sup" || true; sup=
  first() { # the earliest ledger entry of KIND over this run's tasks, in µs after t0
    local id at best=
    for id in "${ids[@]}"; do
      at=$(cd "$repo" && "$spice" task show "$id" --json | jq -r --arg k "$1" '[.ledger[] | select(.kind == $k) | .at][0] // empty')
      [ -n "$at" ] || continue
      at=$(us "$at")
      [ -z "$best" ] || [ "$at" -lt "$best" ] && best=$at
    done
    echo $((best - t0))
  }
  first claimed >> "$work/claimed"
  first launched >> "$work/launched"

  # Baseline: the agent alone, in a worktree of the same repository, fresh HOME.
  export HOME=$dir/home-direct
  mkdir -p "$HOME"
  git -C "$repo" worktree add -q --detach "$dir/direct"
  printf 'Task 1 of run %s: do the demo task.\n' "$run" > "$dir/brief.md"
  sid=$(cat /proc/sys/kernel/random/uuid)
  t0=${EPOCHREALTIME/./}
  (cd "$dir/direct" && exec setsid "$spice" demo-agent --session-id "$sid" --brief-file "$dir/brief.md" \
     --command-seconds 30 > /dev/null 2>&1) &
  agent=$!
  wait_transcript || die "run $run: the demo agent wrote no transcript in 30 s"
  echo $((seen - t0)) >> "$work/direct"
  kill -TERM -- "-$agent" 2>/dev/null || true
  wait "$agent" 2>/dev/null || true; agent=
done
left=$(leftovers)

ms() { echo "scale=1; $(median < "$work/$1") / 1000" | bc; }
f=$(ms fleet); d=$(ms direct)
printf 'time from `spice fleet up` to the first agent running, %d lane(s), median of %d runs:\n' "$lanes" "$runs"
printf '  fleet up: claimed %s ms, launched %s ms, first transcript line %s ms (runs: %s)\n' \
  "$(ms claimed)" "$(ms launched)" "$f" "$(awk '{ printf "%s%.0f", (NR > 1 ? " " : ""), $1 / 1000 }' "$work/fleet")"
printf '  baseline, spice demo-agent started directly: first transcript line %s ms (runs: %s)\n' \
  "$d" "$(awk '{ printf "%s%.0f", (NR > 1 ? " " : ""), $1 / 1000 }' "$work/direct")"
printf '  ratio fleet/direct %.1fx; the supervisor adds %.1f ms before the agent runs\n' \
  "$(echo "$f / $d" | bc -l)" "$(echo "$f - $d" | bc -l)"
printf '  processes left behind (cwd or command line in the temp dir, e.g. demo-agent): %s\n' "${left:-none}"
