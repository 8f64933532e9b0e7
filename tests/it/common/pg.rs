//! A PostgreSQL server for the tests that need one, each test on a database of its own.
//!
//! `SPICE_TEST_POSTGRES` (a URL; `.ci/run` starts a throwaway cluster and exports it)
//! names the server; each [`Database`] is created on it and dropped after the test.
//! Without the variable a test starts its own throwaway cluster from Debian's server
//! binaries (`/usr/lib/postgresql/*/bin`: `initdb`, `pg_ctl`), listening only on a unix
//! socket in its temporary directory (`listen_addresses=''`), stopped when the test
//! ends; as root, the server runs as the `postgres` user, as PostgreSQL insists.
//! Under `CI` a missing variable fails the test: CI must never pass by not testing.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// The reason on every test that needs the server.
pub const NEEDS: &str = "needs PostgreSQL (SPICE_TEST_POSTGRES)";

/// One test's database, and the cluster it runs on when the test started one.
pub struct Database {
    /// The URL the store is pointed at.
    pub url: String,
    name: String,
    admin: String,
    cluster: Option<Cluster>,
}

impl Database {
    /// A fresh database for `test`, or `None` (said on stderr) where no server can be
    /// had outside CI.
    pub fn new(test: &str) -> Option<Database> {
        let (admin, cluster) = match std::env::var("SPICE_TEST_POSTGRES") {
            Ok(url) if !url.is_empty() => (url, None),
            _ => {
                assert!(
                    std::env::var_os("CI").is_none(),
                    "{test}: SPICE_TEST_POSTGRES is not set under CI (.ci/run starts the server)"
                );
                match Cluster::start() {
                    Ok(c) => (c.url("postgres"), Some(c)),
                    Err(why) => {
                        eprintln!("{test}: skipped: no PostgreSQL server ({why})");
                        return None;
                    }
                }
            }
        };
        Some(Database::create(test, admin, cluster))
    }

    /// A fresh database on a cluster of the test's own, for a test that restarts the
    /// server (never the shared one other tests use). `None` (said on stderr) where no
    /// cluster can be started outside CI; under `CI` that fails the test.
    pub fn on_own_cluster(test: &str) -> Option<Database> {
        let cluster = match Cluster::start() {
            Ok(c) => c,
            Err(why) => {
                assert!(
                    std::env::var_os("CI").is_none(),
                    "{test}: cannot start a PostgreSQL cluster under CI: {why}"
                );
                eprintln!("{test}: skipped: no PostgreSQL cluster ({why})");
                return None;
            }
        };
        Some(Database::create(
            test,
            cluster.url("postgres"),
            Some(cluster),
        ))
    }

    /// A database of a fresh name created through `admin`.
    fn create(test: &str, admin: String, cluster: Option<Cluster>) -> Database {
        let name = format!("spice_{}", uuid::Uuid::new_v4().simple());
        let mut c = postgres::Client::connect(&admin, postgres::NoTls)
            .unwrap_or_else(|e| panic!("{test}: cannot reach PostgreSQL at {admin}: {e}"));
        c.batch_execute(&format!("CREATE DATABASE {name}")).unwrap();
        Database {
            url: with_db(&admin, &name),
            name,
            admin,
            cluster,
        }
    }

    /// A host on this database: a hermetic environment whose state directory's
    /// `config.toml` names it, as each host of a fleet points at the one server.
    pub fn host(&self) -> super::TestEnv {
        let env = super::TestEnv::new();
        std::fs::create_dir_all(&env.home).unwrap();
        std::fs::write(
            env.home.join("config.toml"),
            format!("[store]\nurl = \"{}\"\n", self.url),
        )
        .unwrap();
        env
    }

    /// A connection of the test's own, for what the CLI does not show.
    pub fn client(&self) -> postgres::Client {
        postgres::Client::connect(&self.url, postgres::NoTls).unwrap()
    }

    /// The cluster the test started, if it started one (for restarts).
    pub fn cluster(&self) -> Option<&Cluster> {
        self.cluster.as_ref()
    }
}

impl Drop for Database {
    fn drop(&mut self) {
        if self.cluster.is_none() {
            if let Ok(mut c) = postgres::Client::connect(&self.admin, postgres::NoTls) {
                let _ = c.batch_execute(&format!(
                    "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                    self.name
                ));
            }
        }
    }
}

