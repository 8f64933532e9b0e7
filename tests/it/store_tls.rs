//! TLS to the PostgreSQL authority, as the URL's libpq options ask (issue #18: "TLS via
//! the URL's options"). A cluster of the test's own listens on 127.0.0.1 with a
//! certificate for `localhost` from a test CA, and refuses every connection that is
//! not encrypted (`hostnossl … reject`), so a command that works went through TLS.
//! Checked: `verify-full` with the CA, the host name checked (a certificate for
//! `localhost` is refused at `127.0.0.1`, where `verify-ca` takes it), another CA
//! refused, `require` without a CA, a client certificate (`sslcert`/`sslkey`) for a
//! `cert` login, and bad options and files in one line.

use crate::common;
use common::{pg, Run, TestEnv};
use std::path::Path;
use std::process::Command;

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("openssl runs");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A CA, and a certificate it signs for `cn` (with `san` as subjectAltName when given).
fn issue(dir: &Path, ca: &str, name: &str, cn: &str, san: Option<&str>) {
    let key = format!("{name}.key");
    let csr = format!("{name}.csr");
    let crt = format!("{name}.crt");
    openssl(
        dir,
        &[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            &key,
            "-out",
            &csr,
            "-subj",
            &format!("/CN={cn}"),
        ],
    );
    let ext = format!("{name}.ext");
    std::fs::write(
        dir.join(&ext),
        san.map(|s| format!("subjectAltName={s}\n"))
            .unwrap_or_default(),
    )
    .unwrap();
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            &csr,
            "-CA",
            &format!("{ca}.pem"),
            "-CAkey",
            &format!("{ca}.key"),
            "-CAcreateserial",
            "-out",
            &crt,
            "-days",
            "2",
            "-extfile",
            &ext,
        ],
    );
}

fn ca(dir: &Path, name: &str) {
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            &format!("{name}.key"),
            "-out",
            &format!("{name}.pem"),
            "-days",
            "2",
            "-subj",
            &format!("/CN={name}"),
        ],
    );
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn with_url(env: &TestEnv, url: &str, args: &[&str]) -> Run {
    common::to_run(
        env.cmd(args)
            .env("SPICE_DATABASE_URL", url)
            .output()
            .expect("spice runs"),
    )
}

/// Fails in one `spice: ` line containing `needle`.
#[track_caller]
fn refused(r: &Run, needle: &str) {
    let err = r.stderr.trim_end();
    assert_ne!(r.code, 0, "expected a refusal; stdout: {}", r.stdout);
    assert!(
        err.starts_with("spice: ") && !err.contains('\n') && !err.contains("panicked"),
        "one line: {err:?}"
    );
    assert!(err.contains(needle), "{err:?} should mention {needle:?}");
}

