//! `spice serve` at its edges (issue #14): connections that never send a byte, more of
//! them than the connection bound and the server's file limit, a header-read timeout
//! that must not cut a live stream, every connection busy, and file descriptors
//! running out. The server runs under a lowered `RLIMIT_NOFILE` (set between fork and
//! exec); the test process raises its own soft limit to hold the idle connections.

use crate::common;
use crate::common::console;

use common::TestEnv;
use console::Server;
use nix::sys::resource::{getrlimit, setrlimit, Resource};
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// `spice serve ARGS…` with its file limit (soft and hard) set to `nofile`.
fn limited(env: &TestEnv, nofile: u64, args: &[&str]) -> Command {
    let mut cmd = Server::command(env, args);
    // SAFETY: setrlimit is async-signal-safe and touches only the child.
    unsafe {
        cmd.pre_exec(move || {
            setrlimit(Resource::RLIMIT_NOFILE, nofile, nofile).map_err(std::io::Error::from)
        });
    }
    cmd
}

/// Lets this process hold `n` more sockets, or says why it cannot.
fn room_for(n: u64) {
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).unwrap();
    let want = n + 256;
    if soft < want {
        assert!(
            hard >= want,
            "this test holds {n} sockets: it needs a file limit of {want}, and the hard limit is {hard} (raise it with ulimit -Hn)"
        );
        setrlimit(Resource::RLIMIT_NOFILE, want, hard).unwrap();
    }
}

/// Connects and sends nothing.
fn idle(addr: &SocketAddr) -> TcpStream {
    let s = TcpStream::connect_timeout(addr, Duration::from_secs(10))
        .unwrap_or_else(|e| panic!("connect to {addr}: {e}"));
    s.set_nonblocking(true).unwrap();
    s
}

/// True once the server closed `s` (end of file or reset), without blocking.
fn closed(s: &mut TcpStream) -> bool {
    let mut b = [0u8; 512];
    match s.read(&mut b) {
        Ok(0) => true,
        Ok(_) => false, // an answer (a timeout may send one); the close follows
        Err(e) if e.kind() == ErrorKind::WouldBlock => false,
        Err(_) => true,
    }
}

