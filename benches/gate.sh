#!/usr/bin/env bash
# The gate's cost, each figure against a baseline run side by side:
#  1. `spice gate check --all` with file caps alone, in files per second, against
#     `git ls-files -z | xargs -0 wc -l` on the same tree (ratio; goal >= 0.5), on this
#     project's own tree and on a generated tree of N files (default 50,000);
#  2. the same with routine caps (tree-sitter parses every Rust/Python/JS/TS/Go file);
#  3. the time the hooks add to `git commit` of a 10-file change (goal < 50 ms without
#     repository checks): the same commit with and without `spice gate install`.
# Usage: SPICE=target/release/spice benches/gate.sh [FILES] [RUNS]
set -euo pipefail
cd "$(dirname "$0")/.."
SPICE="${SPICE:-target/release/spice}"
SPICE="$(cd "$(dirname "$SPICE")" && pwd)/$(basename "$SPICE")"
FILES="${1:-50000}"
RUNS="${2:-5}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# Median wall seconds of RUNS runs of "$@".
median() {
  local times=()
  for _ in $(seq "$RUNS"); do
    local t0 t1
    t0=$(date +%s.%N)
    "$@" >/dev/null 2>&1 || true
    t1=$(date +%s.%N)
    times+=("$(echo "$t1 - $t0" | bc -l)")
  done
  printf '%s\n' "${times[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'
}

caps='[gate]
[gate.files]
default = { lines = 100000, bytes = 100000000 }
'
routines="$caps"'[gate.routines]
lines = 100000
complexity = 100000
'

measure() { # name dir
  local name="$1" dir="$2" n
  n=$(git -C "$dir" ls-files | wc -l)
  local base ours rout
  base=$(cd "$dir" && median sh -c 'git ls-files -z | xargs -0 wc -l')
  printf '%s' "$caps" > "$dir/spice.toml"
  ours=$(cd "$dir" && median "$SPICE" gate check --all)
  printf '%s' "$routines" > "$dir/spice.toml"
  rout=$(cd "$dir" && median "$SPICE" gate check --all)
  rm -f "$dir/spice.toml"
  awk -v name="$name" -v n="$n" -v b="$base" -v o="$ours" -v r="$rout" 'BEGIN {
    printf "%s: %d files\n", name, n
    printf "  wc -l baseline       %8.3f s  %9.0f files/s\n", b, n / b
    printf "  gate, file caps      %8.3f s  %9.0f files/s  ratio %.2f (goal >= 0.5)\n", o, n / o, b / o
    printf "  gate, + routine caps %8.3f s  %9.0f files/s  ratio %.2f\n", r, n / r, b / r
  }'
}

# 1 and 2: this project's tree, then a generated one.
git clone -q --no-hardlinks . "$work/self"
measure "this project" "$work/self"
mkdir -p "$work/gen" && cd "$work/gen" && git init -q && python3 - "$FILES" <<'EOF'
import os, sys
n = int(sys.argv[1])
for i in range(n):
    d = f"d{i % 200}/e{i % 13}"
    os.makedirs(d, exist_ok=True)
    ext = [".rs", ".py", ".ts", ".md", ".txt"][i % 5]
    body = "".join(f"fn f{j}() {{ if {j} > 1 {{ return; }} }}\n" if ext == ".rs" else f"line {j} of file {i}\n" for j in range(40))
    with open(f"{d}/f{i}{ext}", "w") as f:
        f.write(body)
EOF
git add -A && git -c user.name=b -c user.email=b@b commit -qm files
cd - >/dev/null
measure "generated" "$work/gen"

# 3: a 10-file commit with and without the hooks.
commit_time() { # dir hooks?
  local dir="$1" times=()
  for r in $(seq "$RUNS"); do
    for i in $(seq 10); do echo "change $r" >> "$dir/f$i.txt"; done
    git -C "$dir" add -A
    local t0 t1
    t0=$(date +%s.%N)
    git -C "$dir" -c user.name=b -c user.email=b@b commit -qm "change $r"
    t1=$(date +%s.%N)
    times+=("$(echo "$t1 - $t0" | bc -l)")
  done
  printf '%s\n' "${times[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'
}
for kind in plain hooked task; do
  d="$work/commit-$kind"
  mkdir -p "$d" && git -C "$d" init -q
  printf '%s' "$routines" > "$d/spice.toml"
  for i in $(seq 10); do echo start > "$d/f$i.txt"; done
  git -C "$d" add -A && git -C "$d" -c user.name=b -c user.email=b@b commit -qm start
  if [ "$kind" != plain ]; then (cd "$d" && "$SPICE" gate install >/dev/null); fi
done
plain=$(commit_time "$work/commit-plain")
hooked=$(commit_time "$work/commit-hooked")
# As in a fleet: a task's worktree, whose hooks add the trailers and record each run
# in the task's ledger (a real store).
export SPICE_HOME="$work/state"
task=$(cd "$work/commit-task" && "$SPICE" task add "Benchmark" --project bench | grep -o '[A-Za-z0-9]*$')
export SPICE_TASK="$task" SPICE_SESSION="bench-session" SPICE_LANE="bench"
task_t=$(commit_time "$work/commit-task")
unset SPICE_HOME SPICE_TASK SPICE_SESSION SPICE_LANE
runs=$(cd "$work/commit-task" && SPICE_HOME="$work/state" "$SPICE" task ledger "$task" --json | grep -o '"gate_run"' | wc -l)
awk -v p="$plain" -v h="$hooked" -v t="$task_t" -v n="$runs" 'BEGIN {
  printf "10-file commit: without hooks %.1f ms, with the gate hooks %.1f ms: the hooks add %.1f ms (goal < 50)\n", p*1000, h*1000, (h-p)*1000
  printf "  in a task worktree (trailers, each run in the ledger: %d recorded) %.1f ms: the hooks add %.1f ms\n", n, t*1000, (t-p)*1000
}'
