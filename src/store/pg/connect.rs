//! Connecting to the PostgreSQL server as the URL asks: the URL taken apart (the TLS
//! options the client library refuses are taken out for [`super::tls`], which builds
//! the connector; everything else goes to the client library untouched), the session
//! settings spice asks for, and a bound on the whole connect.
//!
//! Invariants:
//! - A connect never hangs a command: the socket's connection is bounded by the URL's
//!   `connect_timeout`, and the whole connect, startup included, by the same limit
//!   ([`CONNECT_LIMIT`] without one), by [`within`].
//! - A server that cannot be reached is [`Error::Unreachable`] (the caller may try
//!   again later); one that refused is [`Error::Other`].
//! - Errors are one line naming the option; a URL's password never reaches one (the
//!   caller passes the redacted form, `at`).

use super::tls::{Mode, Tls};
use crate::error::{Error, Result};
use postgres::Client;

/// Opens a connection to `url` (`at`: the same without its password, for messages).
pub(super) fn client(url: &str, at: &str) -> Result<Client> {
    let (rest, tls) = split(url, at)?;
    let mut config: postgres::Config = rest
        .parse()
        .map_err(|e| Error::input(format!("bad PostgreSQL URL {at}: {e}")))?;
    let options = session_options(config.get_options());
    config.options(&options);
    let failed = |e: postgres::Error| {
        let msg = format!(
            "failed to connect to PostgreSQL at {at}: {}",
            connect_reason(&e)
        );
        if super::transient(&e) {
            Error::Unreachable(msg)
        } else {
            Error::Other(msg)
        }
    };
    // Nothing said and only unix sockets: the server never encrypts those, so no
    // connector (loading the system's certificates costs milliseconds per command).
    let local = config
        .get_hosts()
        .iter()
        .all(|h| matches!(h, postgres::config::Host::Unix(_)));
    let limit = config
        .get_connect_timeout()
        .copied()
        .unwrap_or(CONNECT_LIMIT);
    if tls.mode == Some(Mode::Disable) || (tls.mode.is_none() && local) {
        return within(limit, at, move || config.connect(postgres::NoTls))?.map_err(failed);
    }
    let connector = tokio_postgres_rustls::MakeRustlsConnect::new(tls.config(at)?);
    within(limit, at, move || config.connect(connector))?.map_err(failed)
}

/// How long a connection may take to be made and answered when the URL sets no
/// `connect_timeout`.
pub const CONNECT_LIMIT: std::time::Duration = std::time::Duration::from_secs(30);

/// Runs `connect` and waits for it at most `limit`. `connect_timeout` bounds only the
/// socket's connection: a server that accepts and then never answers the startup
/// would hang the command for ever. The connecting thread is left to end when the
/// socket does (it holds nothing of the caller's).
fn within<T: Send + 'static>(
    limit: std::time::Duration,
    at: &str,
    connect: impl FnOnce() -> T + Send + 'static,
) -> Result<T> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("pg-connect".into())
        .spawn(move || {
            let _ = tx.send(connect());
        })
        .map_err(|e| Error::Other(format!("failed to connect to PostgreSQL at {at}: {e}")))?;
    rx.recv_timeout(limit).map_err(|_| {
        Error::Unreachable(format!(
            "failed to connect to PostgreSQL at {at}: no answer within {}s (connect_timeout)",
            limit.as_secs_f64()
        ))
    })
}

/// The session settings spice asks for at connection start (no round trip), before
/// any the URL's `options` gives (a later setting overrides an earlier one, so the
/// URL's own still win):
/// - `jit=off`: spice's statements are short, and compiling them costs far more than
///   running them; with a few thousand tasks the planner's estimates crossed
///   `jit_above_cost` and each next-claim spent 50-100 ms in LLVM (53 claims/s at
///   2,000 tasks).
/// - `plan_cache_mode=force_generic_plan`: spice prepares each hot statement once per
///   connection, and its statements look rows up by key, where a plan for the values
///   at hand is no better than the generic one; left to choose, the server planned
///   the next-claim read afresh on every call (custom plans priced below the generic),
///   a fifth of its CPU at 64 claimers.
const SESSION: &str = "-c jit=off -c plan_cache_mode=force_generic_plan";

fn session_options(given: Option<&str>) -> String {
    match given {
        Some(o) if !o.trim().is_empty() => format!("{SESSION} {o}"),
        _ => SESSION.to_string(),
    }
}

/// The server's words, or the TLS library's with its cause; a certificate refused is
/// said in the terms an operator looks up ("certificate verify failed").
fn connect_reason(e: &postgres::Error) -> String {
    if e.as_db_error().is_some() {
        return super::reason(e);
    }
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        let tls = s
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
            .and_then(|inner| inner.downcast_ref::<rustls::Error>());
        let more = match tls {
            Some(rustls::Error::InvalidCertificate(why)) => super::tls::certificate_refused(why),
            _ => s.to_string(),
        };
        if !text.contains(&more) {
            text = format!("{text}: {more}");
        }
        source = s.source();
    }
    text.replace('\n', " ")
}

/// Whether `url` is one this backend can use, or why not (a fragment, with no
/// password in it), for the location's check before anything connects.
pub(crate) fn check_url(url: &str) -> std::result::Result<(), String> {
    let (rest, _) = split_url(url)?;
    rest.parse::<postgres::Config>()
        .map(|_| ())
        .map_err(|e| format!("not a usable PostgreSQL URL ({e})"))
}

