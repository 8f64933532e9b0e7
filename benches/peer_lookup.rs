//! The console's check of who made a connection (`spice::agent::peer::agent_of`: the
//! client end in `/proc/net/tcp`, the processes holding it, their ancestors) against
//! the baseline of making and accepting the loopback connection it is asked about.
//! The check runs once per accepted connection, never per request on a kept-alive
//! one. It grows with the processes on the machine, so the bench also runs it with
//! `--extra N` idle processes added (default 200). Run with
//! `cargo bench --bench peer_lookup [-- --extra N]`; each figure is the median of
//! five rounds of 200.

use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

const ROUNDS: usize = 5;
const PER_ROUND: u32 = 200;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// Per connection: connect and accept (the baseline), and the check.
fn measure() -> (Duration, Duration) {
    let server = TcpListener::bind("127.0.0.1:0").unwrap();
    let local = server.local_addr().unwrap();
    let mut connect = Vec::new();
    let mut check = Vec::new();
    for _ in 0..ROUNDS {
        let (mut connecting, mut checking) = (Duration::ZERO, Duration::ZERO);
        // One connection open at a time, as a browser opening the console holds a
        // few: the check reads every process's descriptors.
        for _ in 0..PER_ROUND {
            let t = Instant::now();
            let c = TcpStream::connect(local).unwrap();
            let (s, peer) = server.accept().unwrap();
            connecting += t.elapsed();
            let t = Instant::now();
            assert_eq!(spice::agent::peer::agent_of(peer, local), None);
            checking += t.elapsed();
            drop((c, s));
        }
        connect.push(connecting / PER_ROUND);
        check.push(checking / PER_ROUND);
    }
    (median(connect), median(check))
}

fn report(label: &str) {
    let procs = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.parse::<u32>().is_ok())
        })
        .count();
    let (connect, check) = measure();
    println!(
        "{label}: {procs} processes: connect+accept {connect:?}, check {check:?} per connection ({:.1}x the baseline)",
        check.as_secs_f64() / connect.as_secs_f64()
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let extra = args
        .iter()
        .position(|a| a == "--extra")
        .and_then(|i| args.get(i + 1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(200usize);
    report("as the machine is");
    let mut idle: Vec<Child> = (0..extra)
        .map(|_| Command::new("sleep").arg("600").spawn().unwrap())
        .collect();
    report(&format!("with {extra} idle processes more"));
    for c in &mut idle {
        let _ = c.kill();
        let _ = c.wait();
    }
}
