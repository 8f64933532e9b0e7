#!/usr/bin/env bash
# The conscience's costs (spice::conscience, through examples/conscience_bench.rs):
#  1. scan cost on the transcript path: MB/s of assistant prose (MIB MiB of generated
#     messages, about 1.5 KiB each) through the ACK scanner (a Claude transcript of
#     those messages, decoded, parsed for ACKs, the checkpoint written) against 50
#     maxims of 20 trigger words each over the same messages; the ratio (goal >= 0.5);
#  2. time from an assistant message appended to its transcript to its reminder in the
#     store: the lane's scan, the watcher's matching and publishing, without judges and
#     with a scripted judge (`sh` printing YES, both judges). A fleet adds the wait for
#     the lane's next tick (250 ms) to find the line.
# Usage: benches/conscience.sh [MIB] [RUNS] [N]   (CONSCIENCE_BENCH=path skips the build)
set -euo pipefail
cd "$(dirname "$0")/.."
MIB="${1:-20}"
RUNS="${2:-3}"
N="${3:-20}"
if [ -z "${CONSCIENCE_BENCH:-}" ]; then
  cargo build --locked --release --example conscience_bench >&2
  CONSCIENCE_BENCH=target/release/examples/conscience_bench
fi
scan=$("$CONSCIENCE_BENCH" scan "$MIB" "$RUNS")
lat=$("$CONSCIENCE_BENCH" latency "$N")
echo "scan: $scan"
echo "latency: $lat"
python3 - "$scan" "$lat" <<'PY'
import json, sys
s, l = json.loads(sys.argv[1]), json.loads(sys.argv[2])
print(f"prose {s['prose_mb']:.1f} MB, {s['messages']} messages, {s['maxims']} maxims x {s['words_each']} words")
print(f"ACK scanner   {s['ack_scanner_mb_s']:8.1f} MB/s")
print(f"conscience    {s['conscience_mb_s']:8.1f} MB/s   ratio {s['ratio']:.2f} (goal >= 0.5)")
for k in ("without_judges", "scripted_judge"):
    v = l[k]
    print(f"message -> reminder, {k.replace('_', ' ')}: median {v['median_ms']:.2f} ms, max {v['max_ms']:.2f} ms (n={v['n']})")
PY
