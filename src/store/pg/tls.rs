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
//! `sslcert` with `sslkey` (PEM; the key in PKCS#8, PKCS#1 or SEC1, unencrypted) for a
//! client certificate. The client library knows only `disable`, `prefer` and `require`
//! and refuses the file options, so [`split`] takes them out of the URL and builds the
//! connector itself (rustls with ring, through `tokio-postgres-rustls`; no system
//! library is loaded, see ARCHITECTURE.md, "Store backends"); everything else in the
//! URL goes to the client library untouched. `allow` is taken as `prefer` (TLS when
//! offered), which never encrypts less than libpq's `allow`.
//!
//! The host name is checked as libpq checks it: against the certificate's
//! subjectAltName, or its common name when it has no subjectAltName (the certificates
//! PostgreSQL's own documentation makes have only a common name), a leading `*.`
//! standing for one label.
//!
//! Errors are one line naming the option or the file; a URL's password never
//! reaches one (the caller passes the redacted form, `at`).

use crate::error::{Error, Result};
use postgres::Client;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, RootCertStore, SignatureScheme};
use std::sync::Arc;

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
            Some(rustls::Error::InvalidCertificate(why)) => certificate_refused(why),
            _ => s.to_string(),
        };
        if !text.contains(&more) {
            text = format!("{text}: {more}");
        }
        source = s.source();
    }
    text.replace('\n', " ")
}

/// Why the server's certificate was refused, with the option that decides it.
fn certificate_refused(why: &CertificateError) -> String {
    let hint = match why {
        CertificateError::UnknownIssuer => {
            " (not signed by a certificate in sslrootcert, or the system's without it)"
        }
        CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => {
            " (sslmode=verify-full checks the host name, verify-ca does not)"
        }
        CertificateError::Other(other)
            if format!("{other:?}").contains("UnsupportedCertVersion") =>
        {
            " (an X.509 v1 certificate, as `openssl x509 -req` makes without extensions: \
             verify-ca and verify-full need v3; reissue it with -extfile naming its \
             subjectAltName, or give the certificate itself as sslrootcert)"
        }
        _ => "",
    };
    format!("certificate verify failed: {why}{hint}")
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
    /// The client configuration libpq's options ask for: which certificates are
    /// trusted (none checked, the file's, or the system's), whether the host name is
    /// checked, and the client certificate.
    fn config(&self, at: &str) -> Result<rustls::ClientConfig> {
        let mode = self.mode.unwrap_or(Mode::Prefer);
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        // libpq checks the certificate in `require`/`prefer` only when a root file is
        // named, and the host name only in `verify-full`.
        let check_cert = matches!(mode, Mode::VerifyCa | Mode::VerifyFull) || self.root.is_some();
        let roots = match (&self.root, check_cert) {
            (_, false) => None,
            // The root certificates given replace the system's, as in libpq.
            (Some(path), true) => Some(self.file_roots(path, at)?),
            (None, true) => Some(system_roots(at)?),
        };
        let pinned = match (&self.root, check_cert) {
            (Some(path), true) => certificates(&read(path, "sslrootcert", at)?)
                .map_err(|why| file_error("sslrootcert", path, at, &why))?,
            _ => Vec::new(),
        };
        let keys = provider.key_provider;
        let verifier = Verifier {
            roots: roots.map(Arc::new),
            pinned,
            check_name: mode == Mode::VerifyFull,
            algorithms: provider.signature_verification_algorithms,
        };
        let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| setup_error(at, &e))?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(verifier));
        let (Some(cert), Some(key)) = (&self.cert, &self.key) else {
            return Ok(builder.with_no_client_auth());
        };
        let chain = certificates(&read(cert, "sslcert", at)?)
            .map_err(|why| file_error("sslcert", cert, at, &why))?;
        let key_der = PrivateKeyDer::from_pem_slice(&read(key, "sslkey", at)?).map_err(|e| {
            file_error(
                "sslkey",
                key,
                at,
                &format!("{e} (the key must be PEM, unencrypted: PKCS#8, PKCS#1 or SEC1)"),
            )
        })?;
        let signing = keys
            .load_private_key(key_der)
            .map_err(|e| file_error("sslkey", key, at, &e.to_string()))?;
        // Not `with_client_auth_cert`: it parses the certificate as webpki checks a
        // server's, and refuses an X.509 v1 certificate (what `openssl x509 -req`
        // makes without extensions), which the server itself takes.
        let certified = rustls::sign::CertifiedKey::new(chain, signing);
        Ok(builder
            .with_client_cert_resolver(Arc::new(rustls::sign::SingleCertAndKey::from(certified))))
    }

    fn file_roots(&self, path: &str, at: &str) -> Result<RootCertStore> {
        let mut roots = RootCertStore::empty();
        let certs = certificates(&read(path, "sslrootcert", at)?)
            .map_err(|why| file_error("sslrootcert", path, at, &why))?;
        for cert in certs {
            roots
                .add(cert)
                .map_err(|e| file_error("sslrootcert", path, at, &e.to_string()))?;
        }
        Ok(roots)
    }
}