/// Waits until `cond` holds, at most `within`.
fn wait_until(within: Duration, what: &str, mut cond: impl FnMut() -> bool) {
    let t = Instant::now();
    while !cond() {
        assert!(t.elapsed() < within, "timed out waiting: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count()
}

/// CPU seconds the process has used (user + system).
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after_name = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = after_name.split_whitespace().collect();
    // Fields 14 and 15 of stat(5) (utime, stime), counted from after the name.
    let ticks: f64 = f[11].parse::<f64>().unwrap() + f[12].parse::<f64>().unwrap();
    // /proc reports clock ticks in USER_HZ, which Linux fixes at 100.
    ticks / 100.0
}

#[test]
fn idle_connections_past_the_bound_and_the_file_limit_leave_the_console_serving() {
    const IDLE: usize = 1_100;
    room_for(IDLE as u64 + 10);
    let env = TestEnv::new();
    env.add(&["Something to show"]);
    let srv = Server::spawn(limited(&env, 1024, &["--header-timeout", "3s"]));
    let addr: SocketAddr = srv.addr.parse().unwrap();
    assert_eq!(srv.get("/api/status").status, 200);

    let t = Instant::now();
    let mut flood: Vec<TcpStream> = (0..IDLE).map(|_| idle(&addr)).collect();
    let opened = t.elapsed();
    let t = Instant::now();
    let r = srv.get("/api/status");
    let latency = t.elapsed();
    assert_eq!(r.status, 200, "{}", r.body);
    let t = Instant::now();
    let page = srv.get("/");
    let page_latency = t.elapsed();
    assert_eq!(page.status, 200);
    // The bound (512 by default, below the file limit of 1024) holds: the connections
    // idle longest made room for the newer ones.
    let fds = open_fds(srv.pid());
    assert!(fds < 512 + 64, "the server holds {fds} descriptors");
    let mut open = IDLE;
    wait_until(
        Duration::from_secs(10),
        "the displaced connections closed",
        || {
            open = flood.iter_mut().map(closed).filter(|c| !c).count();
            open <= 512
        },
    );
    println!(
        "IDLE: {IDLE} idle connections opened in {opened:.1?} against a 1024-descriptor server; \
         /api/status answered in {latency:.1?}, / in {page_latency:.1?}; {open} still open, \
         the server holds {fds} descriptors"
    );
    // Every idle connection is closed once the header timeout (3 s) passes.
    let t = Instant::now();
    wait_until(
        Duration::from_secs(15),
        "every idle connection closed",
        || flood.iter_mut().all(closed),
    );
    println!("IDLE: the rest closed {:.1?} later", t.elapsed());
    assert_eq!(srv.get("/api/status").status, 200);
    assert!(srv.stop().success());
}

#[test]
fn the_header_timeout_closes_silent_connections_but_never_a_live_stream() {
    let env = TestEnv::new();
    std::fs::create_dir_all(env.repo.join("lanes")).unwrap();
    std::fs::write(env.repo.join("lanes/a.toml"), "profile = \"demo\"\n").unwrap();
    let srv = Server::start(&env, &["--header-timeout", "1s"]);
    let addr: SocketAddr = srv.addr.parse().unwrap();
    let mut live = srv.stream("/api/live", &[]);
    assert_eq!(live.status(Duration::from_secs(5)), 200);
    let first = live
        .next("change", Duration::from_secs(5))
        .expect("first change");
    let mut silent = idle(&addr);
    // A keep-alive connection that asked once and then went quiet.
    let mut kept = TcpStream::connect(addr).unwrap();
    write!(kept, "GET /app.css HTTP/1.1\r\nHost: {}\r\n\r\n", srv.addr).unwrap();
    kept.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut head = [0u8; 12];
    kept.read_exact(&mut head).unwrap();
    assert_eq!(&head, b"HTTP/1.1 200");
    kept.set_nonblocking(true).unwrap();
    let mut drain = || {
        let mut b = [0u8; 65536];
        loop {
            match kept.read(&mut b) {
                Ok(0) => return true,
                Ok(_) => continue,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return false,
                Err(_) => return true,
            }
        }
    };
    wait_until(
        Duration::from_secs(10),
        "the silent connection closed",
        || closed(&mut silent),
    );
    wait_until(
        Duration::from_secs(10),
        "the quiet keep-alive closed",
        &mut drain,
    );
    // The stream, opened before the silent connection that timed out, still delivers.
    env.run(&["steer", "lane:a", "after the timeout"]).ok();
    let next = live
        .next("change", Duration::from_secs(10))
        .expect("the live stream still reports changes");
    assert_ne!(first, next);
    assert_eq!(srv.get("/api/status").status, 200);
}

#[test]
fn when_every_connection_is_busy_a_new_one_is_answered_503_not_left_waiting() {
    let env = TestEnv::new();
    let srv = Server::start(&env, &["--max-connections", "3"]);
    let mut streams: Vec<_> = (0..3)
        .map(|_| {
            let mut s = srv.stream("/api/live", &[]);
            assert_eq!(s.status(Duration::from_secs(5)), 200);
            s
        })
        .collect();
    let t = Instant::now();
    srv.get("/api/status").refused(503, "too many connections");
    assert!(t.elapsed() < Duration::from_secs(5));
    streams.pop();
    wait_until(
        Duration::from_secs(10),
        "a slot freed by the closed stream",
        || srv.get("/api/status").status == 200,
    );
}

#[test]
fn running_out_of_file_descriptors_neither_ends_nor_spins_the_accept_loop() {
    let env = TestEnv::new();
    let mut cmd = limited(&env, 64, &["--max-connections", "1000"]);
    let log = env.dir.path().join("serve.err");
    cmd.stderr(Stdio::from(std::fs::File::create(&log).unwrap()));
    let srv = Server::spawn(cmd);
    assert_eq!(srv.get("/api/status").status, 200);
    // Live streams are busy, so none can be closed to make room: open them until the
    // server has no descriptor left for the next one.
    let mut streams = Vec::new();
    let waiting = loop {
        assert!(streams.len() < 64, "64 descriptors never ran out");
        let mut s = srv.stream("/api/live", &[]);
        if s.status(Duration::from_secs(2)) != 200 {
            break s;
        }
        streams.push(s);
    };
    let stderr = std::fs::read_to_string(&log).unwrap();
    assert!(stderr.contains("out of file descriptors"), "{stderr}");
    assert!(stderr.contains("--max-connections 1000"), "{stderr}");
    // Held at the limit with a connection waiting, the loop sleeps between tries.
    let (cpu, t) = (cpu_seconds(srv.pid()), Instant::now());
    std::thread::sleep(Duration::from_secs(2));
    let used = (cpu_seconds(srv.pid()) - cpu) / t.elapsed().as_secs_f64();
    assert!(
        used < 0.25,
        "the server used {:.0}% of a core while waiting",
        used * 100.0
    );
    // A descriptor comes back: the waiting connection is served.
    drop(streams.pop());
    let mut waiting = waiting;
    let st = waiting.status(Duration::from_secs(10));
    assert_eq!(st, 200, "{}", std::fs::read_to_string(&log).unwrap());
    assert!(waiting.next("change", Duration::from_secs(5)).is_some());
    println!(
        "EMFILE: {} streams filled a 64-descriptor server; {:.1}% of a core while waiting",
        streams.len() + 1,
        used * 100.0
    );
    drop(streams);
    assert!(srv.stop().success());
}
