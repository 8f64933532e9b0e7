//! A running `spice serve` for tests, and a deliberately plain HTTP/1.1 client over a
//! TCP socket, so tests can send exactly the headers (and the malformed requests)
//! they mean to.
#![allow(dead_code)]

use super::TestEnv;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Server {
    child: Child,
    /// `127.0.0.1:PORT`
    pub addr: String,
    /// What the server printed before its `listening on` line.
    pub banner: Vec<String>,
}

impl Server {
    /// Starts `spice serve --bind 127.0.0.1:0 ARGS…` and waits for its address.
    pub fn start(env: &TestEnv, args: &[&str]) -> Server {
        let mut cmd = Self::command(env, args);
        cmd.stderr(Stdio::inherit());
        Self::spawn(cmd)
    }

    /// The command [`Server::start`] runs, to adjust before [`Server::spawn`].
    pub fn command(env: &TestEnv, args: &[&str]) -> Command {
        let mut a = vec!["serve"];
        if !args.contains(&"--bind") {
            a.extend(["--bind", "127.0.0.1:0"]);
        }
        a.extend_from_slice(args);
        env.cmd(&a)
    }

    /// Runs a `spice serve` command and waits for its address.
    pub fn spawn(mut cmd: Command) -> Server {
        let mut child = cmd
            .stdout(Stdio::piped())
            .spawn()
            .expect("spice serve starts");
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut banner = Vec::new();
        loop {
            let line = lines
                .next()
                .unwrap_or_else(|| panic!("spice serve exited early: {:?}", child.wait()))
                .unwrap();
            if let Some(url) = line.strip_prefix("listening on http://") {
                let addr = url.trim_end_matches('/').to_string();
                return Server {
                    child,
                    addr: addr.replace("0.0.0.0", "127.0.0.1"),
                    banner,
                };
            }
            banner.push(line);
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn port(&self) -> u16 {
        self.addr.rsplit(':').next().unwrap().parse().unwrap()
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// A GET with the right Host and nothing else.
    pub fn get(&self, path: &str) -> Resp {
        self.send("GET", path, &[], b"")
    }

    /// A JSON POST as the page sends it (same Origin, content type, custom header).
    pub fn post(&self, path: &str, body: &serde_json::Value) -> Resp {
        let origin = format!("http://{}", self.addr);
        self.send(
            "POST",
            path,
            &[
                ("Origin", &origin),
                ("Content-Type", "application/json"),
                ("X-Spice", "1"),
            ],
            body.to_string().as_bytes(),
        )
    }

    /// Sends one request with `Host` (unless given), `Connection: close` and
    /// `Content-Length` (for a non-empty body) added.
    pub fn send(&self, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Resp {
        let mut head = format!("{method} {path} HTTP/1.1\r\n");
        if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
            head.push_str(&format!("Host: {}\r\n", self.addr));
        }
        for (k, v) in headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        if !body.is_empty()
            && !headers
                .iter()
                .any(|(k, _)| k.eq_ignore_ascii_case("transfer-encoding"))
        {
            head.push_str(&format!("Content-Length: {}\r\n", body.len()));
        }
        head.push_str("Connection: close\r\n\r\n");
        let mut raw = head.into_bytes();
        raw.extend_from_slice(body);
        self.raw(&raw)
    }

    /// Writes `bytes` as they are and reads the answer to the end.
    pub fn raw(&self, bytes: &[u8]) -> Resp {
        let mut s = TcpStream::connect(&self.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        // The server may answer (and close) before it read a large body.
        let _ = s.write_all(bytes);
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out);
        Resp::parse(&out)
    }

    /// Opens an event stream (`text/event-stream`).
    pub fn stream(&self, path: &str, headers: &[(&str, &str)]) -> Sse {
        let mut s = TcpStream::connect(&self.addr).unwrap();
        let mut head = format!(
            "GET {path} HTTP/1.1\r\nHost: {}\r\nAccept: text/event-stream\r\n",
            self.addr
        );
        for (k, v) in headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head.push_str("\r\n");
        s.write_all(head.as_bytes()).unwrap();
        s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
        Sse {
            s,
            buf: String::new(),
            seen: 0,
        }
    }

    pub fn stop(mut self) -> std::process::ExitStatus {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
        let t = Instant::now();
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                return st;
            }
            assert!(
                t.elapsed() < Duration::from_secs(10),
                "serve did not stop on SIGTERM"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[derive(Debug)]
pub struct Resp {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Resp {
    fn parse(raw: &[u8]) -> Resp {
        let text = String::from_utf8_lossy(raw);
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
        let mut lines = head.lines();
        let status = lines
            .next()
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        let headers: Vec<(String, String)> = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
            .collect();
        let chunked = headers
            .iter()
            .any(|(k, v)| k == "transfer-encoding" && v.contains("chunked"));
        let body = if chunked {
            dechunk(body)
        } else {
            body.to_string()
        };
        Resp {
            status,
            headers,
            body,
        }
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    #[track_caller]
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("status {}: bad JSON {e}: {}", self.status, self.body))
    }

    /// Asserts the status and returns the body as JSON.
    #[track_caller]
    pub fn expect(&self, status: u16) -> serde_json::Value {
        assert_eq!(self.status, status, "{}", self.body);
        self.json()
    }

    /// Asserts a JSON error with this status whose one-line message contains `needle`.
    #[track_caller]
    pub fn refused(&self, status: u16, needle: &str) {
        let v = self.expect(status);
        let e = v["error"]
            .as_str()
            .unwrap_or_else(|| panic!("no error: {v}"));
        assert!(!e.contains('\n'), "{e}");
        assert!(e.contains(needle), "error {e:?} should mention {needle:?}");
    }
}

fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = s.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        s = rest[n..].trim_start_matches("\r\n");
    }
    out
}

/// An open event stream.
pub struct Sse {
    s: TcpStream,
    buf: String,
    seen: usize,
}

impl Sse {
    /// The HTTP status line, once the head arrived.
    pub fn status(&mut self, within: Duration) -> u16 {
        let t = Instant::now();
        while !self.buf.contains("\r\n\r\n") && t.elapsed() < within {
            self.fill();
        }
        self.buf
            .lines()
            .next()
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|c| c.parse().ok())
            .unwrap_or(0)
    }

    fn fill(&mut self) -> bool {
        let mut chunk = [0u8; 8192];
        match self.s.read(&mut chunk) {
            Ok(0) => false,
            Ok(n) => {
                self.buf.push_str(&String::from_utf8_lossy(&chunk[..n]));
                true
            }
            Err(_) => true,
        }
    }

    /// The next event named `name` (its data), waiting at most `within`.
    pub fn next(&mut self, name: &str, within: Duration) -> Option<String> {
        let t = Instant::now();
        loop {
            let needle = format!("event:{name}\n");
            if let Some(i) = self.buf[self.seen..].find(&needle) {
                let start = self.seen + i + needle.len();
                if let Some(end) = self.buf[start..].find("\n\n") {
                    let block = &self.buf[start..start + end];
                    let data: Vec<&str> = block
                        .lines()
                        .filter_map(|l| l.strip_prefix("data:"))
                        .collect();
                    self.seen = start + end;
                    return Some(data.join("\n"));
                }
            }
            if t.elapsed() > within {
                return None;
            }
            if !self.fill() {
                return None;
            }
        }
    }
}
