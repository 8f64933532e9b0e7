#!/usr/bin/env bash
# Test beds: the time from a new worktree to its first test run finishing, seeded
# from a warm template against a cold worktree, side by side (ratio; goal <= 0.1), and
# the real disk each adds (`spice bed status`), plus the time to seed.
#  - the fixture: a crate with crates.io dependencies from the local cargo cache
#    (serde, serde_json, regex, itoa, memchr), offline;
#  - with --self, this project too (its warm is a full `cargo test --no-run`: minutes).
# Usage: SPICE=target/release/spice benches/bed_first_test.sh [--self]
set -euo pipefail
cd "$(dirname "$0")/.."
SPICE="${SPICE:-target/release/spice}"
SPICE="$(cd "$(dirname "$SPICE")" && pwd)/$(basename "$SPICE")"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
unset CARGO_TARGET_DIR

secs() { local t0 t1; t0=$(date +%s.%N); "$@" >/dev/null 2>&1; t1=$(date +%s.%N); echo "$t1 - $t0" | bc -l; }

run_case() { # name repo test-command...
  local name="$1" repo="$2"; shift 2
  (cd "$repo" && SPICE_HOME="$work/state-$name" "$SPICE" bed warm >/dev/null 2>"$work/warm-$name.log") \
    || { cat "$work/warm-$name.log"; exit 1; }
  git -C "$repo" worktree add -q --detach "$work/$name-cold" HEAD
  git -C "$repo" worktree add -q --detach "$work/$name-seeded" HEAD
  local t_seed
  t_seed=$(cd "$repo" && "$SPICE" bed seed --json "$work/$name-seeded" | python3 -c '
import json, sys
d = json.load(sys.stdin)
assert d["seeded"], d
print(d["seconds"])')
  local cold seeded
  cold=$(cd "$work/$name-cold" && secs "$@")
  seeded=$(cd "$work/$name-seeded" && secs "$@")
  local real_cold real_seed
  real_cold=$(du -s --block-size=1 "$work/$name-cold/target" | cut -f1)
  real_seed=$(cd "$repo" && "$SPICE" bed status --json | python3 -c '
import json, sys
d = json.load(sys.stdin)
print(d["total"]["real"])')
  awk -v n="$name" -v c="$cold" -v s="$seeded" -v t="$t_seed" -v rc="$real_cold" 'BEGIN {
    printf "%s: first test run cold %.2f s, seeded %.2f s: ratio %.3f (goal <= 0.1); seeding took %.2f s\n", n, c, s, s / c, t
    printf "  a cold worktree'"'"'s target/: %.1f MiB of disk\n", rc / 1048576
  }'
}

# The fixture crate.
fx="$work/fixture"
mkdir -p "$fx/src" && cd "$fx" && git init -q -b main
cat > Cargo.toml <<'TOML'
[package]
name = "bedfixture"
version = "0.1.0"
edition = "2021"

[dependencies]
serde = { version = "1", features = ["derive"] }
serde_json = "1"
regex = "1"
itoa = "1"
memchr = "2"
TOML
cat > src/lib.rs <<'RS'
#[derive(serde::Serialize, serde::Deserialize)]
pub struct P { pub n: u64 }
pub fn go(s: &str) -> bool { regex::Regex::new("^a+$").unwrap().is_match(s) }
#[cfg(test)]
mod tests {
    #[test]
    fn t() {
        assert!(super::go("aaa"));
        let p: super::P = serde_json::from_str("{\"n\": 3}").unwrap();
        assert_eq!(p.n, 3);
    }
}
RS
printf 'target/\n' > .gitignore
printf '[testbed]\npaths = ["target"]\nwarm = [["cargo", "test", "--offline", "--no-run"]]\nkey = ["Cargo.lock"]\n' > spice.toml
cargo generate-lockfile --offline -q
git add -A && git -c user.name=b -c user.email=b@b commit -qm fixture
cd - >/dev/null
run_case fixture "$fx" cargo test --offline -q

if [ "${1:-}" = "--self" ]; then
  self="$work/self"
  git clone -q --no-hardlinks . "$self"
  printf '[testbed]\npaths = ["target"]\nwarm = [["cargo", "test", "--locked", "--offline", "--no-run"]]\nkey = ["Cargo.lock"]\n' > "$self/spice.toml"
  git -C "$self" add spice.toml && git -C "$self" -c user.name=b -c user.email=b@b commit -qm bed
  run_case self "$self" cargo test --locked --offline --no-run
fi
