#!/usr/bin/env python3
"""Benchmark: what confinement adds to an agent's start.

Every lane's agent is started by `spice agent-shim --parent PID [--confine --write P…]
-- CMD`. Here CMD is `true`, and the shim is timed as a whole process, alternating:
unconfined, and confined with the write list a real session gets (its worktree, the
git directories, the state directory's files, the terminal devices: 18 paths), each
against `true` alone in the same loop. Prints the medians and the difference the
sandbox makes (goal: <= +2 ms per agent start).

usage: benches/shim_confine.py [--runs 300] [--spice PATH]
Needs python3, Linux with Landlock, and a spice build (`cargo build --release`).
"""
import argparse, os, statistics, subprocess, sys, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def spice_bin(arg):
    for p in [arg, os.path.join(ROOT, "target", "release", "spice")]:
        if p and os.path.exists(p):
            return p
    sys.exit("no spice binary: run `cargo build --release` or pass --spice")


def timed(cmd):
    # Each in a session of its own, as under a lane's PTY: the shim ends whatever is
    # left in its session when the agent exits.
    t0 = time.perf_counter()
    p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                       stdin=subprocess.DEVNULL, start_new_session=True)
    dt = time.perf_counter() - t0
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({p.returncode}): {p.stderr.decode().strip()}")
    return dt


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=300)
    ap.add_argument("--spice")
    a = ap.parse_args()
    spice = spice_bin(a.spice)
    true = subprocess.run(["sh", "-c", "command -v true"], capture_output=True, text=True).stdout.strip()
    with tempfile.TemporaryDirectory() as d:
        paths = []
        for name in ["worktree", "tmp", "interrupted", "objects", "admin", "refs", "logs",
                     "transcripts", "home-a", "home-b"]:
            p = os.path.join(d, name)
            os.makedirs(p)
            paths.append(p)
        for name in ["spice.db", "spice.db-wal", "spice.db-shm"]:
            p = os.path.join(d, name)
            open(p, "w").close()
            paths.append(p)
        paths += ["/dev/null", "/dev/zero", "/dev/full", "/dev/tty", "/dev/pts"]
        paths = [p for p in paths if os.path.exists(p)]
        parent = str(os.getpid())
        plain = [spice, "agent-shim", "--parent", parent, "--", true]
        confined = [spice, "agent-shim", "--parent", parent, "--confine"]
        for p in paths:
            confined += ["--write", p]
        confined += ["--", true]
        for cmd in (plain, confined):  # warm the page cache
            timed(cmd)
        t_true, t_plain, t_conf = [], [], []
        for _ in range(a.runs):
            t_true.append(timed([true]))
            t_plain.append(timed(plain))
            t_conf.append(timed(confined))
    med = lambda xs: statistics.median(xs) * 1000
    print(f"spice: {spice}")
    print(f"runs: {a.runs}, alternating; {len(paths)} writable paths")
    print(f"true alone:                    {med(t_true):7.3f} ms")
    print(f"agent-shim -- true:            {med(t_plain):7.3f} ms")
    print(f"agent-shim --confine -- true:  {med(t_conf):7.3f} ms")
    diff = med(t_conf) - med(t_plain)
    print(f"the sandbox adds:              {diff:+7.3f} ms per agent start "
          f"(goal <= +2 ms; ratio {med(t_conf) / med(t_plain):.3f})")


if __name__ == "__main__":
    main()
