//! `spice serve`: the operator's console in a browser. This file only gathers what the
//! console needs from the process (state directory, bind address, token file, the
//! signals that stop it); `crate::web` does the rest.

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

fn io(context: String) -> impl FnOnce(std::io::Error) -> Error {
    move |source| Error::Io { context, source }
}

pub fn serve(args: ServeArgs, env: Env) -> Result<()> {
    // Open the store first so a bad state directory is reported before anything binds.
    drop(env.open()?);
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
    let listener = std::net::TcpListener::bind(args.bind)
        .map_err(io(format!("failed to listen on {}", args.bind)))?;
    let addr = listener
        .local_addr()
        .map_err(io("failed to read the bound address".into()))?;
    let guard = web::guard::Guard::new(hosts, token.clone());
    let cfg = web::Config {
        state_dir: env.state_dir.clone(),
        clock: Arc::new(SystemClock),
        guard,
        parse_target: Box::new(move |t| super::steer::steer_target(&env, t, false)),
        poll: Duration::from_millis(100),
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
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(io("failed to start the async runtime".into()))?;
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