/// The system's trusted certificates (`SSL_CERT_FILE`/`SSL_CERT_DIR`, else the
/// distribution's bundle), read only when a certificate is to be checked without
/// `sslrootcert`.
fn system_roots(at: &str) -> Result<RootCertStore> {
    let found = rustls_native_certs::load_native_certs();
    let mut roots = RootCertStore::empty();
    let (added, _) = roots.add_parsable_certificates(found.certs);
    if added == 0 {
        let why = found
            .errors
            .first()
            .map_or_else(|| "none found".to_string(), ToString::to_string);
        return Err(Error::Other(format!(
            "failed to set up TLS for PostgreSQL at {at}: no system certificates to check \
             the server's against ({}); name them with sslrootcert",
            why.replace('\n', " ")
        )));
    }
    Ok(roots)
}

/// The certificates of a PEM file, in order; at least one.
fn certificates(pem: &[u8]) -> std::result::Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    if certs.is_empty() {
        return Err("no PEM certificate in it".to_string());
    }
    Ok(certs)
}

fn read(path: &str, option: &str, at: &str) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|e| file_error(option, path, at, &e.to_string()))
}

fn file_error(option: &str, path: &str, at: &str, why: &str) -> Error {
    Error::input(format!(
        "bad PostgreSQL URL {at}: {option} {path}: {}",
        why.replace('\n', " ")
    ))
}

fn setup_error(at: &str, e: &rustls::Error) -> Error {
    Error::Other(format!("failed to set up TLS for PostgreSQL at {at}: {e}"))
}

/// Checks the server's certificate as the mode asks. The handshake's signatures are
/// always checked against the certificate's key; the certificate itself only with
/// `roots`, and its names only with `check_name`.
#[derive(Debug)]
struct Verifier {
    /// `None`: any certificate is taken (libpq's `require` and `prefer` without
    /// `sslrootcert`): encrypted, not authenticated.
    roots: Option<Arc<RootCertStore>>,
    /// The certificates of `sslrootcert` themselves: a server presenting one of them
    /// (a self-signed certificate given as its own root, as PostgreSQL's documentation
    /// sets one up) is trusted as OpenSSL trusts it, where webpki refuses a CA
    /// certificate used as a server's.
    pinned: Vec<CertificateDer<'static>>,
    check_name: bool,
    algorithms: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for Verifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        let Some(roots) = &self.roots else {
            return Ok(ServerCertVerified::assertion());
        };
        let cert = rustls::server::ParsedCertificate::try_from(end_entity)?;
        if self.pinned.iter().any(|p| p == end_entity) {
            within_validity(end_entity, now)?;
        } else {
            rustls::client::verify_server_cert_signed_by_trust_anchor(
                &cert,
                roots,
                intermediates,
                now,
                self.algorithms.all,
            )?;
        }
        if self.check_name {
            if let Err(e) = rustls::client::verify_server_name(&cert, server_name) {
                if !common_name_matches(end_entity, server_name) {
                    return Err(e);
                }
            }
        }
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

/// A pinned certificate's dates, which webpki's chain check would have looked at.
fn within_validity(
    der: &CertificateDer<'_>,
    now: UnixTime,
) -> std::result::Result<(), rustls::Error> {
    use x509_cert::der::Decode;
    let bad = |e: CertificateError| rustls::Error::InvalidCertificate(e);
    let cert = x509_cert::Certificate::from_der(der.as_ref())
        .map_err(|_| bad(CertificateError::BadEncoding))?;
    let validity = &cert.tbs_certificate.validity;
    let now = now.as_secs();
    if now < validity.not_before.to_unix_duration().as_secs() {
        return Err(bad(CertificateError::NotValidYet));
    }
    if now > validity.not_after.to_unix_duration().as_secs() {
        return Err(bad(CertificateError::Expired));
    }
    Ok(())
}

/// libpq's fallback when a certificate has no subjectAltName: its common name names
/// the host (exactly, ignoring case, or `*.rest` for one label before `rest`).
fn common_name_matches(der: &CertificateDer<'_>, server_name: &ServerName<'_>) -> bool {
    use x509_cert::der::Decode;
    const SUBJECT_ALT_NAME: &str = "2.5.29.17";
    const COMMON_NAME: &str = "2.5.4.3";
    let Ok(cert) = x509_cert::Certificate::from_der(der.as_ref()) else {
        return false;
    };
    let tbs = &cert.tbs_certificate;
    let has_san = tbs
        .extensions
        .iter()
        .flatten()
        .any(|ext| ext.extn_id.to_string() == SUBJECT_ALT_NAME);
    if has_san {
        return false;
    }
    let host = server_name.to_str();
    tbs.subject
        .0
        .iter()
        .flat_map(|rdn| rdn.0.iter())
        .filter(|atv| atv.oid.to_string() == COMMON_NAME)
        .filter_map(|atv| std::str::from_utf8(atv.value.value()).ok())
        .any(|cn| name_matches(cn, &host))
}

/// `pattern` (a common name) against `host`, as libpq compares them.
fn name_matches(pattern: &str, host: &str) -> bool {
    if pattern.eq_ignore_ascii_case(host) {
        return true;
    }
    match (pattern.strip_prefix("*."), host.split_once('.')) {
        (Some(rest), Some((label, host_rest))) => {
            !label.is_empty() && !rest.is_empty() && rest.eq_ignore_ascii_case(host_rest)
        }
        _ => false,
    }
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
        let e = tls.config("postgres://db/f").unwrap_err().to_string();
        assert!(e.contains("sslrootcert /no/such/ca.pem"), "{e}");
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

    #[test]
    fn files_without_what_they_should_hold_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "no certificate here\n").unwrap();
        let url = format!(
            "postgres://db/f?sslmode=verify-ca&sslrootcert={}",
            empty.display()
        );
        let e = split_ok(&url).1.config("db").unwrap_err().to_string();
        assert!(
            e.contains("sslrootcert") && e.contains("no PEM certificate in it"),
            "{e}"
        );
        let url = format!(
            "postgres://db/f?sslmode=require&sslcert={0}&sslkey={0}",
            empty.display()
        );
        let e = split_ok(&url).1.config("db").unwrap_err().to_string();
        assert!(e.contains("sslcert") && !e.contains('\n'), "{e}");
    }

    #[test]
    fn a_common_name_matches_as_libpq_matches_it() {
        assert!(name_matches("db.example.org", "DB.example.org"));
        assert!(name_matches("*.example.org", "db.example.org"));
        assert!(!name_matches("*.example.org", "example.org"));
        assert!(!name_matches("*.example.org", "a.db.example.org"));
        assert!(!name_matches("*.example.org", ".example.org"));
        assert!(!name_matches("db.example.org", "db2.example.org"));
        assert!(name_matches("127.0.0.1", "127.0.0.1"));
    }

    /// A self-signed certificate for CN=db.example.org with no subjectAltName, as
    /// PostgreSQL's documentation makes them, and one whose subjectAltName names
    /// another host.
    const CN_ONLY: &str = "-----BEGIN CERTIFICATE-----
