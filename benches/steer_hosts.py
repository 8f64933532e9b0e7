#!/usr/bin/env python3
"""Benchmark (issue #18): `spice steer` -> mid-command delivery on another host, on
PostgreSQL, against the same on one SQLite host. Goal: median < 100 ms.

usage: benches/steer_hosts.py [--runs 30]

Two hosts are two state directories (each its own repository and SPICE_HOME) whose
`config.toml` names one PostgreSQL database. For each run, `spice exec -- sleep 5`
starts under host B (lane `core`), and once it has run past its start-up, `spice steer
lane:core` runs under host A; the time is from steer's start, and from its return, to
the item's key on B's exec stderr (the command still running). The baseline, side by
side and alternating run by run: exec and steer on one host with the embedded SQLite
store (inotify push), timed the same way (`benches/steer_latency.py` measures that case
alone, with a polling baseline).

PostgreSQL: `SPICE_BENCH_POSTGRES` (an admin URL; a database is created and dropped),
else a throwaway cluster from /usr/lib/postgresql/*/bin on a unix socket in a temp dir
(as root the server runs as `postgres`, as `.ci/run` does). Binary: target/release/spice
unless `SPICE_BIN` names another.
"""
import argparse, glob, os, shutil, statistics, subprocess, sys, tempfile, time, uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import steer_latency as sl  # noqa: E402  (wait_for, pct)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SPICE = os.path.abspath(os.environ.get("SPICE_BIN") or os.path.join(ROOT, "target", "release", "spice"))
GOAL_MS = 100.0


class Cluster:
    """A throwaway PostgreSQL cluster on a unix socket, or the server named by
    SPICE_BENCH_POSTGRES; `url` is a fresh database on it."""

    def __init__(self):
        self.dir = None
        admin = os.environ.get("SPICE_BENCH_POSTGRES")
        if not admin:
            bins = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
            if not bins:
                sys.exit("no PostgreSQL: set SPICE_BENCH_POSTGRES or install the server binaries")
            self.bin = os.path.dirname(bins[-1])
            # A directory of its own: the server's user must reach it.
            self.dir = tempfile.mkdtemp(prefix="spice-bench-pg-")
            self.root = os.geteuid() == 0
            if self.root:
                subprocess.run(["chown", "postgres:postgres", self.dir], check=True)
            self.run("initdb", "-D", f"{self.dir}/data", "-U", "postgres", "--auth=trust",
                     "--no-sync", "-E", "UTF8", "--locale=C")
            self.run("pg_ctl", "-D", f"{self.dir}/data", "-w", "-l", f"{self.dir}/server.log",
                     "-o", f"-k {self.dir} -c listen_addresses='' -c fsync=off", "start")
            admin = f"postgresql:///postgres?host={self.dir}&user=postgres"
        self.admin = admin
        self.name = "spice_bench_" + uuid.uuid4().hex
        self.psql(f"CREATE DATABASE {self.name}")
        head, _, query = admin.partition("?")
        scheme, _, rest = head.partition("://")
        auth = rest.split("/", 1)[0]
        self.url = f"{scheme}://{auth}/{self.name}" + (f"?{query}" if query else "")

    def run(self, tool, *args):
        cmd = [os.path.join(self.bin, tool), *args]
        if self.root:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        subprocess.run(cmd, check=True, capture_output=True, cwd=self.dir)

    def psql(self, sql):
        subprocess.run(["psql", self.admin, "-qc", sql], check=True, capture_output=True)

    def close(self):
        if self.dir:
            self.run("pg_ctl", "-D", f"{self.dir}/data", "-w", "-m", "immediate", "stop")
            shutil.rmtree(self.dir, ignore_errors=True)
        else:
            self.psql(f"DROP DATABASE IF EXISTS {self.name} WITH (FORCE)")


def host(work, name, url=None):
    """A host: a repository of its own and a SPICE_HOME, on `url` when given."""
    repo, home = os.path.join(work, name, "repo"), os.path.join(work, name, "home")
    os.makedirs(repo)
    os.makedirs(home)
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    if url:
        with open(os.path.join(home, "config.toml"), "w") as f:
            f.write(f'[store]\nurl = "{url}"\n')
    env = {"PATH": os.environ["PATH"], "HOME": work, "SPICE_HOME": home, "SPICE_LANE": "core"}
    return env, repo


def one_run(steerer, runner, i):
    """(from steer's return, from its start), in seconds, for one item."""
    (a_env, a_repo), (b_env, b_repo) = steerer, runner
    p = subprocess.Popen([SPICE, "exec", "--", "sleep", "5"], env=b_env, cwd=b_repo,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    # Past the wrapper's start-up and its 50 ms before it watches the store.
    time.sleep(0.4)
    start = time.perf_counter()
    out = subprocess.run([SPICE, "steer", "--force", "lane:core", f"probe {i}"], env=a_env,
                         cwd=a_repo, capture_output=True, text=True, check=True)
    t0 = time.perf_counter()
    key = out.stdout.strip()
    t1 = sl.wait_for(p.stderr, key.encode(), t0 + 5)
    still = p.poll() is None
    p.kill()
    p.wait()
    if t1 is None or not still:
        sys.exit(f"run {i}: the item never reached the running command")
    subprocess.run([SPICE, "ack", "apply"], env=a_env, cwd=a_repo, input=f"ACK {key}: measured\n",
                   text=True, capture_output=True, check=True)
    return t1 - t0, t1 - start


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=30)
    a = ap.parse_args()
    if not os.path.exists(SPICE):
        sys.exit("build first: cargo build --release")
    work = tempfile.mkdtemp(prefix="spice-hosts-bench-")
    pg = Cluster()
    try:
        host_a, host_b = host(work, "a", pg.url), host(work, "b", pg.url)
        single = host(work, "single")
        for h in (host_a, single):
            subprocess.run([SPICE, "task", "claims"], env=h[0], cwd=h[1], check=True, capture_output=True)
        two, one = [], []
        for i in range(a.runs):
            two.append(one_run(host_a, host_b, i))
            one.append(one_run(single, single, i))
        print(f"steer -> mid-command delivery, {a.runs} runs each, alternating, ms")
        print(f"binary {SPICE}")
        print("                                          from steer's return     from steer's start")
        for name, xs in (("PostgreSQL, steer on A, exec on B", two), ("baseline: SQLite, one host", one)):
            ret = [x[0] * 1000 for x in xs]
            sta = [x[1] * 1000 for x in xs]
            print(f"  {name:38}  median {statistics.median(ret):6.1f} p95 {sl.pct(ret, 95):6.1f}"
                  f"   median {statistics.median(sta):6.1f} p95 {sl.pct(sta, 95):6.1f}")
        med = statistics.median([x[1] for x in two]) * 1000
        base = statistics.median([x[1] for x in one]) * 1000
        print(f"  ratio two hosts (PostgreSQL) / one host (SQLite), medians from start = {med / base:.2f}")
        verdict = "met" if med < GOAL_MS else "NOT met"
        print(f"  goal: median < {GOAL_MS:.0f} ms from steer's start on two hosts: {med:.1f} ms, {verdict}")
    finally:
        pg.close()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
