#!/usr/bin/env bash
# Benchmark (issue #42): decoding Gemini CLI and Qwen Code session files against
# `jq -c .` on the same bytes, side by side; and the terminal reader (a CLI with no
# transcript, read from its asciicast recording) as CPU per second of a PTY writing
# 10 MB/s. The files are generated in the shapes the pinned CLIs write (see
# src/transcript/gemini.rs, qwen.rs, terminal.rs), with text of our own: no public
# samples of these formats ship with the project.
# usage: benches/agents_decode.sh [MB] [runs]      needs: cargo build --release, jq, python3
set -euo pipefail
cd "$(dirname "$0")/.."
mb=${1:-100}; runs=${2:-5}
spice=$(realpath -m "${CARGO_TARGET_DIR:-target}/release/spice")
[ -x "$spice" ] || { echo "build first: cargo build --release" >&2; exit 2; }
command -v jq >/dev/null || { echo "jq is needed: apt-get install jq" >&2; exit 2; }
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT

python3 - "$work" "$mb" <<'PY'
import json, sys, random
work, mb = sys.argv[1], int(sys.argv[2])
target = mb * 1024 * 1024
random.seed(7)
words = "the build passes now after the fix to the parser and its tests cover the case".split()
def prose(n): return " ".join(random.choice(words) for _ in range(n))
def ts(i): return "2026-12-07T02:%02d:%02d.%03dZ" % (i // 3600 % 60, i // 60 % 60, i % 1000)

with open(f"{work}/gemini.jsonl", "w") as f:
    f.write(json.dumps({"sessionId": "0a1b2c3d-0000-4000-8000-000000000001", "projectHash": "ab" * 32,
                        "startTime": ts(0), "lastUpdated": ts(0), "kind": "main"}) + "\n")
    i, history = 0, []
    while f.tell() < target:
        i += 1
        user = {"id": f"u{i}", "timestamp": ts(i), "type": "user", "content": [{"text": prose(40)}]}
        tokens = {"input": 1000 + i, "output": 20, "cached": 300, "thoughts": 5, "tool": 3, "total": 1328 + i}
        model = {"id": f"m{i}", "timestamp": ts(i), "type": "gemini", "content": "", "thoughts": [],
                 "tokens": tokens, "model": "mock-model"}
        out = "\n".join(prose(12) for _ in range(30))
        result = [{"functionResponse": {"id": f"c{i}", "name": "run_shell_command",
                   "response": {"output": f"<untrusted_context>\nOutput: {out}\nProcess Group PGID: {i}\n</untrusted_context>"}}}]
        called = dict(model, toolCalls=[{"id": f"c{i}", "name": "run_shell_command",
                      "args": {"command": f"cargo test -p part{i}", "description": "run the tests"},
                      "result": result, "status": "success"}])
        answer = {"id": f"a{i}", "timestamp": ts(i), "type": "gemini", "content": prose(60) + f"\nACK bcdfghjk{i % 10}: done",
                  "thoughts": [], "tokens": tokens, "model": "mock-model"}
        for rec in (user, model, called, {"id": f"r{i}", "type": "user", "content": result}, answer):
            f.write(json.dumps(rec) + "\n")
            f.write(json.dumps({"$set": {"lastUpdated": ts(i)}}) + "\n")
        history = (history + [user, answer])[-40:]
        if i % 200 == 0:
            f.write(json.dumps({"$set": {"messages": history}}) + "\n")

with open(f"{work}/qwen.jsonl", "w") as f:
    i = 0
    base = {"parentUuid": None, "sessionId": "5e5b1c2a-7f0d-4c3e-9a51-0a1b2c3d4e5f", "provenance": "real_user",
            "cwd": "/w/t", "version": "0.24.4", "gitBranch": "main"}
    while f.tell() < target:
        i += 1
        def rec(ty, **kw): return json.dumps(dict(base, uuid=f"{ty}{i}", timestamp=ts(i), type=ty, **kw)) + "\n"
        usage = {"promptTokenCount": 1001, "candidatesTokenCount": 21, "thoughtsTokenCount": 5,
                 "totalTokenCount": 1027, "cachedContentTokenCount": 300}
        out = "\n".join(prose(12) for _ in range(30))
        f.write(rec("user", message={"role": "user", "parts": [{"text": prose(40)}]}))
        f.write(rec("system", subtype="ui_telemetry", systemPayload={"uiEvent": {"event.name": "qwen-code.api_response",
                    "response_text": prose(60), "input_token_count": 1001}}))
        f.write(rec("assistant", model="mock-model", usageMetadata=usage, message={"role": "model", "parts": [
            {"functionCall": {"id": f"call_{i}", "name": "run_shell_command", "args": {"command": f"cargo test -p part{i}"}}}]}))
        f.write(rec("tool_result", message={"role": "user", "parts": [{"functionResponse": {"id": f"call_{i}",
                    "name": "run_shell_command", "response": {"output": f"Command: cargo test\nDirectory: (root)\nOutput: {out}\nError: (none)\nExit Code: 0"}}}]},
                    toolCallResult={"callId": f"call_{i}", "status": "success",
                                    "resultDisplay": {"type": "shell_result", "exitCode": 0, "output": out}}))
        f.write(rec("assistant", model="mock-model", usageMetadata=usage,
                    message={"role": "model", "parts": [{"text": prose(60) + f"\nACK bcdfghjk{i % 10}: done"}]}))

with open(f"{work}/terminal.cast", "w") as f:
    f.write(json.dumps({"version": 2, "width": 120, "height": 40}) + "\n")
    t, i = 0.0, 0
    while f.tell() < target:
        i += 1
        t += 0.01
        lines = [f"\x1b[32m{prose(12)}\x1b[0m" for _ in range(40)]
        lines.append(f"progress 50%\rprogress 100%")
        if i % 50 == 0:
            lines.append(f"ACK bcdfghjk{i % 10}: done")
        f.write(json.dumps([round(t, 3), "o", "\r\n".join(lines) + "\r\n"]) + "\n")
PY

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
now() { date +%s.%N; }
for agent in gemini qwen terminal; do
  case $agent in terminal) f="$work/terminal.cast" ;; *) f="$work/$agent.jsonl" ;; esac
  size=$(stat -c %s "$f")
  : > "$work/s"; : > "$work/j"
  for _ in $(seq "$runs"); do
    t0=$(now); "$spice" watch --once --json "$f" > /dev/null; t1=$(now)
    echo "$t1 - $t0" | bc >> "$work/s"
    t0=$(now); jq -c . "$f" > /dev/null; t1=$(now)
    echo "$t1 - $t0" | bc >> "$work/j"
  done
  s=$(median < "$work/s"); j=$(median < "$work/j")
  printf '%s: %d MB, spice watch %.2fs (%.0f MB/s), jq %.2fs (%.0f MB/s), speed-up %.1fx\n' \
    "$agent" $((size / 1048576)) "$s" "$(echo "$size / $s / 1048576" | bc -l)" "$j" \
    "$(echo "$size / $j / 1048576" | bc -l)" "$(echo "$j / $s" | bc -l)"
done

# The lane's path for a terminal: `spice ack scan` reads the recording from its
# checkpoint, applies the ACKs and moves the checkpoint; CPU seconds (user + system)
# per MB, as a share of one core for a PTY writing 10 MB/s.
f="$work/terminal.cast"; size=$(stat -c %s "$f")
: > "$work/c"
for _ in $(seq "$runs"); do
  home=$(mktemp -d "$work/home.XXXX")
  cpu=$( { SPICE_HOME=$home /usr/bin/time -f '%U %S' "$spice" ack scan "$f" > /dev/null; } 2>&1 | tail -1)
  echo "$cpu" | awk '{print $1 + $2}' >> "$work/c"
done
c=$(median < "$work/c")
printf 'terminal ACK scan: %d MB in %.2f CPU s (%.0f MB/s): %.1f%% of a core at 10 MB/s (target <= 5%%)\n' \
  $((size / 1048576)) "$c" "$(echo "$size / $c / 1048576" | bc -l)" "$(echo "$c / ($size / 1048576) * 10 * 100" | bc -l)"
