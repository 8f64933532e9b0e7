#!/usr/bin/env bash
# Benchmark: `spice usage --json DIR` against jq summing the same fields over the same
# files (jq extracting each assistant line's usage, awk keeping the last figures per
# message id and request id, as spice counts them), on synthetic Claude Code transcripts this script
# writes itself (sessions of messages written on several lines with provisional
# figures, tool results between them, sub-agent files). Checks both agree, then
# reports medians, throughput, the ratio and spice's peak memory.
# usage: benches/usage_vs_jq.sh [MB] [runs]     (default 1024 MB, 3 runs)
#        SPICE=path/to/spice (default target/release/spice; build: cargo build --release)
#        needs: jq, python3
set -euo pipefail
cd "$(dirname "$0")/.."
mb=${1:-1024}; runs=${2:-3}
spice=${SPICE:-target/release/spice}
[ -x "$spice" ] || { echo "build first: cargo build --release (or set SPICE)" >&2; exit 2; }
command -v jq >/dev/null || { echo "jq is needed: apt-get install jq" >&2; exit 2; }
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT

echo "writing ${mb} MB of synthetic transcripts under $work ..." >&2
python3 - "$work/t" "$mb" <<'EOF'
import json, os, random, sys
root, mb = sys.argv[1], int(sys.argv[2])
random.seed(7)
words = "parser lane budget token claim worktree steering merge phase test build fix".split()
target, written, s = mb * 1024 * 1024, 0, 0
def text(n):
    return " ".join(random.choice(words) for _ in range(n))
while written < target:
    s += 1
    sid = f"bench-{s:05d}"
    d = os.path.join(root, f"project-{s % 16:02d}")
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, f"{sid}.jsonl")
    with open(path, "w") as f:
        for m in range(400):
            mid, req = f"msg_{sid}_{m}", f"req_{sid}_{m}"
            usage = {"input_tokens": random.randint(1, 50), "cache_read_input_tokens": random.randint(0, 90000),
                     "cache_creation_input_tokens": random.randint(0, 4000), "output_tokens": 3}
            f.write(json.dumps({"type": "user", "sessionId": sid, "timestamp": "2026-11-20T10:00:00.000Z",
                                "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{m}",
                                "content": text(random.randint(20, 300))}]}}) + "\n")
            for block in range(3):
                if block == 2:
                    usage = dict(usage, output_tokens=random.randint(10, 2000))
                f.write(json.dumps({"type": "assistant", "sessionId": sid, "requestId": req,
                                    "timestamp": f"2026-11-2{s % 9}T10:{m % 60:02d}:00.000Z",
                                    "message": {"id": mid, "model": "claude-bench", "role": "assistant",
                                                "content": [{"type": "text", "text": text(random.randint(10, 120))}],
                                                "usage": usage}}) + "\n")
    written += os.path.getsize(path)
    if s % 10 == 0:
        sub = os.path.join(d, sid, "subagents")
        os.makedirs(sub, exist_ok=True)
        with open(os.path.join(sub, "agent-a1.jsonl"), "w") as f:
            for m in range(50):
                f.write(json.dumps({"type": "assistant", "sessionId": sid, "isSidechain": True, "agentId": "a1",
                                    "requestId": f"sreq_{sid}_{m}", "timestamp": "2026-11-20T11:00:00.000Z",
                                    "message": {"id": f"smsg_{sid}_{m}", "model": "claude-bench-small",
                                                "content": [{"type": "text", "text": text(40)}],
                                                "usage": {"input_tokens": 9, "output_tokens": 99}}}) + "\n")
        written += os.path.getsize(os.path.join(sub, "agent-a1.jsonl"))
EOF
size=$(du -sb "$work/t" | cut -f1)
files=$(find "$work/t" -name '*.jsonl' | sort)

jq_sum() {
  # jq reads every line and prints the usage fields of each assistant line; awk keeps
  # the last figures per (message id, request id) and sums them. (jq alone, holding the
  # map in a reduce, is ~20x slower still: the baseline is the fast way to do it.)
  # shellcheck disable=SC2086
  jq -r 'select(.type == "assistant" and (.message.usage | type) == "object"
                and .message.model != "<synthetic>")
         | [(.message.id // ""), (.requestId // ""), (.message.usage.input_tokens // 0),
            (.message.usage.output_tokens // 0), (.message.usage.cache_read_input_tokens // 0),
            (.message.usage.cache_creation_input_tokens // 0)] | @tsv' $files \
  | awk -F'\t' '{ k = $1 "\t" $2; i[k] = $3; o[k] = $4; r[k] = $5; c[k] = $6 }
      END { for (k in i) { a += i[k]; b += o[k]; d += r[k]; e += c[k] }
            printf "{\"input\":%.0f,\"output\":%.0f,\"cache_read\":%.0f,\"cache_creation\":%.0f}\n", a, b, d, e }'
}
spice_sum() { "$spice" usage --json "$work/t" | jq -c '.total | {input, output, cache_read, cache_creation}'; }

a=$(spice_sum); b=$(jq_sum)
[ "$a" = "$b" ] || { echo "spice and jq disagree: spice $a, jq $b" >&2; exit 1; }
echo "both count $a" >&2

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
now() { date +%s.%N; }
: > "$work/s"; : > "$work/j"
for _ in $(seq "$runs"); do
  t0=$(now); "$spice" usage --json "$work/t" > /dev/null; t1=$(now)
  echo "$t1 - $t0" | bc >> "$work/s"
  t0=$(now); jq_sum > /dev/null; t1=$(now)
  echo "$t1 - $t0" | bc >> "$work/j"
done
s=$(median < "$work/s"); j=$(median < "$work/j")
mem=$( { /usr/bin/time -f %M "$spice" usage --json "$work/t" > /dev/null; } 2>&1 | tail -1)
printf 'usage: %d MB in %d files, spice %.2fs (%.0f MB/s), jq %.2fs (%.0f MB/s), spice is %.1fx jq; spice peak RSS %d MB\n' \
  $((size / 1048576)) "$(echo "$files" | wc -l)" "$s" "$(echo "$size / $s / 1048576" | bc -l)" "$j" \
  "$(echo "$size / $j / 1048576" | bc -l)" "$(echo "$j / $s" | bc -l)" $((mem / 1024))
