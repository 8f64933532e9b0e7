#!/usr/bin/env python3
"""Time from a transcript line that asks the operator a question to the operator's
[notify] command running (issue #19; goal < 1 s), measured with a real `spice fleet up`
and the scripted agent of tests/it/lane_states.rs, side by side with a baseline: a
`tail -F` watcher on the same transcript running the same command the moment the line
lands (the floor of "see the line, run a command"). Prints each round and the medians,
and the ratio spice / baseline.

    SPICE=target/release/spice python3 benches/notify_latency.py [ROUNDS]
"""
import json, os, statistics, subprocess, sys, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SPICE = os.path.abspath(os.environ.get("SPICE", os.path.join(ROOT, "target/release/spice")))
AGENT = os.path.join(ROOT, "fixtures/agents/states-agent.py")
ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 10


def git(repo, *args):
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


def main():
    tmp = tempfile.mkdtemp(prefix="spice-notify-bench-")
    repo, home, agent_home = (os.path.join(tmp, d) for d in ("repo", "home", "agent-home"))
    go = os.path.join(tmp, "go")
    for d in (repo, go, agent_home, os.path.join(repo, "lanes"), os.path.join(repo, "profiles")):
        os.makedirs(d, exist_ok=True)
    steps = []
    for i in range(ROUNDS):
        q = {"type": "assistant", "message": {"id": "q%d" % i, "role": "assistant", "model": "m",
             "content": [{"type": "text", "text": "Which way do you prefer for round %d?" % i}],
             "stop_reason": "end_turn"}}
        done = {"type": "assistant", "message": {"id": "d%d" % i, "role": "assistant", "model": "m",
                "content": [{"type": "text", "text": "Done with round %d." % i}],
                "stop_reason": "end_turn"}}
        steps.append({"lines": [{"type": "user", "message": {"role": "user", "content": "go %d" % i}}, q]})
        steps.append({"lines": [{"type": "user", "message": {"role": "user", "content": "ok"}}, done]})
    with open(os.path.join(tmp, "steps.jsonl"), "w") as f:
        f.write("\n".join(json.dumps(s) for s in steps) + "\n")
    with open(os.path.join(repo, "profiles/states.toml"), "w") as f:
        f.write('command = ["python3", "%s", "{session_id}"]\nmode = "pty"\n'
                '[transcript]\nformat = "claude"\ndir = "{home}/t"\nglob = "{session_id}.jsonl"\n' % AGENT)
    with open(os.path.join(repo, "lanes/a.toml"), "w") as f:
        f.write('profile = "states"\nphases = ["todo"]\n[env]\nSTATES_STEPS = "%s"\nSTATES_GO = "%s"\n'
                % (os.path.join(tmp, "steps.jsonl"), go))
    notified = os.path.join(tmp, "notified")
    with open(os.path.join(repo, "spice.toml"), "w") as f:
        f.write('[notify]\ncommand = ["sh", "-c", "date +%%s.%%N >> %s"]\non = ["asking"]\n'
                'per_minute = 600\n' % notified)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "-c", "user.email=b@spice", "-c", "user.name=b", "add", ".")
    git(repo, "-c", "user.email=b@spice", "-c", "user.name=b", "commit", "-q", "-m", "bench")
    env = dict(os.environ, SPICE_HOME=home, HOME=agent_home)
    subprocess.run([SPICE, "task", "add", "Bench", "--project", "demo"], cwd=repo, env=env,
                   check=True, capture_output=True)
    sup = subprocess.Popen([SPICE, "fleet", "up"], cwd=repo, env=env,
                           stdout=subprocess.DEVNULL, stderr=open(os.path.join(tmp, "up.err"), "w"))
    base_at = os.path.join(tmp, "baseline")
    watcher = None
    try:
        # Wait for the transcript to exist, then start the baseline watcher on it.
        tdir = os.path.join(agent_home, "t")
        open(os.path.join(go, "0"), "w").close()
        deadline = time.time() + 60
        while not (os.path.isdir(tdir) and os.listdir(tdir)):
            if time.time() > deadline:
                sys.exit("the agent never wrote its transcript; the supervisor said:\n" + open(os.path.join(tmp, "up.err")).read()[-3000:])
            time.sleep(0.02)
        transcript = os.path.join(tdir, os.listdir(tdir)[0])
        watcher = subprocess.Popen(
            ["sh", "-c", "tail -n +1 -F '%s' | while read -r l; do case \"$l\" in "
             "*'prefer for round'*) date +%%s.%%N >> '%s';; esac; done" % (transcript, base_at)],
            stderr=subprocess.DEVNULL, start_new_session=True)
        spice_ms, base_ms = [], []
        for i in range(ROUNDS):
            n = 2 * i
            if n > 0:
                open(os.path.join(go, str(n)), "w").close()
            done = os.path.join(go, "%d.done" % n)
            wait(lambda: os.path.exists(done))
            wrote = os.stat(done).st_mtime_ns / 1e9
            wait(lambda: lines(notified) > i and lines(base_at) > i,
                 what=lambda: "round %d: %d notification(s), %d baseline line(s); the supervisor said:\n%s"
                 % (i, lines(notified), lines(base_at), open(os.path.join(tmp, "up.err")).read()[-2000:]))
            s = float(open(notified).read().split()[i]) - wrote
            b = float(open(base_at).read().split()[i]) - wrote
            spice_ms.append(s * 1000)
            base_ms.append(b * 1000)
            print("round %2d: notify %7.1f ms   baseline %6.1f ms" % (i, s * 1000, b * 1000), flush=True)
            open(os.path.join(go, str(n + 1)), "w").close()
            wait(lambda: os.path.exists(os.path.join(go, "%d.done" % (n + 1))))
            time.sleep(0.4)  # let the lane report its turn done before the next question
        ms, mb = statistics.median(spice_ms), statistics.median(base_ms)
        print("median: question line -> notify command %.1f ms (max %.1f); baseline tail -F %.1f ms; "
              "ratio %.1fx; goal < 1000 ms: %s" % (ms, max(spice_ms), mb, ms / max(mb, 0.001),
                                                    "met" if max(spice_ms) < 1000 else "NOT met"))
    finally:
        subprocess.run([SPICE, "fleet", "down"], cwd=repo, env=env, capture_output=True)
        sup.wait(timeout=30)
        if watcher:
            os.killpg(watcher.pid, 15)


def lines(path):
    try:
        return len(open(path).read().split())
    except FileNotFoundError:
        return 0


def wait(cond, secs=30, what=lambda: ""):
    deadline = time.time() + secs
    while not cond():
        if time.time() > deadline:
            sys.exit("timed out " + what())
        time.sleep(0.005)


if __name__ == "__main__":
    main()