/// Takes the TLS options out of `url`'s query: (the URL for the client library, them).
pub(super) fn split(url: &str, at: &str) -> Result<(String, Tls)> {
    split_url(url).map_err(|why| Error::input(format!("bad PostgreSQL URL {at}: {why}")))
}

fn split_url(url: &str) -> std::result::Result<(String, Tls), String> {
    let Some((base, query)) = url.split_once('?') else {
        return Ok((url.to_string(), Tls::default()));
    };
    let mut tls = Tls::default();
    let mut kept: Vec<&str> = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let value = || decode(value, key);
        match key {
            "sslmode" => {
                tls.mode = Some(match value()?.as_str() {
                    "disable" => Mode::Disable,
                    "allow" | "prefer" => Mode::Prefer,
                    "require" => Mode::Require,
                    "verify-ca" => Mode::VerifyCa,
                    "verify-full" => Mode::VerifyFull,
                    other => {
                        return Err(format!(
                            "sslmode `{other}` is not one of \
                             disable, allow, prefer, require, verify-ca, verify-full"
                        ))
                    }
                })
            }
            "sslrootcert" => tls.root = Some(value()?),
            "sslcert" => tls.cert = Some(value()?),
            "sslkey" => tls.key = Some(value()?),
            _ => kept.push(pair),
        }
    }
    if tls.cert.is_some() != tls.key.is_some() {
        return Err(
            "sslcert and sslkey go together (a client certificate needs its key)".to_string(),
        );
    }
    // The client library encrypts or not; whether to check is the connector's.
    match tls.mode {
        None => {}
        Some(Mode::Disable) => kept.push("sslmode=disable"),
        Some(Mode::Prefer) => kept.push("sslmode=prefer"),
        Some(_) => kept.push("sslmode=require"),
    }
    let rest = if kept.is_empty() {
        base.to_string()
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    Ok((rest, tls))
}

/// Percent-decodes a query value.
fn decode(value: &str, key: &str) -> std::result::Result<String, String> {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = bytes
                    .get(i + 1..i + 3)
                    .and_then(|h| std::str::from_utf8(h).ok())
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
                    .ok_or_else(|| format!("`{key}` has a bad %-escape"))?;
                out.push(hex);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).map_err(|_| format!("`{key}` is not UTF-8"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split_ok(url: &str) -> (String, Tls) {
        split(url, "the store").unwrap()
    }

    #[test]
    fn the_options_the_client_library_refuses_are_taken_out() {
        let (rest, tls) = split_ok(
            "postgres://u@db/fleet?application_name=x&sslmode=verify-full&sslrootcert=%2Fetc%2Fca.pem&sslcert=/c.pem&sslkey=/k.pem",
        );
        assert_eq!(
            rest,
            "postgres://u@db/fleet?application_name=x&sslmode=require"
        );
        assert_eq!(tls.mode, Some(Mode::VerifyFull));
        assert_eq!(tls.root.as_deref(), Some("/etc/ca.pem"));
        assert_eq!(tls.cert.as_deref(), Some("/c.pem"));
        assert_eq!(tls.key.as_deref(), Some("/k.pem"));
    }

    #[test]
    fn modes_map_to_what_the_client_library_knows() {
        for (given, lib) in [
            ("disable", "sslmode=disable"),
            ("allow", "sslmode=prefer"),
            ("prefer", "sslmode=prefer"),
            ("require", "sslmode=require"),
            ("verify-ca", "sslmode=require"),
        ] {
            let (rest, _) = split_ok(&format!("postgresql:///f?host=/s&sslmode={given}"));
            assert_eq!(rest, format!("postgresql:///f?host=/s&{lib}"), "{given}");
        }
        let (rest, tls) = split_ok("postgresql:///f?host=/run/pg");
        assert_eq!(rest, "postgresql:///f?host=/run/pg");
        assert_eq!(tls, Tls::default());
        assert_eq!(split_ok("postgres://db/f").0, "postgres://db/f");
    }

    #[test]
    fn bad_options_are_one_line_naming_them() {
        let e = split("postgres://db/f?sslmode=verify", "postgres://db/f")
            .unwrap_err()
            .to_string();
        assert!(e.contains("sslmode `verify`") && !e.contains('\n'), "{e}");
        let e = split("postgres://db/f?sslcert=/c.pem", "postgres://db/f")
            .unwrap_err()
            .to_string();
        assert!(e.contains("sslcert and sslkey go together"), "{e}");
        let e = split("postgres://db/f?sslrootcert=%zz", "postgres://db/f")
            .unwrap_err()
            .to_string();
        assert!(e.contains("`sslrootcert` has a bad %-escape"), "{e}");
    }

    #[test]
    fn sessions_ask_for_their_settings_before_the_urls_own_options() {
        let ours = "-c jit=off -c plan_cache_mode=force_generic_plan";
        assert_eq!(session_options(None), ours);
        assert_eq!(session_options(Some("  ")), ours);
        assert_eq!(
            session_options(Some("-c statement_timeout=5s")),
            format!("{ours} -c statement_timeout=5s")
        );
    }
}