#[test]
#[ignore = "needs PostgreSQL (SPICE_TEST_POSTGRES)"]
fn tls_follows_the_urls_libpq_options() {
    let certs = tempfile::tempdir().unwrap();
    let c = certs.path();
    ca(c, "ca");
    ca(c, "other");
    issue(c, "ca", "server", "localhost", Some("DNS:localhost"));
    issue(c, "ca", "client", "certuser", None);
    let port = free_port();
    let extra = format!(
        "-c listen_addresses=127.0.0.1 -c port={port} -c ssl=on -c ssl_cert_file=server.crt \
         -c ssl_key_file=server.key -c ssl_ca_file=ca.pem"
    );
    let cluster = pg::Cluster::start_with(&extra, |data| {
        for f in ["server.crt", "server.key", "ca.pem"] {
            std::fs::copy(c.join(f), data.join(f)).map_err(|e| e.to_string())?;
        }
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(
            data.join("server.key"),
            std::fs::Permissions::from_mode(0o600),
        )
        .map_err(|e| e.to_string())?;
        std::fs::write(
            data.join("pg_hba.conf"),
            "local all all trust\n\
             hostnossl all all 127.0.0.1/32 reject\n\
             hostssl all certuser 127.0.0.1/32 cert\n\
             hostssl all postgres 127.0.0.1/32 trust\n",
        )
        .map_err(|e| e.to_string())
    });
    let cluster = match cluster {
        Ok(cl) => cl,
        Err(why) => {
            assert!(
                std::env::var_os("CI").is_none(),
                "cannot start a PostgreSQL cluster under CI: {why}"
            );
            eprintln!("skipped: no PostgreSQL cluster ({why})");
            return;
        }
    };
    let socket = format!(
        "postgresql:///postgres?host={}&port={port}&user=postgres",
        cluster.socket_dir().display()
    );
    let mut admin = postgres::Client::connect(&socket, postgres::NoTls).unwrap();
    admin.batch_execute("CREATE DATABASE fleet").unwrap();
    admin
        .batch_execute("CREATE ROLE certuser LOGIN SUPERUSER")
        .unwrap();
    let root = c.join("ca.pem");
    let root = root.display();
    let tcp = |host: &str, user: &str, opts: &str| {
        format!("postgres://{user}@{host}:{port}/fleet?{opts}")
    };
    let env = TestEnv::new();

    // verify-full with the CA that signed the server's certificate: works.
    let full = tcp(
        "localhost",
        "postgres",
        &format!("sslmode=verify-full&sslrootcert={root}"),
    );
    let id = with_url(&env, &full, &["task", "add", "--json", "over tls"]).json()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let claim = with_url(
        &env,
        &full,
        &["task", "next", "--claim", "--claimant", "a", "--json"],
    )
    .json();
    assert_eq!(claim["id"], id.as_str());

    // The server takes nothing unencrypted: disable is refused by it.
    refused(
        &with_url(
            &env,
            &tcp("localhost", "postgres", "sslmode=disable"),
            &["task", "claims"],
        ),
        "no encryption",
    );
    // Another CA: the certificate is not trusted.
    refused(
        &with_url(
            &env,
            &tcp(
                "localhost",
                "postgres",
                &format!(
                    "sslmode=verify-full&sslrootcert={}",
                    c.join("other.pem").display()
                ),
            ),
            &["task", "claims"],
        ),
        "certificate verify failed",
    );
    // The certificate names localhost: verify-full refuses it at 127.0.0.1, verify-ca
    // (the chain only) takes it.
    refused(
        &with_url(
            &env,
            &tcp(
                "127.0.0.1",
                "postgres",
                &format!("sslmode=verify-full&sslrootcert={root}"),
            ),
            &["task", "claims"],
        ),
        "certificate verify failed",
    );
    with_url(
        &env,
        &tcp(
            "127.0.0.1",
            "postgres",
            &format!("sslmode=verify-ca&sslrootcert={root}"),
        ),
        &["task", "claims"],
    )
    .ok();
    // require without a CA: encrypted, the certificate not checked (libpq's meaning).
    with_url(
        &env,
        &tcp("127.0.0.1", "postgres", "sslmode=require"),
        &["task", "claims"],
    )
    .ok();
    // A `cert` login: the client certificate and its key.
    let client = format!(
        "sslmode=verify-full&sslrootcert={root}&sslcert={}&sslkey={}",
        c.join("client.crt").display(),
        c.join("client.key").display()
    );
    let claims = with_url(
        &env,
        &tcp("localhost", "certuser", &client),
        &["task", "claims", "--json"],
    )
    .json();
    assert_eq!(claims.as_array().unwrap().len(), 1);
    refused(
        &with_url(
            &env,
            &tcp(
                "localhost",
                "certuser",
                &format!("sslmode=verify-full&sslrootcert={root}"),
            ),
            &["task", "claims"],
        ),
        "certuser",
    );
    // Bad options and files: one line naming them.
    refused(
        &with_url(
            &env,
            &tcp("localhost", "postgres", "sslmode=verify-all"),
            &["task", "claims"],
        ),
        "sslmode `verify-all`",
    );
    refused(
        &with_url(
            &env,
            &tcp(
                "localhost",
                "postgres",
                "sslmode=verify-full&sslrootcert=/nonexistent/ca.pem",
            ),
            &["task", "claims"],
        ),
        "sslrootcert /nonexistent/ca.pem",
    );
}
