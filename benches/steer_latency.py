#!/usr/bin/env python3
"""Benchmark: steering delivery latency and the wrapper's overhead.

usage: benches/steer_latency.py [--runs 20]

1. Latency: from `spice steer` returning to the item's line on the stderr of
   `spice exec -- sleep 5`, median and p95 over N runs. Baseline, side by side: a
   reader that polls `spice inbox --json` 4 times a second (the fastest polling the
   design allows) timed the same way.
2. Overhead: `spice exec -- true` against `true`, whole processes, alternating,
   medians; with a store and nothing pending, and with no store at all.
Needs a release build (`cargo build --release`).
"""
import argparse, os, select, shutil, statistics, subprocess, sys, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SPICE = os.path.join(ROOT, "target", "release", "spice")


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def wait_for(stream, needle, deadline):
    buf = b""
    while time.perf_counter() < deadline:
        r, _, _ = select.select([stream], [], [], 0.05)
        if r:
            chunk = os.read(stream.fileno(), 65536)
            if not chunk:
                return None
            buf += chunk
            if needle in buf:
                return time.perf_counter()
    return None


def steer(env, text):
    """Creates an item; returns its key, when `spice steer` started and when it returned."""
    start = time.perf_counter()
    out = subprocess.run([SPICE, "steer", "lane:core", text], env=env, capture_output=True, text=True, check=True)
    return out.stdout.strip(), start, time.perf_counter()


def latency_exec(env, runs):
    lat = []
    for i in range(runs):
        p = subprocess.Popen([SPICE, "exec", "--", "sleep", "5"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        time.sleep(0.3)
        key, start, t0 = steer(env, f"latency probe {i}")
        t1 = wait_for(p.stderr, key.encode(), t0 + 5)
        p.kill(); p.wait()
        if t1 is None:
            sys.exit(f"run {i}: the item never appeared")
        lat.append((t1 - t0, t1 - start))
        subprocess.run([SPICE, "ack", "apply"], env=env, input=f"ACK {key}: measured\n", text=True, capture_output=True, check=True)
    return lat


POLLER = r'''
import json, subprocess, sys, time
spice, key_file = sys.argv[1], sys.argv[2]
seen = set()
while True:
    out = subprocess.run([spice, "inbox", "lane:core", "--json"], capture_output=True, text=True).stdout
    for item in json.loads(out or "[]"):
        if item["key"] not in seen:
            seen.add(item["key"])
            sys.stderr.write(item["key"] + "\n"); sys.stderr.flush()
    time.sleep(0.25)
'''


def latency_poll(env, runs, work):
    lat = []
    script = os.path.join(work, "poller.py")
    with open(script, "w") as f:
        f.write(POLLER)
    p = subprocess.Popen([sys.executable, script, SPICE, "-"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    time.sleep(0.5)
    for i in range(runs):
        key, start, t0 = steer(env, f"poll probe {i}")
        t1 = wait_for(p.stderr, key.encode(), t0 + 5)
        if t1 is None:
            sys.exit(f"poll run {i}: never seen")
        lat.append((t1 - t0, t1 - start))
        subprocess.run([SPICE, "ack", "apply"], env=env, input=f"ACK {key}: measured\n", text=True, capture_output=True, check=True)
        time.sleep(0.137 * (i % 3))  # de-phase the probes from the poll period
    p.kill(); p.wait()
    return lat


def timed(cmd, env):
    t0 = time.perf_counter()
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def overhead(env, runs):
    true = shutil.which("true")
    a, b = [], []
    for _ in range(runs):
        a.append(timed([SPICE, "exec", "--", true], env))
        b.append(timed([true], env))
    return statistics.median(a), statistics.median(b)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=20)
    a = ap.parse_args()
    if not os.path.exists(SPICE):
        sys.exit("build first: cargo build --release")
    work = tempfile.mkdtemp(prefix="spice-steer-bench-")
    env = {"PATH": os.environ["PATH"], "SPICE_HOME": os.path.join(work, "home"), "SPICE_LANE": "core", "HOME": work}
    subprocess.run([SPICE, "task", "list"], env=env, check=True, capture_output=True)

    ex = latency_exec(env, a.runs)
    po = latency_poll(env, a.runs, work)
    print(f"steering latency, {a.runs} runs, ms (the line can reach stderr before `spice steer` has exited):")
    print("                              from steer's return      from steer's start")
    for name, xs in (("spice exec (inotify push)", ex), ("baseline: poll at 4 Hz", po)):
        ret = [x[0] * 1000 for x in xs]
        sta = [x[1] * 1000 for x in xs]
        print(f"  {name:26}  median {statistics.median(ret):6.1f} p95 {pct(ret, 95):6.1f}   median {statistics.median(sta):6.1f} p95 {pct(sta, 95):6.1f}")
    r = statistics.median([x[1] for x in ex]) / statistics.median([x[1] for x in po])
    print(f"  ratio push/poll (median from start) = {r:.3f}  (target: median from return < 250 ms)")

    n = max(a.runs * 5, 100)
    w, t = overhead(env, n)
    print(f"overhead, median of {n} alternating runs:")
    print(f"  store, nothing pending: spice exec -- true {w * 1000:6.2f} ms, true {t * 1000:6.2f} ms, ratio {w / t:.2f}, added {(w - t) * 1000:.2f} ms")
    nostore = dict(env, SPICE_HOME=os.path.join(work, "none"))
    w, t = overhead(nostore, n)
    print(f"  no store:               spice exec -- true {w * 1000:6.2f} ms, true {t * 1000:6.2f} ms, ratio {w / t:.2f}, added {(w - t) * 1000:.2f} ms  (target: added < 5 ms)")
    shutil.rmtree(work)


if __name__ == "__main__":
    main()
