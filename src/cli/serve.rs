//! `spice serve`: the operator's console in a browser, on either backend. This file
//! only gathers what the console needs from the process (the store's location, state
//! directory, this host's name, bind address, token file, the signals that stop it);
//! `crate::web` does the rest.

use super::Env;
use crate::clock::SystemClock;
use crate::error::{Error, Result};
use crate::web;
use clap::Args;
use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// The port used when `--bind` names none.
pub const DEFAULT_PORT: u16 = 7777;

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// ADDR[:PORT] to listen on; port 0 picks a free one. Anything but loopback
    /// requires the token.
    #[arg(long, value_parser = bind_addr, default_value = "127.0.0.1:7777")]
    bind: SocketAddr,
    /// Where the token is kept (default: serve.token in the state directory).
    #[arg(long, value_name = "FILE")]
    token_file: Option<PathBuf>,
    /// Another host name the console answers to (a tunnel or tailnet name); repeatable.
    #[arg(long = "allow-host", value_name = "NAME")]
    allow_hosts: Vec<String>,
    /// Connections served at once [default: 512, or the file limit less 64 if lower].
    /// At the bound a new connection closes the one idle longest; when all are busy
    /// (requests, live streams) it is answered 503.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    max_connections: Option<u32>,
    /// How long a connection may take to send a request head, after connecting or
    /// after its previous response, before it is closed.
    #[arg(long, value_name = "DURATION", value_parser = super::task::duration, default_value = "10s")]
    header_timeout: Duration,
}

/// File descriptors kept for everything but connections (the store's pool and
/// watcher, transcripts being read, the runtime's own): this many, or a quarter of a
/// smaller limit.
const FD_RESERVE: u64 = 64;

/// The connection bound: the operator's, or the default lowered to what the file
/// limit leaves. An explicit bound above that is kept with a warning (connections
/// past the file limit then wait for a descriptor, see `web::server`).
fn max_connections(asked: Option<u32>) -> usize {
    let soft = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)
        .map(|(soft, _)| soft)
        .unwrap_or(u64::MAX);
    let room = soft.saturating_sub(FD_RESERVE.min(soft / 4)).max(1);
    match asked {
        Some(n) => {
            if u64::from(n) > room {
                eprintln!(
                    "spice: serve: --max-connections {n} is more than the file limit ({soft}) \
                     leaves room for (about {room}); connections past it wait for a descriptor"
                );
            }
            n as usize
        }
        None => (web::server::DEFAULT_MAX_CONNECTIONS as u64).min(room) as usize,
    }
}

fn bind_addr(s: &str) -> std::result::Result<SocketAddr, String> {
    if let Ok(a) = s.parse::<SocketAddr>() {
        return Ok(a);
    }
    let (host, port) = match s.rsplit_once(':') {
        Some((h, p)) if !h.contains(':') || h.starts_with('[') => (
            h.trim_start_matches('[').trim_end_matches(']'),
            p.parse::<u16>()
                .map_err(|_| format!("invalid port in '{s}'"))?,
        ),
        _ => (s, DEFAULT_PORT),
    };
    let ip = match host {
        "localhost" => IpAddr::V4(Ipv4Addr::LOCALHOST),
        h => h.parse::<IpAddr>().map_err(|_| {
            format!("invalid address '{s}': expected an IP address with an optional :PORT")
        })?,
    };
    Ok(SocketAddr::new(ip, port))
}

/// Pending connections the kernel queues for the accept loop (capped at somaxconn).
/// std's 128 is too few: under a burst (a flood of idle connections the server is
/// displacing), a page's connection would lose its SYN and wait a second to retry.
const BACKLOG: u32 = 4096;