MIIBgjCCASmgAwIBAgIUCwTlFiE2kX7Gps4nNdoEQ0U/SWwwCgYIKoZIzj0EAwIw
GTEXMBUGA1UEAwwOZGIuZXhhbXBsZS5vcmcwIBcNMjYxMjAzMTIxMDQwWhgPMjEy
NjExMDkxMjEwNDBaMBkxFzAVBgNVBAMMDmRiLmV4YW1wbGUub3JnMFkwEwYHKoZI
zj0CAQYIKoZIzj0DAQcDQgAEqc2hkgKfOSXHfGuG9vNYzFW3XxBVaH/gfeSKswdC
TWWh5x8h/CPj5HL4rDIi8CNDCA3TSzNeFMh+3Q8NfpripqNNMEswHQYDVR0OBBYE
FAET3Rqg1Wi3vUS3l5XMc1GW/fZJMB8GA1UdIwQYMBaAFAET3Rqg1Wi3vUS3l5XM
c1GW/fZJMAkGA1UdEwQCMAAwCgYIKoZIzj0EAwIDRwAwRAIgSNEetJVA64Yn9UJ1
21FyovM42JOwUdt6vAiewo1FTboCIBhVvSSIxSXEebEFVhRhWX/TK1ylqcVrY+kE
firXEhaL
-----END CERTIFICATE-----";
    const WITH_SAN: &str = "-----BEGIN CERTIFICATE-----
