//! `spice fleet service install|uninstall`: a systemd user unit that runs this
//! repository's `spice fleet up` and restarts it when it fails, so a fleet runs for
//! days, through logouts (with lingering) and reboots.
//!
//! The unit is `$XDG_CONFIG_HOME/systemd/user/spice-fleet-<repo>-<hash>.service`
//! (`~/.config` without `XDG_CONFIG_HOME`): `<repo>` is the repository directory's
//! name, `<hash>` eight hex digits of the state directory's path, so each state
//! directory (one supervisor each) has its own unit. It runs this binary by its
//! absolute path in the repository, with the `PATH` of the install (agents are found
//! on it) and the spice variables that place the state and the store (`SPICE_HOME`,
//! `SPICE_DATABASE_URL`, `SPICE_HOST`) when set. `KillMode=mixed`: systemd's SIGTERM
//! goes to the supervisor only, which stops its agents with their grace period, as on
//! `spice fleet down`.
//!
//! Invariants:
//! - Nothing here runs systemctl: `install` writes the file and prints the commands
//!   that load and enable it, and the one that keeps it running while logged out.
//! - `install` never replaces a unit that differs from the one it would write unless
//!   given `--force`; `uninstall` removes only a unit spice wrote ([`MARK`]), and its
//!   `default.target.wants` link.
//! - Every value is quoted for systemd (`%` specifiers, `$` in `ExecStart`, quotes and
//!   backslashes); a value with a line break or other control character is refused.

use super::super::Env;
use crate::error::{Error, Result};
use clap::Subcommand;
use std::path::{Path, PathBuf};

#[derive(Debug, Subcommand)]
pub enum ServiceCmd {
    /// Write the systemd user unit that runs `spice fleet up` here and restarts it on
    /// failure; prints how to enable it and how to keep it running while logged out.
    Install {
        /// Replace a unit of the same name that differs from the one written now.
        #[arg(long)]
        force: bool,
    },
    /// Remove the unit `install` wrote and its enablement link; prints how to stop it
    /// if it runs.
    Uninstall,
}

/// The first line of every unit spice writes.
const MARK: &str =
    "# Written by `spice fleet service install`; `spice fleet service uninstall` removes it.";
/// The variables that place the state and the store, carried into the unit when set.
const CARRIED: [&str; 3] = [
    "SPICE_HOME",
    crate::config::state::URL_VAR,
    super::super::HOST_VAR,
];

pub(super) fn run(cmd: ServiceCmd, env: &Env) -> Result<()> {
    let dir = unit_dir()?;
    let name = unit_name(env)?;
    let path = dir.join(&name);
    match cmd {
        ServiceCmd::Install { force } => install(env, &path, &name, force),
        ServiceCmd::Uninstall => uninstall(&path, &name),
    }
}

fn install(env: &Env, path: &Path, name: &str, force: bool) -> Result<()> {
    let (repo, fleet) = super::load(env)?;
    super::runnable(&repo, &fleet)?;
    let spice = std::env::current_exe()
        .and_then(std::fs::canonicalize)
        .map_err(|source| Error::Io {
            context: "failed to locate the spice binary".into(),
            source,
        })?;
    let mut vars: Vec<(String, String)> =
        vec![("PATH".into(), std::env::var("PATH").unwrap_or_default())];
    for var in CARRIED {
        if let Some(v) = std::env::var_os(var).filter(|v| !v.is_empty()) {
            let v = v
                .into_string()
                .map_err(|_| Error::input(format!("{var} is not UTF-8")))?;
            let v = if var == "SPICE_HOME" {
                absolute(&env.state_dir).display().to_string()
            } else {
                v
            };
            vars.push((var.to_string(), v));
        }
    }
    let text = unit(&repo, &spice, &vars)?;
    let io = |what: &str, source| Error::Io {
        context: format!("failed to {what} {}", path.display()),
        source,
    };
    match std::fs::read_to_string(path) {
        Ok(old) if old == text => {
            println!("unchanged: {}", path.display());
            return hints(name);
        }
        Ok(_) if !force => {
            return Err(Error::conflict(format!(
                "{} holds a different unit; pass --force to replace it",
                path.display()
            )))
        }
        _ => {}
    }
    let dir = path.parent().expect("a unit path has a directory");
    std::fs::create_dir_all(dir).map_err(|e| io("create the directory of", e))?;
    let tmp = dir.join(format!(".{name}.tmp"));
    std::fs::write(&tmp, &text).map_err(|e| io("write", e))?;
    // The store's URL may carry a password: such a unit is the user's to read only.
    if vars.iter().any(|(k, _)| k == crate::config::state::URL_VAR) {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o600));
    }
    std::fs::rename(&tmp, path).map_err(|e| io("write", e))?;
    println!("wrote {}", path.display());
    let secret = vars.iter().any(|(k, v)| {
        k == crate::config::state::URL_VAR
            && crate::store::Location::postgres(v).is_ok_and(|l| l.has_password())
    });
    if secret {
        println!(
            "note: the unit holds the store's password, and agents can read files their \
             operator can (reads are not confined; docs/security.md)"
        );
    }
    hints(name)
}

