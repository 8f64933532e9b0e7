#!/usr/bin/env python3
"""Benchmark: what the wrapper adds to a command that ends at once.

`spice exec -- true` with a store (a state directory with a database, SPICE_HOME set,
nothing addressed to the command), against `true` alone, each a whole process,
alternating; the same with the store held open by another connection (as a fleet's
supervisor holds it, so the wrapper neither creates nor removes the WAL); and
`spice exec -- true` without a store (the wrapper execs in place).
Prints the medians and the difference (goal: with a store <= +2 ms over `true`).
Also reports whether spice ran a `git` process (it must not when SPICE_HOME says where
the store is): a `git` on PATH that records its calls stands in for git.

usage: benches/exec_true.py [--runs 300] [--spice PATH]
Needs python3 and a release build (`cargo build --release`).
"""
import argparse, os, shutil, sqlite3, statistics, subprocess, sys, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def spice_bin(arg):
    for p in [arg, os.path.join(ROOT, "target", "release", "spice")]:
        if p and os.path.exists(p):
            return p
    sys.exit("no spice binary: run `cargo build --release` or pass --spice")


def timed(cmd, env, cwd):
    t0 = time.perf_counter()
    p = subprocess.run(cmd, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
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
    true = shutil.which("true")
    with tempfile.TemporaryDirectory(prefix="spice-exec-") as d:
        home = os.path.join(d, "home")
        spy = os.path.join(d, "bin")
        os.makedirs(spy)
        calls = os.path.join(d, "git-calls")
        with open(os.path.join(spy, "git"), "w") as f:
            f.write(f"#!/bin/sh\necho \"$@\" >> {calls}\nexec {shutil.which('git') or 'false'} \"$@\"\n")
        os.chmod(os.path.join(spy, "git"), 0o755)
        env = {"PATH": f"{spy}:{os.environ['PATH']}", "SPICE_HOME": home, "HOME": d}
        subprocess.run([spice, "task", "add", "a task so the store exists"], env=env, check=True,
                       stdout=subprocess.DEVNULL)
        no_store = dict(env, SPICE_HOME=os.path.join(d, "none"))
        cmds = {
            "true": ([true], env),
            "spice exec -- true (store)": ([spice, "exec", "--", true], env),
            "spice exec -- true (store held)": ([spice, "exec", "--", true], env),
            "spice exec -- true (no store)": ([spice, "exec", "--", true], no_store),
        }
        times = {k: [] for k in cmds}
        for k, (c, e) in cmds.items():
            timed(c, e, d)
        if os.path.exists(calls):
            os.remove(calls)
        db = os.path.join(home, "spice.db")
        for _ in range(a.runs):
            for k, (c, e) in cmds.items():
                # "held": another connection has the store open, as a fleet's supervisor
                # does, so the wrapper neither creates nor removes the WAL and its index.
                held = sqlite3.connect(db) if k.endswith("held)") else None
                if held:
                    held.execute("SELECT count(*) FROM sqlite_master").fetchall()
                times[k].append(timed(c, e, d))
                if held:
                    held.close()
        med = {k: statistics.median(v) * 1000 for k, v in times.items()}
        print(f"medians of {a.runs} alternating runs:")
        for k, m in med.items():
            print(f"  {k:<32} {m:7.2f} ms")
        extra = med["spice exec -- true (store)"] - med["true"]
        held = med["spice exec -- true (store held)"] - med["true"]
        print(f"  with a store: +{extra:.2f} ms over true (goal <= +2 ms); held open by another "
              f"connection: +{held:.2f} ms; without: "
              f"+{med['spice exec -- true (no store)'] - med['true']:.2f} ms")
        timed([spice, "task", "list"], env, d)
        git = open(calls).read().splitlines() if os.path.exists(calls) else []
        print(f"  git processes run by spice with SPICE_HOME set (exec and task list): {len(git)}")


if __name__ == "__main__":
    main()
