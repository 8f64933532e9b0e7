//! TLS to the PostgreSQL server as the URL asks, with libpq's meaning of its options,
//! so an operator writes the URL they would give `psql`:
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
//! and refuses the file options, so [`super::connect::split`] takes them out of the
//! URL and this module builds the connector from them (rustls with ring, through
//! `tokio-postgres-rustls`; no system library is loaded, see ARCHITECTURE.md, "Store
//! backends"). `allow` is taken as `prefer` (TLS when offered), which never encrypts
//! less than libpq's `allow`.
//!
//! The host name is checked as libpq checks it: against the certificate's
//! subjectAltName, or its common name when it has no subjectAltName (the certificates
//! PostgreSQL's own documentation makes have only a common name), a leading `*.`
//! standing for one label.
//!
//! Errors are one line naming the option or the file; a URL's password never
//! reaches one (the caller passes the redacted form, `at`).

use crate::error::{Error, Result};
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
    pub(super) mode: Option<Mode>,
    pub(super) root: Option<String>,
    pub(super) cert: Option<String>,
    pub(super) key: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Mode {
    Disable,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

/// Why the server's certificate was refused, with the option that decides it.
pub(super) fn certificate_refused(why: &CertificateError) -> String {
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

impl Tls {
    /// The client configuration libpq's options ask for: which certificates are
    /// trusted (none checked, the file's, or the system's), whether the host name is
    /// checked, and the client certificate.
    pub(super) fn config(&self, at: &str) -> Result<rustls::ClientConfig> {
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
    use crate::store::pg::connect::split;

    fn split_ok(url: &str) -> (String, Tls) {
        split(url, "the store").unwrap()
    }

    #[test]
    fn a_missing_root_file_is_named() {
        let (_, tls) = split_ok("postgres://db/f?sslmode=verify-full&sslrootcert=/no/such/ca.pem");
        let e = tls.config("postgres://db/f").unwrap_err().to_string();
        assert!(e.contains("sslrootcert /no/such/ca.pem"), "{e}");
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