/// Binds `addr` as std would (`SO_REUSEADDR`), with a [`BACKLOG`]-long queue.
fn listen(
    runtime: &tokio::runtime::Runtime,
    addr: SocketAddr,
) -> std::io::Result<std::net::TcpListener> {
    let _in_runtime = runtime.enter();
    let socket = match addr {
        SocketAddr::V4(_) => tokio::net::TcpSocket::new_v4()?,
        SocketAddr::V6(_) => tokio::net::TcpSocket::new_v6()?,
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(BACKLOG)?.into_std()
}

/// Why `addr` cannot be listened on, in one line that says what to do instead.
fn cannot_listen(addr: SocketAddr, e: std::io::Error) -> Error {
    let ip = match addr.ip() {
        IpAddr::V6(v6) => format!("[{v6}]"),
        ip => ip.to_string(),
    };
    let other_port = format!("--bind {ip}:PORT with another port (--bind {ip}:0 picks a free one)");
    let why = match e.kind() {
        std::io::ErrorKind::AddrInUse => format!(
            "cannot listen on {addr}: the address is in use (another spice serve, or another \
             program); use {other_port}"
        ),
        std::io::ErrorKind::PermissionDenied => format!(
            "cannot listen on {addr}: permission denied (ports below 1024 need privileges); \
             use {other_port}"
        ),
        std::io::ErrorKind::AddrNotAvailable => format!(
            "cannot listen on {addr}: {} is not an address of this host; use --bind \
             127.0.0.1:{} or an address this host has",
            addr.ip(),
            addr.port()
        ),
        _ => {
            return Error::Io {
                context: format!("failed to listen on {addr}"),
                source: e,
            }
        }
    };
    Error::Other(why)
}

fn io(context: String) -> impl FnOnce(std::io::Error) -> Error {
    move |source| Error::Io { context, source }
}

pub fn serve(args: ServeArgs, env: Env) -> Result<()> {
    // Open the store first so a bad state directory or an unreachable server is
    // reported before anything binds.
    drop(env.authority()?);
    let loopback = args.bind.ip().is_loopback();
    let mut hosts: Vec<String> = vec!["localhost".into(), "127.0.0.1".into(), "[::1]".into()];
    let own = match args.bind.ip() {
        IpAddr::V6(v6) => format!("[{v6}]"),
        ip => ip.to_string(),
    };
    if !args.bind.ip().is_unspecified() && !hosts.contains(&own) {
        hosts.push(own);
    }
    for h in &args.allow_hosts {
        if h.is_empty() || h.contains(|c: char| c == '/' || c == ':' || c.is_whitespace()) {
            return Err(Error::input(format!(
                "invalid --allow-host '{h}': a host name without port or scheme"
            )));
        }
        hosts.push(h.to_ascii_lowercase());
    }
    let (token, fresh) = if loopback {
        (None, false)
    } else {
        let file = args
            .token_file
            .clone()
            .unwrap_or_else(|| env.state_dir.join(web::token::TOKEN_FILE));
        let (t, fresh) = web::token::load_or_create(&file)?;
        if !fresh {
            eprintln!(
                "spice: serve: token in {} (shown only when created)",
                file.display()
            );
        }
        (Some(t), fresh)
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(io("failed to start the async runtime".into()))?;
    let listener = listen(&runtime, args.bind).map_err(|e| cannot_listen(args.bind, e))?;
    let addr = listener
        .local_addr()
        .map_err(io("failed to read the bound address".into()))?;
    let guard = web::guard::Guard::new(hosts, token.clone());
    let cfg = web::Config {
        location: env.location.clone(),
        state_dir: env.state_dir.clone(),
        host: env.host.clone(),
        clock: Arc::new(SystemClock),
        guard,
        parse_target: Box::new(move |t, force| super::steer::steer_target(&env, t, force)),
        poll: Duration::from_millis(100),
        limits: web::server::Limits {
            max_connections: max_connections(args.max_connections),
            header_timeout: args.header_timeout,
        },
        git: crate::git::Runner::new(std::env::vars_os()),
    };
    {
        let mut out = std::io::stdout().lock();
        let shown = if addr.ip().is_unspecified() {
            SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), addr.port())
        } else {
            addr
        };
        if let (Some(t), true) = (&token, fresh) {
            let _ = writeln!(
                out,
                "token (shown once, kept mode 0600): open http://{shown}/login?token={t}"
            );
        }
        // Last, so a script that waits for this line has everything before it.
        let _ = writeln!(out, "listening on http://{shown}/");
        let _ = out.flush();
    }
    runtime.block_on(async move {
        let stop = async {
            let term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate());
            match term {
                Ok(mut term) => {
                    tokio::select! {
                        _ = tokio::signal::ctrl_c() => {}
                        _ = term.recv() => {}
                    }
                }
                Err(_) => {
                    let _ = tokio::signal::ctrl_c().await;
                }
            }
        };
        web::serve(cfg, listener, stop).await
    })?;
    // Streams and the blocking pool end with the runtime; don't wait on a stuck read.
    runtime.shutdown_timeout(Duration::from_secs(2));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bind_addresses() {
        assert_eq!(bind_addr("127.0.0.1:0").unwrap().port(), 0);
        assert_eq!(
            bind_addr("localhost").unwrap(),
            "127.0.0.1:7777".parse().unwrap()
        );
        assert_eq!(bind_addr("0.0.0.0:80").unwrap().port(), 80);
        assert_eq!(bind_addr("[::1]:9").unwrap(), "[::1]:9".parse().unwrap());
        assert_eq!(bind_addr("::1").unwrap(), "[::1]:7777".parse().unwrap());
        assert!(bind_addr("example.com:80").is_err());
        assert!(bind_addr("127.0.0.1:x").is_err());
    }
}
