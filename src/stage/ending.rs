//! Ending a command with everything it started, and reading its output within bounds.
//!
//! A command the runner starts leads its own process group, but anything it starts may
//! leave that group (`setsid`, a daemon's double fork) and outlive a `killpg`. So each
//! command is marked: the runner adds a token of its own to `SPICE_JOB` in the command's
//! environment (appended, so a `spice` run by a hook marks its own commands with both
//! tokens), every descendant inherits it, and [`end_all`] kills the process group and
//! then every process whose environment carries the token, looking again until none is
//! left. This needs no privilege and no cgroup; a descendant that both leaves the group
//! and clears its environment escapes it (the lane sandbox is the bound for those).
//!
//! Output is read in lines of at most [`MAX_LINE`] bytes: a longer line is cut there
//! and says how long it was, so one command printing a gigabyte on one line costs
//! [`MAX_LINE`] of memory, not a gigabyte.

use std::io::{BufRead, ErrorKind};
use std::sync::atomic::{AtomicU64, Ordering};

/// The environment variable carrying the tokens of the runs a process belongs to.
pub const VAR: &str = "SPICE_JOB";

/// The longest line of output kept whole (bytes); the rest of a longer line is counted,
/// not kept.
pub const MAX_LINE: usize = 16 * 1024;

/// A token no other run of any process has: this process's id, a counter, the time.
pub fn token() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!("{}.{n}.{nanos:x}", std::process::id())
}

/// `SPICE_JOB` for a command marked with `token`: the tokens it inherits (from `inherited`,
/// the value the command would otherwise get) followed by its own.
pub fn marked(inherited: Option<&str>, token: &str) -> String {
    match inherited.map(str::trim).filter(|s| !s.is_empty()) {
        Some(outer) => format!("{outer} {token}"),
        None => token.to_string(),
    }
}

/// Whether a process environment (`/proc/PID/environ`: `NUL`-separated) carries `token`.
fn carries(environ: &[u8], token: &str) -> bool {
    let key = format!("{VAR}=");
    environ
        .split(|b| *b == 0)
        .filter_map(|kv| kv.strip_prefix(key.as_bytes()))
        .any(|v| v.split(|b| *b == b' ').any(|t| t == token.as_bytes()))
}

/// The processes, other than this one, whose environment carries `token`.
pub fn marked_processes(token: &str) -> Vec<i32> {
    let me = std::process::id() as i32;
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    rd.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| *pid != me)
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ")).is_ok_and(|env| carries(&env, token))
        })
        .collect()
}

/// Kills the process group `pgid` and every process marked with `token` (module doc),
/// looking again while any is found (at most a few rounds: one that forks faster than
/// it is killed is bounded by those rounds).
pub fn end_all(pgid: i32, token: &str) {
    use nix::sys::signal::{kill, killpg, Signal};
    use nix::unistd::Pid;
    let _ = killpg(Pid::from_raw(pgid), Signal::SIGKILL);
    for _ in 0..8 {
        let left = marked_processes(token);
        if left.is_empty() {
            return;
        }
        for pid in left {
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// Reads one line (without its end) into `line`, keeping at most [`MAX_LINE`] bytes
/// of it; `Ok(None)` at the end of the output, else how many bytes the line had.
pub fn read_line(r: &mut impl BufRead, line: &mut Vec<u8>) -> std::io::Result<Option<usize>> {
    line.clear();
    let mut total = 0usize;
    loop {
        let buf = match r.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if buf.is_empty() {
            return Ok((total > 0).then_some(total));
        }
        let (chunk, done) = match memchr::memchr(b'\n', buf) {
            Some(i) => (&buf[..i], Some(i + 1)),
            None => (buf, None),
        };
        let room = MAX_LINE.saturating_sub(line.len());
        line.extend_from_slice(&chunk[..chunk.len().min(room)]);
        total += chunk.len();
        match done {
            Some(n) => {
                r.consume(n);
                return Ok(Some(total));
            }
            None => {
                let n = buf.len();
                r.consume(n);
            }
        }
    }
}

/// A line read by [`read_line`] as text: lossy UTF-8, `\r` trimmed, and a cut line
/// saying how long it was.
pub fn text(line: &[u8], total: usize) -> String {
    let mut s = String::from_utf8_lossy(line)
        .trim_end_matches('\r')
        .to_string();
    if total > line.len() {
        s.push_str(&format!(" … (line cut: {total} bytes)"));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_found_among_inherited_ones_only_whole() {
        let env = b"A=1\0SPICE_JOB=10.1.ff 20.3.aa\0B=2\0";
        assert!(carries(env, "10.1.ff"));
        assert!(carries(env, "20.3.aa"));
        assert!(!carries(env, "10.1.f"));
        assert!(!carries(b"XSPICE_JOB=10.1.ff\0", "10.1.ff"));
        assert_eq!(marked(None, "t"), "t");
        assert_eq!(marked(Some(" "), "t"), "t");
        assert_eq!(marked(Some("a b"), "t"), "a b t");
        assert_ne!(token(), token());
    }

    #[test]
    fn lines_are_cut_at_the_bound_and_say_so() {
        let big = "x".repeat(MAX_LINE * 3 + 7);
        let input = format!("short\r\n{big}\nlast");
        let mut r = std::io::BufReader::with_capacity(1000, input.as_bytes());
        let mut line = Vec::new();
        let n = read_line(&mut r, &mut line).unwrap().unwrap();
        assert_eq!(text(&line, n), "short");
        let n = read_line(&mut r, &mut line).unwrap().unwrap();
        assert_eq!(line.len(), MAX_LINE);
        assert!(text(&line, n).ends_with(&format!("(line cut: {} bytes)", MAX_LINE * 3 + 7)));
        let n = read_line(&mut r, &mut line).unwrap().unwrap();
        assert_eq!(text(&line, n), "last");
        assert_eq!(read_line(&mut r, &mut line).unwrap(), None);
        // An empty line is a line, not the end.
        let mut r = std::io::BufReader::new(&b"\nx"[..]);
        assert_eq!(read_line(&mut r, &mut line).unwrap(), Some(0));
    }
}