/// `url` with its database replaced by `db`.
pub fn with_db(url: &str, db: &str) -> String {
    let start = url.find("://").map_or(0, |i| i + 3);
    let rest = &url[start..];
    let auth_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let query = rest.find('?').map_or("", |q| &rest[q..]);
    format!("{}{}/{db}{query}", &url[..start], &rest[..auth_end])
}

/// A throwaway cluster in a temporary directory, stopped (immediately) on drop.
pub struct Cluster {
    dir: tempfile::TempDir,
    bin: PathBuf,
    as_postgres: bool,
    /// Server options after the defaults (a later `-c` wins).
    extra: String,
}

impl Cluster {
    /// `initdb` and `pg_ctl start` of a cluster on a unix socket in a new temp dir.
    pub fn start() -> Result<Cluster, String> {
        Cluster::start_with("", |_| Ok(()))
    }

    /// Like [`Cluster::start`], with `extra` server options (`-c name=value …`) and
    /// `prepare` run on the data directory (as root, before it is handed to postgres)
    /// between `initdb` and the start.
    pub fn start_with(
        extra: &str,
        prepare: impl FnOnce(&Path) -> Result<(), String>,
    ) -> Result<Cluster, String> {
        let bin = server_bin().ok_or("no initdb under /usr/lib/postgresql/*/bin")?;
        // /proc/self belongs to the process's effective user.
        let as_postgres = std::os::unix::fs::MetadataExt::uid(
            &std::fs::metadata("/proc/self").map_err(|e| e.to_string())?,
        ) == 0;
        let dir = tempfile::Builder::new()
            .prefix("spice-pg-")
            .tempdir_in("/tmp")
            .map_err(|e| e.to_string())?;
        if as_postgres {
            let st = Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(dir.path())
                .status()
                .map_err(|e| e.to_string())?;
            if !st.success() {
                return Err("cannot give the cluster's directory to postgres".into());
            }
        }
        let c = Cluster {
            dir,
            bin,
            as_postgres,
            extra: extra.to_string(),
        };
        let data = c.data();
        c.run(
            "initdb",
            &[
                "-D",
                data.to_str().unwrap(),
                "-U",
                "postgres",
                "--auth=trust",
                "--no-sync",
                "-E",
                "UTF8",
                "--locale=C",
            ],
        )?;
        prepare(&data)?;
        if as_postgres {
            let st = Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(&data)
                .status()
                .map_err(|e| e.to_string())?;
            if !st.success() {
                return Err("cannot give the prepared data directory to postgres".into());
            }
        }
        c.pg_ctl("start")?;
        Ok(c)
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// The socket directory.
    pub fn socket_dir(&self) -> &Path {
        self.dir.path()
    }

    /// The URL of database `db` on this cluster.
    pub fn url(&self, db: &str) -> String {
        format!(
            "postgresql:///{db}?host={}&user=postgres",
            self.socket_dir().display()
        )
    }

    /// `pg_ctl start`, `stop` or `restart`, waiting until it is done.
    pub fn pg_ctl(&self, verb: &str) -> Result<(), String> {
        let data = self.data();
        let opts = format!(
            "-k {} -c listen_addresses='' -c fsync=off -c max_connections=200 {}",
            self.socket_dir().display(),
            self.extra
        );
        let log = self.dir.path().join("server.log");
        let mut args = vec!["-D", data.to_str().unwrap(), "-w", "-m", "fast", verb];
        if verb != "stop" {
            args.extend(["-o", &opts, "-l", log.to_str().unwrap()]);
        }
        self.run("pg_ctl", &args)
    }

    fn run(&self, tool: &str, args: &[&str]) -> Result<(), String> {
        let exe = self.bin.join(tool);
        let mut cmd = if self.as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(&exe);
            c
        } else {
            Command::new(&exe)
        };
        let out = cmd
            .args(args)
            .current_dir(self.dir.path())
            .output()
            .map_err(|e| format!("{}: {e}", exe.display()))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "{tool} failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ))
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let data = self.data();
        let _ = self.run(
            "pg_ctl",
            &[
                "-D",
                data.to_str().unwrap(),
                "-w",
                "-m",
                "immediate",
                "stop",
            ],
        );
    }
}

/// The newest `/usr/lib/postgresql/N/bin` that has `initdb`.
pub fn server_bin() -> Option<PathBuf> {
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .flatten()
        .filter_map(|e| {
            let v: u32 = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").is_file().then_some((v, bin))
        })
        .collect();
    found.sort();
    found.pop().map(|(_, b)| b)
}
