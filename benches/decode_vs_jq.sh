#!/usr/bin/env bash
# Benchmark: transcript decode throughput against `jq -c .` on the same bytes, and
# peak memory. Builds a >= 100 MB file by concatenating the real public samples in
# ../shared/fixtures/transcripts (one agent per file, since a file has one format),
# runs `spice watch --once --json` (decode + normalise + print, streaming) and `jq -c .`
# alternately, and reports medians and the ratio.
# usage: benches/decode_vs_jq.sh [MB] [runs]      needs: cargo build --release, jq
set -euo pipefail
cd "$(dirname "$0")/.."
mb=${1:-100}; runs=${2:-5}
spice=target/release/spice
src=${SPICE_TRANSCRIPTS:-../shared/fixtures/transcripts}
[ -x "$spice" ] || { echo "build first: cargo build --release" >&2; exit 2; }
command -v jq >/dev/null || { echo "jq is needed: apt-get install jq" >&2; exit 2; }
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT

build() { # agent glob… → file of at least $mb MB
  local out=$1; shift
  : > "$out"
  while [ "$(stat -c %s "$out")" -lt $((mb * 1024 * 1024)) ]; do
    for f in "$@"; do cat "$f" >> "$out"; done
  done
}
build "$work/claude.jsonl" "$src"/claude/*.jsonl "$src"/current/claude-*.jsonl
build "$work/codex.jsonl" "$src"/codex/v0.1*.jsonl "$src"/codex/v0.[57]*.jsonl "$src"/current/codex-*.jsonl

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
now() { date +%s.%N; }
for agent in claude codex; do
  f="$work/$agent.jsonl"; size=$(stat -c %s "$f")
  : > "$work/s"; : > "$work/j"
  for _ in $(seq "$runs"); do
    t0=$(now); "$spice" watch --once --json "$f" > /dev/null; t1=$(now)
    echo "$t1 - $t0" | bc >> "$work/s"
    t0=$(now); jq -c . "$f" > /dev/null; t1=$(now)
    echo "$t1 - $t0" | bc >> "$work/j"
  done
  s=$(median < "$work/s"); j=$(median < "$work/j")
  mem=$( { /usr/bin/time -f %M "$spice" watch --once --json "$f" > /dev/null; } 2>&1 | tail -1)
  longest=$(awk '{ if (length($0) > m) m = length($0) } END { print m }' "$f")
  printf '%s: %d MB, spice %.2fs (%.0f MB/s), jq %.2fs (%.0f MB/s), speed-up %.1fx; peak RSS %d MB, longest line %.1f MB\n' \
    "$agent" $((size / 1048576)) "$s" "$(echo "$size / $s / 1048576" | bc -l)" "$j" "$(echo "$size / $j / 1048576" | bc -l)" \
    "$(echo "$j / $s" | bc -l)" $((mem / 1024)) "$(echo "$longest / 1048576" | bc -l)"
done