MIIBpjCCAU2gAwIBAgIUaFAO2LW1KnA10uYH4bb/7KbWlv4wCgYIKoZIzj0EAwIw
GTEXMBUGA1UEAwwOZGIuZXhhbXBsZS5vcmcwIBcNMjYxMjAzMTIxMDQwWhgPMjEy
NjExMDkxMjEwNDBaMBkxFzAVBgNVBAMMDmRiLmV4YW1wbGUub3JnMFkwEwYHKoZI
zj0CAQYIKoZIzj0DAQcDQgAEpbgcTg1/oQ08VxHwQZDKGCMuu1GeaIDtdfeyhIzu
b7tLhmJXE+4EmAabOHUlrDLwR0FVFQo8KHPgbn1eithyA6NxMG8wHQYDVR0OBBYE
FDrZpTU/V2VePm0oTG3FxrfwNChvMB8GA1UdIwQYMBaAFDrZpTU/V2VePm0oTG3F
xrfwNChvMA8GA1UdEwEB/wQFMAMBAf8wHAYDVR0RBBUwE4IRb3RoZXIuZXhhbXBs
ZS5vcmcwCgYIKoZIzj0EAwIDRwAwRAIgQfscmy9KO0E5Dgf9Utt6ErBdKfivaiVO
3msqEALqPzoCIETEcSh9gH2FXer7ViWZCf/+Leda2q2TTH8tvu26Oalo
-----END CERTIFICATE-----";

    #[test]
    fn the_common_name_counts_only_without_a_subject_alt_name() {
        let der = |pem: &str| CertificateDer::from_pem_slice(pem.as_bytes()).unwrap();
        let name = |n: &str| ServerName::try_from(n.to_string()).unwrap();
        assert!(common_name_matches(&der(CN_ONLY), &name("db.example.org")));
        assert!(!common_name_matches(
            &der(CN_ONLY),
            &name("other.example.org")
        ));
        assert!(!common_name_matches(
            &der(WITH_SAN),
            &name("db.example.org")
        ));
    }

    /// A self-signed CA certificate for CN=db.example.org (no subjectAltName), made as
    /// PostgreSQL's documentation makes a server's: `openssl req -x509` (CA:TRUE).
    const SELF_SIGNED: &str = "-----BEGIN CERTIFICATE-----
MIIBiDCCAS+gAwIBAgIUcyz1o84XGK0MhODAiSgnyWrLGL4wCgYIKoZIzj0EAwIw
GTEXMBUGA1UEAwwOZGIuZXhhbXBsZS5vcmcwIBcNMjYxMjAzMTMwOTUzWhgPMjEy
NjExMDkxMzA5NTNaMBkxFzAVBgNVBAMMDmRiLmV4YW1wbGUub3JnMFkwEwYHKoZI
zj0CAQYIKoZIzj0DAQcDQgAEg1bxWdzs0JeNeX4wQhnkF8Svf0Fkawydb7lqKC5D
6wMFH0E6966v+ly/WmRGMpK3AP6ISS/gEaey1Awm3bW4u6NTMFEwHQYDVR0OBBYE
FAykrRslFVuhcD5waHHQRaaS6OgcMB8GA1UdIwQYMBaAFAykrRslFVuhcD5waHHQ
RaaS6OgcMA8GA1UdEwEB/wQFMAMBAf8wCgYIKoZIzj0EAwIDRwAwRAIgeQpglqCq
QRqAnQUOfJ33qN+igunKU7cAwCDm2FOElWkCIC66to6jdlZyd08OP+HxapACviOF
Ck+jbajch1YimiBn
-----END CERTIFICATE-----";

    /// A server presenting the very certificate given as sslrootcert is trusted, its
    /// name checked by its common name; another certificate is not.
    #[test]
    fn a_self_signed_certificate_given_as_the_root_is_trusted() {
        let der = |pem: &str| CertificateDer::from_pem_slice(pem.as_bytes()).unwrap();
        let provider = rustls::crypto::ring::default_provider();
        let mut roots = RootCertStore::empty();
        roots.add(der(SELF_SIGNED)).unwrap();
        let verifier = Verifier {
            roots: Some(Arc::new(roots)),
            pinned: vec![der(SELF_SIGNED)],
            check_name: true,
            algorithms: provider.signature_verification_algorithms,
        };
        let name = |n: &str| ServerName::try_from(n.to_string()).unwrap();
        let now = UnixTime::now();
        verifier
            .verify_server_cert(&der(SELF_SIGNED), &[], &name("db.example.org"), &[], now)
            .expect("the pinned certificate");
        let wrong_name = verifier
            .verify_server_cert(&der(SELF_SIGNED), &[], &name("other.example.org"), &[], now)
            .unwrap_err();
        assert!(
            matches!(wrong_name, rustls::Error::InvalidCertificate(_)),
            "{wrong_name}"
        );
        let other = verifier
            .verify_server_cert(&der(CN_ONLY), &[], &name("db.example.org"), &[], now)
            .unwrap_err();
        assert!(certificate_refused(&match other {
            rustls::Error::InvalidCertificate(e) => e,
            e => panic!("{e}"),
        })
        .starts_with("certificate verify failed"),);
    }
}
