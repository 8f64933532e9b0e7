//! Connecting to the PostgreSQL server as the URL asks, TLS included, with libpq's
//! meaning of its options, so an operator writes the URL they would give `psql`:
//!
//! | `sslmode` | encrypted | certificate checked | host name checked |
//! | --- | --- | --- | --- |
//! | `disable` | no | | |
//! | `allow`, `prefer` (the default) | if the server offers it | only with `sslrootcert` | no |
//! | `require` | yes | only with `sslrootcert` | no |
//! | `verify-ca` | yes | yes | no |
//! | `verify-full` | yes | yes | yes |
//!
//! `sslrootcert` (PEM: the certificates to trust; without it the system's), and
//! `sslcert` with `sslkey` (PEM; the key in PKCS#8) for a client certificate. The
//! client library knows only `disable`, `prefer` and `require` and refuses the file
//! options, so [`split`] takes them out of the URL and builds the connector itself
//! (OpenSSL through `native-tls`); everything else in the URL goes to the client
//! library untouched. `allow` is taken as `prefer` (TLS when offered), which never
//! encrypts less than libpq's `allow`.
//!
//! Errors are one line naming the option or the file; a URL's password never
//! reaches one (the caller passes the redacted form, `at`).

use crate::error::{Error, Result};
use postgres::Client;

/// The TLS options of a URL, taken out of it.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Tls {
    /// `None`: the URL said nothing (libpq's `prefer`).
    mode: Option<Mode>,
    root: Option<String>,
    cert: Option<String>,
    key: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Disable,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

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
    if tls.mode == Some(Mode::Disable) || (tls.mode.is_none() && local) {
        return config.connect(postgres::NoTls).map_err(failed);
    }
    let connector = tls.connector(at)?;
    config
        .connect(postgres_native_tls::MakeTlsConnector::new(connector))
        .map_err(failed)
}

/// The session settings spice asks for at connection start (no round trip), after
/// any the URL's `options` gives: `jit=off`. spice's statements are short, and
/// compiling them costs far more than running them; with a few thousand tasks the
/// planner's estimates crossed `jit_above_cost` and each next-claim spent 50-100 ms
/// in LLVM (53 claims/s at 2,000 tasks). The URL's own `-c jit=on` still wins, since
/// a later setting overrides an earlier one.
fn session_options(given: Option<&str>) -> String {
    match given {
        Some(o) if !o.trim().is_empty() => format!("-c jit=off {o}"),
        _ => "-c jit=off".to_string(),
    }
}

/// The server's words, or the TLS library's with its cause (a certificate refused
/// says why only in its source).
fn connect_reason(e: &postgres::Error) -> String {
    if e.as_db_error().is_some() {
        return super::reason(e);
    }
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        let more = s.to_string();
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

impl Tls {
    /// The connector libpq would use for these options.
    fn connector(&self, at: &str) -> Result<native_tls::TlsConnector> {
        let mode = self.mode.unwrap_or(Mode::Prefer);
        let mut b = native_tls::TlsConnector::builder();
        if let Some(path) = &self.root {
            let pem = read(path, "sslrootcert", at)?;
            for cert in pem_blocks(&pem, "CERTIFICATE") {
                let c = native_tls::Certificate::from_pem(cert.as_bytes())
                    .map_err(|e| file_error("sslrootcert", path, at, &e.to_string()))?;
                b.add_root_certificate(c);
            }
            if pem_blocks(&pem, "CERTIFICATE").next().is_none() {
                return Err(file_error(
                    "sslrootcert",
                    path,
                    at,
                    "no PEM certificate in it",
                ));
            }
            // The root certificates given replace the system's, as in libpq.
            b.disable_built_in_roots(true);
        }
        // libpq checks the certificate in `require`/`prefer` only when a root file is
        // named, and the host name only in `verify-full`.
        let check_cert = matches!(mode, Mode::VerifyCa | Mode::VerifyFull) || self.root.is_some();
        b.danger_accept_invalid_certs(!check_cert);
        b.danger_accept_invalid_hostnames(mode != Mode::VerifyFull);
        if let (Some(cert), Some(key)) = (&self.cert, &self.key) {
            let id = native_tls::Identity::from_pkcs8(
                read(cert, "sslcert", at)?.as_bytes(),
                read(key, "sslkey", at)?.as_bytes(),
            )
            .map_err(|e| {
                file_error(
                    "sslcert/sslkey",
                    &format!("{cert}, {key}"),
                    at,
                    &format!("{e} (the key must be PEM PKCS#8: BEGIN PRIVATE KEY)"),
                )
            })?;
            b.identity(id);
        }
        b.build()
            .map_err(|e| Error::Other(format!("failed to set up TLS for PostgreSQL at {at}: {e}")))
    }
}

fn read(path: &str, option: &str, at: &str) -> Result<String> {
    std::fs::read_to_string(path).map_err(|e| file_error(option, path, at, &e.to_string()))
}

fn file_error(option: &str, path: &str, at: &str, why: &str) -> Error {
    Error::input(format!(
        "bad PostgreSQL URL {at}: {option} {path}: {}",
        why.replace('\n', " ")
    ))
}

/// The PEM blocks of `label` in `text`, each with its armour.
fn pem_blocks<'a>(text: &'a str, label: &'a str) -> impl Iterator<Item = &'a str> + 'a {
    let begin = format!("-----BEGIN {label}-----");
    let end = format!("-----END {label}-----");
    let mut rest = text;
    std::iter::from_fn(move || {
        let start = rest.find(&begin)?;
        let stop = rest[start..].find(&end)? + start + end.len();
        let block = &rest[start..stop];
        rest = &rest[stop..];
        Some(block)
    })
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
    fn a_missing_root_file_is_named() {
        let (_, tls) = split_ok("postgres://db/f?sslmode=verify-full&sslrootcert=/no/such/ca.pem");
        let e = tls.connector("postgres://db/f").unwrap_err().to_string();
        assert!(e.contains("sslrootcert /no/such/ca.pem"), "{e}");
    }

    #[test]
    fn sessions_ask_for_the_jit_off_before_the_urls_own_options() {
        assert_eq!(session_options(None), "-c jit=off");
        assert_eq!(session_options(Some("  ")), "-c jit=off");
        assert_eq!(
            session_options(Some("-c statement_timeout=5s")),
            "-c jit=off -c statement_timeout=5s"
        );
    }

    #[test]
    fn pem_blocks_are_found_in_order() {
        let text = "junk\n-----BEGIN CERTIFICATE-----\nAAA\n-----END CERTIFICATE-----\n\
                    -----BEGIN CERTIFICATE-----\nBBB\n-----END CERTIFICATE-----\n";
        let blocks: Vec<&str> = pem_blocks(text, "CERTIFICATE").collect();
        assert_eq!(blocks.len(), 2);
        assert!(blocks[1].contains("BBB"));
    }
}