fn hints(name: &str) -> Result<()> {
    println!("start it now and at every login:");
    println!("  systemctl --user daemon-reload && systemctl --user enable --now {name}");
    println!("keep it running while you are logged out, and start it at boot:");
    println!("  loginctl enable-linger $USER");
    println!("follow it: spice fleet logs -f (or journalctl --user -u {name})");
    Ok(())
}

fn uninstall(path: &Path, name: &str) -> Result<()> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            println!("no unit at {}: nothing to remove", path.display());
            return Ok(());
        }
        Err(source) => {
            return Err(Error::Io {
                context: format!("failed to read {}", path.display()),
                source,
            })
        }
    };
    if !text.starts_with(MARK) {
        return Err(Error::conflict(format!(
            "{} was not written by `spice fleet service install`; left as it is",
            path.display()
        )));
    }
    let dir = path.parent().expect("a unit path has a directory");
    let wants = dir.join("default.target.wants").join(name);
    if wants
        .symlink_metadata()
        .is_ok_and(|m| m.file_type().is_symlink())
    {
        let _ = std::fs::remove_file(&wants);
    }
    std::fs::remove_file(path).map_err(|source| Error::Io {
        context: format!("failed to remove {}", path.display()),
        source,
    })?;
    println!("removed {}", path.display());
    println!("if it runs, stop it and forget it:");
    println!("  systemctl --user stop {name} && systemctl --user daemon-reload");
    Ok(())
}

/// `$XDG_CONFIG_HOME/systemd/user`, else `$HOME/.config/systemd/user`.
fn unit_dir() -> Result<PathBuf> {
    let config = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| {
            std::env::var_os("HOME")
                .map(PathBuf::from)
                .filter(|p| p.is_absolute())
                .map(|h| h.join(".config"))
        })
        .ok_or_else(|| {
            Error::input(
                "no place for a systemd user unit: neither XDG_CONFIG_HOME nor HOME is set",
            )
        })?;
    Ok(config.join("systemd").join("user"))
}

/// `spice-fleet-<repo>-<hash>.service`.
fn unit_name(env: &Env) -> Result<String> {
    let repo = env.repo_top.as_ref().ok_or_else(|| {
        Error::input(
            "spice fleet service needs a git work tree (lanes live in its lanes/ directory)",
        )
    })?;
    let base: String = repo
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(32)
        .collect();
    let state = absolute(&env.state_dir);
    let hash = xxhash_rust::xxh3::xxh3_64(state.as_os_str().as_encoded_bytes()) as u32;
    Ok(format!("spice-fleet-{base}-{hash:08x}.service"))
}

fn absolute(p: &Path) -> PathBuf {
    std::fs::canonicalize(p)
        .or_else(|_| std::path::absolute(p))
        .unwrap_or_else(|_| p.to_path_buf())
}

/// The unit's text.
fn unit(repo: &Path, spice: &Path, vars: &[(String, String)]) -> Result<String> {
    let repo_s = plain(&repo.display().to_string())?;
    let exec = [spice.display().to_string(), "fleet".into(), "up".into()]
        .iter()
        .map(|w| quoted(w).map(|q| q.replace('$', "$$")))
        .collect::<Result<Vec<_>>>()?
        .join(" ");
    let mut env = String::new();
    for (k, v) in vars {
        env.push_str(&format!("Environment={}\n", quoted(&format!("{k}={v}"))?));
    }
    Ok(format!(
        "{MARK}
[Unit]
Description=spice fleet supervisor for {repo_s}

[Service]
Type=simple
WorkingDirectory={repo_s}
ExecStart={exec}
{env}Restart=on-failure
RestartSec=10s
# Bad configuration (2) and another supervisor already running (3) do not mend by
# restarting: the unit stops and `systemctl --user status` shows why.
RestartPreventExitStatus=2 3
# SIGTERM to the supervisor alone: it stops its agents (a grace period, then SIGKILL).
KillMode=mixed
TimeoutStopSec=2min

[Install]
WantedBy=default.target
"
    ))
}

/// `s` for a systemd value that is not quoted: specifiers escaped.
fn plain(s: &str) -> Result<String> {
    if s.chars().any(char::is_control) {
        return Err(Error::input(format!(
            "cannot write {s:?} into a systemd unit: it holds a control character"
        )));
    }
    Ok(s.replace('%', "%%"))
}

/// `s` in double quotes for systemd: specifiers, backslashes and quotes escaped.
fn quoted(s: &str) -> Result<String> {
    let s = plain(s)?.replace('\\', "\\\\").replace('"', "\\\"");
    Ok(format!("\"{s}\""))
}
