#!/usr/bin/env bash
# The disk layer of test beds (spice::bed, through examples/bed_bench.rs), each figure
# against a baseline run side by side on the same filesystem:
#  1. time to seed a generated target/-like tree (FILES files, about MIB MiB) into a
#     fresh worktree, against `cp -a --reflink=auto` of the same tree followed by a
#     sync of that filesystem (a seeding syncs before it renames into place): ratio;
#  2. real disk added by one more seeded tree (given the template and one seeded tree
#     already there), against a cold copy (`cp -a --reflink=never`): ratio, from the
#     library's measure, and the filesystem's own free-space drop (df) as a check.
# On the local filesystem, and on loop-mounted btrfs and XFS (reflink=1) images when
# run as root with loop devices and mkfs.btrfs / mkfs.xfs (otherwise said and skipped).
# Usage: benches/bed.sh [FILES] [MIB] [RUNS]     (BED_BENCH=path skips the build)
set -euo pipefail
cd "$(dirname "$0")/.."
FILES="${1:-3000}"
MIB="${2:-300}"
RUNS="${3:-3}"
if [ -z "${BED_BENCH:-}" ]; then
  cargo build --locked --release --example bed_bench >&2
  BED_BENCH=target/release/examples/bed_bench
fi
BED_BENCH="$(cd "$(dirname "$BED_BENCH")" && pwd)/$(basename "$BED_BENCH")"
work="$(mktemp -d)"
mounts=()
loops=()
cleanup() {
  for m in "${mounts[@]}"; do umount "$m" 2>/dev/null || umount -l "$m" || true; done
  for l in "${loops[@]}"; do losetup -d "$l" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

# A target/-like tree: one file in 25 a large rlib-sized one, the rest small, in
# nested per-crate directories; incompressible bytes.
generate() { # dir
  python3 - "$1" "$FILES" "$MIB" <<'PY'
import os, sys
root, files, mib = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
large = max(1, files // 25)
small = files - large
small_size = 24 << 10
large_size = max(small_size, ((mib << 20) - small * small_size) // large)
for i in range(files):
    d = os.path.join(root, "target", "debug", "deps" if i % 25 == 0 else f".fingerprint/crate-{i // 50}")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, f"f{i}"), "wb") as f:
        f.write(os.urandom(large_size if i % 25 == 0 else small_size))
PY
}

now() { date +%s.%N; }
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
json() { python3 -c 'import json,sys; d=json.load(sys.stdin); print(eval(sys.argv[1], {}, {"d": d}))' "$1"; }
free_bytes() { sync -f "$1"; stat -f -c '%a %S' "$1" | awk '{printf "%.0f\n", $1 * $2}'; }

rows=()
bench() { # name dir
  local name="$1" dir="$2" tpl="$2/template"
  generate "$tpl"
  sync -f "$tpl"
  local seeds=() cps=() r t0 t1 method apparent
  for r in $(seq "$RUNS"); do
    mkdir "$dir/seed$r" "$dir/cp$r"
    t0=$(now)
    "$BED_BENCH" seed "$tpl" "$dir/seed$r" target >"$dir/report$r.json" 2>/dev/null
    t1=$(now)
    seeds+=("$(echo "$t1 - $t0" | bc -l)")
    t0=$(now)
    cp -a --reflink=auto "$tpl/target" "$dir/cp$r/" && sync -f "$dir/cp$r"
    t1=$(now)
    cps+=("$(echo "$t1 - $t0" | bc -l)")
  done
  method=$(json 'd["method"] + "".join(f" {k}={v}" for k, v in d["total"]["by_method"].items())' <"$dir/report1.json")
  local seed_s cp_s
  seed_s=$(printf '%s\n' "${seeds[@]}" | median)
  cp_s=$(printf '%s\n' "${cps[@]}" | median)
  for r in $(seq 2 "$RUNS"); do rm -rf "$dir/seed$r" "$dir/cp$r"; done
  rm -rf "$dir/cp1"
  # One more seeded tree, and one cold copy, each given the template and seed1.
  local f0 f1 f2 f3 seed_df cold_df seed_real cold_real
  mkdir "$dir/extra" "$dir/cold"
  f0=$(free_bytes "$dir")
  "$BED_BENCH" seed "$tpl" "$dir/extra" target >/dev/null 2>&1
  f1=$(free_bytes "$dir")
  cp -a --reflink=never "$tpl/target" "$dir/cold/"
  f2=$(free_bytes "$dir")
  seed_df=$((f0 - f1))
  cold_df=$((f1 - f2))
  "$BED_BENCH" usage "$dir/extra/target" --given "$tpl/target" --given "$dir/seed1/target" >"$dir/extra.json"
  "$BED_BENCH" usage "$dir/cold/target" --given "$tpl/target" --given "$dir/seed1/target" >"$dir/cold.json"
  seed_real=$(json 'd["real"]' <"$dir/extra.json")
  cold_real=$(json 'd["real"]' <"$dir/cold.json")
  apparent=$(json 'd["apparent"]' <"$dir/extra.json")
  rows+=("$(awk -v n="$name" -v m="$method" -v s="$seed_s" -v c="$cp_s" -v a="$apparent" \
    -v sr="$seed_real" -v cr="$cold_real" -v sd="$seed_df" -v cd="$cold_df" 'BEGIN {
      M = 1048576
      printf "%-6s %-34s %8.3f %8.3f %6.2f | %8.1f %9.2f %9.1f %7.4f | %9.2f %9.1f\n", n, m, s, c, s / c,
        a / M, sr / M, cr / M, (cr > 0 ? sr / cr : 0), sd / M, cd / M
    }')")
  rm -rf "$dir/extra" "$dir/cold" "$dir/seed1" "$tpl"
}

# A loop-mounted filesystem of kind $1 (btrfs, xfs) on a fresh image; prints its mount.
loopfs() {
  local kind="$1" img="$work/$1.img" mnt="$work/$1" dev
  truncate -s "$(( MIB * 4 + 1024 ))M" "$img"
  dev=$(losetup --find --show "$img")
  loops+=("$dev")
  case "$kind" in
    btrfs) mkfs.btrfs -q "$dev" >/dev/null ;;
    xfs) mkfs.xfs -q -m reflink=1 "$dev" >/dev/null ;;
  esac
  mkdir "$mnt"
  mount "$dev" "$mnt"
  mounts+=("$mnt")
}

