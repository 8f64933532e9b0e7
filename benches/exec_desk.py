#!/usr/bin/env python3
"""Benchmark: `spice exec -- true` as a lane's confined agent runs it, through the
supervisor's desk, against `true` alone.

A real fleet (`spice fleet up --until-idle`, one lane, SQLite store) launches a
scripted agent under the sandbox; the agent times, alternating in one loop, `true` and
`spice exec -- true` (which asks the desk for the lane's steering before and after the
command) and the same wrapper without a store (it execs in place: spice's own
start-up), all whole processes; with no steering item, and again with one pending
item for its lane (framed on every command's stderr, before and after it, each
showing recorded: two writes). It then commits and completes its phase. Prints the
medians and the differences (goal: <= +2 ms over `true` with nothing to show).

usage: benches/exec_desk.py [--runs 300] [--spice PATH]
Needs python3, git, Linux with Landlock, and a spice build (`cargo build --release`).
"""
import argparse, os, statistics, subprocess, sys, tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

AGENT = r"""#!/bin/bash
set -e
spice="$1"; runs="$2"; out="$TMPDIR/times"
: > "$out"
# t CMD... [floor]: runs CMD (without a trailing "floor" word) and records its time.
t() {
  local kind=$1 a b
  if [ "${@: -1}" = floor ]; then kind=floor; set -- "${@:1:$#-1}"; fi
  a=$EPOCHREALTIME; "$@" >/dev/null 2>&1; b=$EPOCHREALTIME
  echo "$kind $(( ${b/./} - ${a/./} ))" >> "$out"
}
for i in $(seq "$runs"); do
  t /bin/true
  t "$spice" exec -- /bin/true
  SPICE_DESK= SPICE_HOME=/nonexistent t "$spice" exec -- /bin/true floor
done
"$spice" inbox --json > "$TMPDIR/inbox.json"
echo done > bench.txt
git add bench.txt
git commit -q -m bench
"$spice" task phase "$SPICE_TASK" --done > "$TMPDIR/done.txt" 2>&1
"""


def spice_bin(arg):
    for p in [arg, os.path.join(ROOT, "target", "release", "spice")]:
        if p and os.path.exists(p):
            return os.path.abspath(p)
    sys.exit("no spice binary: run `cargo build --release` or pass --spice")


def run(cmd, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({p.returncode}): {p.stderr.strip()}")
    return p.stdout


def one_fleet(spice, runs, steer):
    with tempfile.TemporaryDirectory() as d:
        repo, home = os.path.join(d, "repo"), os.path.join(d, "home")
        env = {"PATH": os.environ["PATH"], "HOME": d, "SPICE_HOME": home}
        run(["git", "init", "-q", "-b", "main", repo])
        for k, v in [("user.email", "bench@spice.invalid"), ("user.name", "bench")]:
            run(["git", "-C", repo, "config", k, v])
        os.makedirs(os.path.join(repo, "lanes"))
        os.makedirs(os.path.join(repo, "profiles"))
        agent = os.path.join(d, "agent.sh")
        with open(agent, "w") as f:
            f.write(AGENT)
        with open(os.path.join(repo, "profiles", "timer.toml"), "w") as f:
            f.write(f'command = ["/bin/bash", "{agent}", "{{spice}}", "{runs}", "{{brief}}"]\nmode = "headless"\n')
        with open(os.path.join(repo, "lanes", "a.toml"), "w") as f:
            f.write('profile = "timer"\nphases = ["todo"]\nlease = "10m"\n')
        run(["git", "-C", repo, "add", "lanes", "profiles"])
        run(["git", "-C", repo, "commit", "-q", "-m", "lanes"])
        run([spice, "task", "add", "time the wrapper", "--project", "bench"], cwd=repo, env=env)
        if steer:
            run([spice, "steer", "lane:a", "an item the agent leaves pending"], cwd=repo, env=env)
        check = run([spice, "fleet", "check"], cwd=repo, env=env)
        run([spice, "fleet", "up", "--until-idle"], cwd=repo, env=env)
        tmp = os.path.join(home, "tmp", "a")
        done = open(os.path.join(tmp, "done.txt")).read()
        if "todo → review" not in done:
            sys.exit(f"the agent's phase did not land: {done}")
        times = {"true": [], "exec": [], "floor": []}
        for line in open(os.path.join(tmp, "times")):
            cmd, us = line.split()
            kind = {"/bin/true": "true", "floor": "floor"}.get(cmd, "exec")
            times[kind].append(int(us) / 1000)
        confined = "confined" in check.split("sandbox:")[0]
        return times, confined


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=300)
    ap.add_argument("--spice")
    a = ap.parse_args()
    spice = spice_bin(a.spice)
    print(f"spice: {spice}")
    for steer in (False, True):
        times, confined = one_fleet(spice, a.runs, steer)
        med = {k: statistics.median(v) for k, v in times.items()}
        t, e, f = med["true"], med["exec"], med["floor"]
        what = "one pending item" if steer else "no item"
        print(f"{what} ({'confined' if confined else 'NOT confined'}), {a.runs} runs alternating:")
        print(f"  /bin/true alone:                        {t:7.3f} ms")
        print(f"  spice exec -- /bin/true, no store:      {f:7.3f} ms (the wrapper execs in place)")
        print(f"  spice exec -- /bin/true, by the desk:   {e:7.3f} ms")
        print(f"  the wrapper adds: {e - t:+.3f} ms (goal <= +2 ms; ratio {e / t:.2f}); "
              f"the desk's two round trips {e - f:+.3f} ms")


if __name__ == "__main__":
    main()
