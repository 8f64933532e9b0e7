#!/usr/bin/env python3
"""Counts the tokens in Claude Code and Codex transcripts straight from their JSON,
independently of spice, for tests/it/usage.rs to compare `spice usage --json` with.

Rules (the ones spice documents, written again from the formats):
- Claude: `assistant` lines' `message.usage`, one per (message.id, requestId), the last
  figures seen win, shared across all files read; `<synthetic>` models cost nothing;
  a line without a message id is its own call.
- Codex rollouts: `token_count` totals are cumulative: differences, and a total any
  figure of which went down counts from zero. `input` excludes the cached input.
- `codex exec --json`: each `turn.completed` usage once, input less the cached.

Usage: usage_count.py DIR...   prints {"total": {...}, "sessions": {id: {...}}}
"""
import json
import os
import sys

KINDS = ("input", "output", "cache_read", "cache_creation")


def as_int(v):
    return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else 0


def records(path):
    with open(path, "rb") as f:
        for raw in f:
            try:
                r = json.loads(raw)
            except ValueError:
                continue
            if isinstance(r, dict):
                yield r


def is_codex(path):
    for i, r in enumerate(records(path)):
        t = r.get("type")
        if "payload" in r or (isinstance(t, str) and t.split(".")[0] in ("thread", "turn", "item")):
            return True
        if t in ("user", "assistant", "system", "summary", "progress"):
            return False
        if i > 20:
            break
    return False


def files(dirs):
    out = []
    for d in dirs:
        for root, _, names in os.walk(d):
            out += [os.path.join(root, n) for n in names if n.endswith(".jsonl")]
    # spice orders paths by component, as Rust's Path does.
    return sorted(out, key=lambda p: p.split(os.sep))


def main(dirs):
    sessions = {}
    seen = {}  # (message id, request id) -> (figures, session)

    def add(session, delta):
        s = sessions.setdefault(session, dict.fromkeys(KINDS, 0))
        for k in KINDS:
            s[k] += delta[k]

    for path in files(dirs):
        stem = os.path.splitext(os.path.basename(path))[0]
        if is_codex(path):
            session, last = stem, None
            for r in records(path):
                p = r["payload"] if isinstance(r.get("payload"), dict) else r
                t = r.get("type")
                if t == "session_meta" or p.get("type") == "session_meta":
                    session = p.get("id") or session
                if t == "thread.started" and r.get("thread_id"):
                    session = r["thread_id"]
                if t == "turn.completed" and isinstance(r.get("usage"), dict):
                    u = r["usage"]
                    i, c = as_int(u.get("input_tokens")), as_int(u.get("cached_input_tokens"))
                    add(session, {"input": max(i - c, 0), "output": as_int(u.get("output_tokens")),
                                  "cache_read": c, "cache_creation": as_int(u.get("cache_write_input_tokens"))})
                if p.get("type") != "token_count" or not isinstance(p.get("info"), dict):
                    continue
                tot = p["info"].get("total_token_usage")
                if not isinstance(tot, dict):
                    continue
                now = (as_int(tot.get("input_tokens")), as_int(tot.get("output_tokens")),
                       as_int(tot.get("cached_input_tokens")))
                base = last if last and all(n >= o for n, o in zip(now, last)) else (0, 0, 0)
                last = now
                norm = lambda x: {"input": max(x[0] - x[2], 0), "output": x[1], "cache_read": x[2],
                                  "cache_creation": 0}
                a, b = norm(now), norm(base)
                add(session, {k: a[k] - b[k] for k in KINDS})
            continue
        session = None
        for r in records(path):
            sid = r.get("sessionId") or r.get("session_id")
            if isinstance(sid, str) and sid and session is None:
                session = sid
            if r.get("type") != "assistant" or not isinstance(r.get("message"), dict):
                continue
            m = r["message"]
            u = m.get("usage")
            if not isinstance(u, dict) or m.get("model") == "<synthetic>":
                continue
            fig = {"input": as_int(u.get("input_tokens")), "output": as_int(u.get("output_tokens")),
                   "cache_read": as_int(u.get("cache_read_input_tokens")),
                   "cache_creation": as_int(u.get("cache_creation_input_tokens"))}
            who = session or stem
            mid = m.get("id")
            if not isinstance(mid, str):
                add(who, fig)
                continue
            req = r.get("requestId") if isinstance(r.get("requestId"), str) else ""
            old = seen.get((mid, req), dict.fromkeys(KINDS, 0))
            seen[(mid, req)] = fig
            add(who, {k: fig[k] - old[k] for k in KINDS})
    total = dict.fromkeys(KINDS, 0)
    for s in sessions.values():
        for k in KINDS:
            total[k] += s[k]
    sessions = {k: v for k, v in sessions.items() if any(v.values())}
    json.dump({"total": total, "sessions": sessions}, sys.stdout, sort_keys=True)


if __name__ == "__main__":
    main(sys.argv[1:])
