#!/usr/bin/env python3
"""Benchmark: `spice task next` against Taskwarrior's `task next` on the same graph,
and claim throughput with 16 concurrent claimers against a single claimer.

usage: benches/next_vs_taskwarrior.py [--tasks 10000] [--runs 15] [--pool 1500]

Both programs run as whole processes, alternating, and the medians are compared.
spice computes transitive priority inheritance and downstream release over the
whole graph; Taskwarrior only adds a flat urgency bonus to blocking tasks.
Needs: a release build (`cargo build --release`), python3, and Taskwarrior (`task`).
"""
import argparse, json, os, shutil, statistics, subprocess, sys, tempfile, time
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SPICE = os.path.join(ROOT, "target", "release", "spice")
GEN = os.path.join(ROOT, "..", "shared", "bench", "gen_tasks.py")


def run(cmd, env, stdin=None):
    t0 = time.perf_counter()
    p = subprocess.run(cmd, env=env, input=stdin, capture_output=True, text=True)
    dt = time.perf_counter() - t0
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({p.returncode}): {p.stderr.strip()}")
    return dt, p.stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", type=int, default=10000)
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--pool", type=int, default=1500)
    ap.add_argument("--claimers", type=int, default=16)
    a = ap.parse_args()
    if not os.path.exists(SPICE):
        sys.exit("build first: cargo build --release")
    if not shutil.which("task"):
        sys.exit("Taskwarrior is needed: apt-get install taskwarrior")
    work = tempfile.mkdtemp(prefix="spice-bench-")
    graph = subprocess.run([sys.executable, GEN, str(a.tasks)], capture_output=True, text=True, check=True).stdout

    spice_env = {"PATH": os.environ["PATH"], "SPICE_HOME": os.path.join(work, "spice")}
    tw_data = os.path.join(work, "tw")
    os.makedirs(tw_data)
    rc = os.path.join(work, "taskrc")
    with open(rc, "w") as f:
        f.write(f"data.location={tw_data}\nconfirmation=off\nhooks=off\n")
    tw_env = {"PATH": os.environ["PATH"], "TASKRC": rc, "HOME": work}

    dt, _ = run([SPICE, "task", "import", "--taskwarrior", "-"], spice_env, graph)
    print(f"import {a.tasks} tasks: spice {dt:.2f}s", end="", flush=True)
    dt, _ = run(["task", "import", "-"], tw_env, graph)
    print(f", taskwarrior {dt:.2f}s")

    spice_next = [SPICE, "task", "next"]
    tw_next = ["task", "next"]
    run(spice_next, spice_env)  # warm caches; lets Taskwarrior finish its first gc
    run(tw_next, tw_env)
    s_times, t_times = [], []
    for _ in range(a.runs):
        s_times.append(run(spice_next, spice_env)[0])
        t_times.append(run(tw_next, tw_env)[0])
    s_med, t_med = statistics.median(s_times), statistics.median(t_times)
    print(f"next on {a.tasks} tasks, median of {a.runs} alternating runs:")
    print(f"  spice task next  {s_med * 1000:8.1f} ms")
    print(f"  task next        {t_med * 1000:8.1f} ms  (Taskwarrior {run(['task', '--version'], tw_env)[1].strip()})")
    print(f"  ratio spice/taskwarrior = {s_med / t_med:.3f}  (target <= 0.100)")

    # Claims: a pool of independent ready tasks, emptied by N claimers vs by one.
    pool = json.dumps([
        {"uuid": f"00000000-0000-4000-8000-{i:012d}", "description": f"pool {i}",
         "status": "pending", "entry": "20261101T120000Z", "project": f"p{i % 7}"}
        for i in range(a.pool)
    ])

    def drain(claimers):
        env = {"PATH": os.environ["PATH"], "SPICE_HOME": os.path.join(work, f"claims{claimers}")}
        run([SPICE, "task", "import", "--taskwarrior", "-"], env, pool)

        def worker(w):
            n = 0
            while True:
                _, out = run([SPICE, "task", "next", "--claim", "--claimant", f"c{w}", "--json"], env)
                if out.strip() == "null":
                    return n
                n += 1
        t0 = time.perf_counter()
        with ThreadPoolExecutor(claimers) as ex:
            total = sum(ex.map(worker, range(claimers)))
        dt = time.perf_counter() - t0
        assert total == a.pool, f"claimed {total} of {a.pool}"
        return total / dt

    one = drain(1)
    many = drain(a.claimers)
    print(f"claims per second, one process per claim, pool of {a.pool}:")
    print(f"  1 claimer        {one:8.1f} claims/s")
    print(f"  {a.claimers} claimers      {many:8.1f} claims/s")
    print(f"  ratio {a.claimers}/1 = {many / one:.2f}")
    shutil.rmtree(work)


if __name__ == "__main__":
    main()