mkdir "$work/local"
echo "generating $FILES files, about $MIB MiB, $RUNS runs per figure (load: $(cut -d' ' -f1-3 /proc/loadavg))" >&2
bench "$(findmnt -n -o FSTYPE -T "$work/local" 2>/dev/null || stat -f -c %T "$work/local")" "$work/local"
for kind in btrfs xfs; do
  if [ "$(id -u)" != 0 ] || [ ! -e /dev/loop-control ] || ! command -v "mkfs.$kind" >/dev/null 2>&1; then
    echo "skipping $kind: needs root, loop devices and mkfs.$kind" >&2
    continue
  fi
  loopfs "$kind"
  bench "$kind" "$work/$kind"
done

echo
printf '%-6s %-34s %8s %8s %6s | %8s %9s %9s %7s | %9s %9s\n' fs "method (files by method)" "seed s" "cp -a s" ratio \
  "tree MiB" "+seed MiB" "+cold MiB" ratio "df +seed" "df +cold"
printf '%s\n' "${rows[@]}"
echo
echo "seed s: median wall time of spice::bed::seed (syncs before renaming); cp -a s: cp -a --reflink=auto + sync -f"
echo "+seed / +cold MiB: real bytes one more tree adds given the template and one seeded tree (spice::bed::added);"
echo "ratio: +seed / +cold; df: the filesystem's free space drop for the same two trees"
