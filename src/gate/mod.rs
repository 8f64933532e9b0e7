//! Gates: measurable rules checked before every commit and before a phase merges.
//!
//! A run reads the repository's `spice.toml` ([`config`]), collects the paths in scope
//! with the content git will commit ([`scan`]), and applies every rule in a fixed
//! order (file caps, routine caps, repository checks), collecting every finding;
//! nothing stops at the first. Caps flex and latch ([`latch`]); an accepted run that
//! records drops the latches no cap holds any more, whether or not it touched their
//! files ([`latch`] says when). A rule that could not run is reported as such, never
//! as zero findings. Commit messages are checked by [`message`]; hooks are written by
//! [`hooks`]. The gate needs no store and no fleet: a repository runs `spice gate
//! install` and commits as usual.

pub mod agent;
pub mod checks;
pub mod config;
pub mod hooks;
pub mod latch;
pub mod message;
pub mod phase;
pub mod routines;
pub mod scan;

use config::{Cap, GateConfig};
use latch::{Latch, Latches, Verdict};
use scan::{Item, Repo, Scope};
use serde::Serialize;
use std::collections::{HashMap, HashSet};

/// One rule broken.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Finding {
    pub path: String,
    /// 1-based; the routine's first line for routine caps, 1 for file caps.
    pub line: u64,
    /// `file.lines`, `file.bytes`, `routine.lines`, `routine.complexity`, `check.NAME`.
    pub rule: String,
    /// The routine, for routine caps.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub routine: Option<String>,
    pub value: u64,
    /// The limit it was held to (the base while latched, else the flex ceiling).
    pub limit: u64,
    pub base: u64,
    pub ceiling: u64,
    pub latched: bool,
    /// What to do about it, one line.
    pub message: String,
}

/// A rule that could not run (a missing program, a timeout, a parse failure).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct NotRun {
    pub rule: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    pub why: String,
}

#[derive(Debug, Clone, Serialize, Default)]
pub struct Report {
    pub findings: Vec<Finding>,
    pub could_not_run: Vec<NotRun>,
    /// Paths measured (after exclusions).
    pub files: usize,
    /// Paths left out: excluded by glob or attribute, or binary.
    pub skipped: usize,
    /// Files that flexed above their base in this run (they pass, and are now latched).
    pub flexed: Vec<Finding>,
    /// The latches, as (rule, key), an accepted run would release and did not
    /// ([`Options::defer_releases`]).
    #[serde(skip)]
    pub released: Vec<(String, String)>,
}

impl Report {
    pub fn clean(&self) -> bool {
        self.findings.is_empty() && self.could_not_run.is_empty()
    }

    /// What a task's ledger records of this run (`gate_run`) in `repo`: the console
    /// shows a lane's last run and the repository's latched files from it.
    pub fn ledger_detail(&self, repo: &Repo) -> serde_json::Value {
        serde_json::json!({
            "clean": self.clean(),
            "common_dir": repo.common_dir,
            "worktree": repo.root,
            "files": self.files,
            "findings": self.findings,
            "could_not_run": self.could_not_run,
            "flexed": self.flexed,
        })
    }
}

/// What a run is told about who runs it and for what.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// The author or task session the jitter is keyed by.
    pub actor: String,
    /// The task's phase, for checks scoped to phases (`None`: not a task's run).
    pub phase: Option<String>,
    /// Write latch changes (a run that only looks does not).
    pub record: bool,
    /// Write only the latch changes that tighten (new latches, lower ones) and report
    /// the releases in [`Report::released`] instead: a run for an agent's commit
    /// releases a latch only once the supervisor sees that commit on its branch
    /// ([`agent`]), so a tree judged and never committed cannot free a file.
    pub defer_releases: bool,
    /// When the run happens (latches record it).
    pub now: crate::clock::Micros,
    /// The sandbox the repository's checks run in (a lane's, when the supervisor
    /// gates a confined agent's phase: the checks run the agent's files), with the
    /// variables it gives them; `None`: unconfined.
    pub confine: Option<crate::sandbox::Entry>,
    pub sandbox_env: Vec<(String, String)>,
}

/// Runs every rule over `scope`.
pub fn run(repo: &Repo, cfg: &GateConfig, scope: &Scope, opts: &Options) -> Result<Report, String> {
    let items = repo.items(scope)?;
    let mut latches = Latches::load(&repo.common_dir)?;
    let loaded = latches.clone();
    let mut report = Report::default();
    let cached = scope.cached();
    let paths: Vec<String> = items.iter().map(|i| i.path.clone()).collect();
    let marked = scan::attributed(repo, &paths, cached)?;
    let mut pending = latches.clone();
    let mut measured: Vec<&Item> = Vec::new();
    // What the run saw of each path in scope: skipped (`None`), or measured, with the
    // routines found in it once they are measured.
    let mut seen: HashMap<&str, Option<HashSet<String>>> = HashMap::new();
    for (item, marked) in items.iter().zip(marked) {
        if let Some(from) = &item.renamed_from {
            latches.rename(from, &item.path);
            pending.rename(from, &item.path);
        }
        if marked || cfg.excluded(&item.path) || scan::looks_binary(&item.content) {
            report.skipped += 1;
            seen.insert(&item.path, None);
            continue;
        }
        seen.insert(&item.path, Some(HashSet::new()));
        measured.push(item);
    }
    report.files = measured.len();
    let mut j = Judge {
        jitter: cfg.jitter,
        actor: &opts.actor,
        now: crate::when::rfc3339(opts.now),
        report: &mut report,
        latches: &mut latches,
        pending: &mut pending,
    };
    // File caps.
    for item in &measured {
        let Some(rule) = cfg.file_rule(&item.path) else {
            continue;
        };
        let at = At {
            rule: "file.lines",
            key: &item.path,
            path: &item.path,
            line: 1,
            routine: None,
        };
        if let Some(cap) = rule.lines {
            j.judge(&at, scan::count_lines(&item.content), cap);
        }
        if let Some(cap) = rule.bytes {
            let at = At {
                rule: "file.bytes",
                ..at
            };
            j.judge(&at, item.content.len() as u64, cap);
        }
    }
    // Routine caps.
    for item in &measured {
        let (Some(rule), Some(lang)) =
            (cfg.routine_rule(&item.path), routines::Lang::of(&item.path))
        else {
            continue;
        };
        let found = match routines::measure(lang, &item.content) {
            Ok(r) => {
                let names = r.iter().map(|r| r.name.clone());
                seen.insert(&item.path, Some(names.collect()));
                r
            }
            Err(why) => {
                j.report.could_not_run.push(NotRun {
                    rule: "routine".into(),
                    path: Some(item.path.clone()),
                    why,
                });
                continue;
            }
        };
        for r in found {
            let key = format!("{}::{}", item.path, r.name);
            let at = At {
                rule: "routine.lines",
                key: &key,
                path: &item.path,
                line: r.line,
                routine: Some(&r.name),
            };
            if let Some(cap) = rule.lines {
                j.judge(&at, r.lines, cap);
            }
            if let Some(cap) = rule.complexity {
                let at = At {
                    rule: "routine.complexity",
                    ..at
                };
                j.judge(&at, r.complexity, cap);
            }
        }
    }
    // Repository checks, given every path in scope (measured or not).
    let scoped: Vec<String> = items.iter().map(|i| i.path.clone()).collect();
    for check in &cfg.checks {
        match checks::run(repo, check, &scoped, opts) {
            checks::Outcome::Skipped | checks::Outcome::Passed => {}
            checks::Outcome::Failed { code, output } => report.findings.push(Finding {
                path: String::new(),
                line: 0,
                rule: format!("check.{}", check.name),
                routine: None,
                value: code.map_or(0, |c| c as u64),
                limit: 0,
                base: 0,
                ceiling: 0,
                latched: false,
                message: output,
            }),
            checks::Outcome::NotRun(why) => report.could_not_run.push(NotRun {
                rule: format!("check.{}", check.name),
                path: None,
                why,
            }),
        }
    }
    if opts.record {
        if report.clean() {
            for (rule, key) in unlimited(repo, cfg, scope, &seen, &pending)? {
                pending.clear(&rule, &key);
            }
        }
        let mut keep = if report.clean() { pending } else { latches };
        if opts.defer_releases {
            report.released = keep.held_back(&loaded);
        }
        // Unchanged latches are not written again (the hooks sit on every commit).
        if keep.latches != loaded.latches {
            // Other commits may have changed them since: this run's changes go onto
            // what is there now, one writer at a time.
            let _writer = Latches::lock(&repo.common_dir)?;
            let mut now = Latches::load(&repo.common_dir)?;
            now.apply(&loaded, &keep);
            now.save(&repo.common_dir)?;
        }
    }
    Ok(report)
}

/// The latches nothing limits any more, as (rule, key): their file is gone from what
/// the run would commit, generated, vendored, binary or excluded, or no cap of
/// spice.toml holds that rule for it now (its glob stopped matching, the cap went,
/// or dropped that rule), or a routine the run measured the file without. `seen` is
/// what the run made of the paths in its scope (skipped, or measured with the routines
/// found); a latched path outside the scope (a file this commit does not touch) is
/// read as the scope has it and kept while it is still capped: not being changed does
/// not release a latch.
fn unlimited(
    repo: &Repo,
    cfg: &GateConfig,
    scope: &Scope,
    seen: &HashMap<&str, Option<HashSet<String>>>,
    latches: &Latches,
) -> Result<Vec<(String, String)>, String> {
    let mut released = Vec::new();
    let mut outside: Vec<(&Latch, &str)> = Vec::new();
    for l in latches.all() {
        let (path, routine) = latch::split_key(&l.rule, &l.path);
        match seen.get(path) {
            Some(None) => released.push(l),
            Some(Some(names)) => {
                let gone = routine.is_some_and(|r| !names.contains(r));
                if gone || !capped(cfg, &l.rule, path) {
                    released.push(l);
                }
            }
            None => outside.push((l, path)),
        }
    }
    if !outside.is_empty() {
        let mut paths: Vec<String> = outside.iter().map(|(_, p)| p.to_string()).collect();
        paths.sort();
        paths.dedup();
        let contents = repo.read(scope, &paths)?;
        let marked = scan::attributed(repo, &paths, scope.cached())?;
        let limited: HashMap<&str, bool> = paths
            .iter()
            .zip(contents.iter().zip(marked))
            .map(|(p, (content, marked))| {
                let measured = content
                    .as_ref()
                    .is_some_and(|c| !marked && !cfg.excluded(p) && !scan::looks_binary(c));
                (p.as_str(), measured)
            })
            .collect();
        for (l, path) in outside {
            if !limited[path] || !capped(cfg, &l.rule, path) {
                released.push(l);
            }
        }
    }
    Ok(released
        .into_iter()
        .map(|l| (l.rule.clone(), l.path.clone()))
        .collect())
}

/// Whether a cap of `cfg` holds `rule` for the (measured) file `path`. A rule this
/// build does not know is taken as held: its latch is not ours to drop.
fn capped(cfg: &GateConfig, rule: &str, path: &str) -> bool {
    let routine = |cap: fn(&config::RoutineRule) -> Option<Cap>| {
        routines::Lang::of(path).is_some() && cfg.routine_rule(path).and_then(cap).is_some()
    };
    match rule {
        "file.lines" => cfg.file_rule(path).and_then(|r| r.lines).is_some(),
        "file.bytes" => cfg.file_rule(path).and_then(|r| r.bytes).is_some(),
        "routine.lines" => routine(|r| r.lines),
        "routine.complexity" => routine(|r| r.complexity),
        _ => true,
    }
}

/// Where a measure was taken: its rule, its latch key, and what a finding names.
#[derive(Clone, Copy)]
struct At<'a> {
    rule: &'a str,
    /// The latch key: the path, or `path::routine`.
    key: &'a str,
    path: &'a str,
    line: u64,
    routine: Option<&'a str>,
}

/// Judges measures against caps, collecting findings and latch changes.
struct Judge<'a> {
    jitter: f64,
    actor: &'a str,
    now: String,
    report: &'a mut Report,
    /// What stays whatever the run's outcome (failures' latches).
    latches: &'a mut Latches,
    /// What the run leaves if it is accepted.
    pending: &'a mut Latches,
}

impl Judge<'_> {
    fn judge(&mut self, at: &At, value: u64, cap: Cap) {
        let ceiling = latch::ceiling(cap, self.jitter, at.key, self.actor);
        let was = self.latches.get(at.rule, at.key).map(|l| l.value);
        let (verdict, limit) = latch::judge(value, cap.base, ceiling, was);
        let finding = Finding {
            path: at.path.to_string(),
            line: at.line,
            rule: at.rule.to_string(),
            routine: at.routine.map(str::to_string),
            value,
            limit,
            base: cap.base,
            ceiling,
            latched: verdict != Verdict::Under,
            message: advice(at, verdict, value, limit, cap.base, ceiling),
        };
        let mark = |size: u64| Latch {
            rule: at.rule.to_string(),
            path: at.key.to_string(),
            value: size,
            base: cap.base,
            since: self.now.clone(),
        };
        match verdict {
            Verdict::Under => {
                self.pending.clear(at.rule, at.key);
            }
            Verdict::Flexed | Verdict::Held => {
                self.pending.set(mark(value));
                self.report.flexed.push(finding);
            }
            Verdict::Grew => self.report.findings.push(finding),
            Verdict::Over => {
                // A failure's latch only tightens: kept whatever else the run finds.
                self.latches.set(mark(cap.base));
                self.pending.set(mark(cap.base));
                self.report.findings.push(finding);
            }
        }
    }
}

fn advice(at: &At, v: Verdict, value: u64, limit: u64, base: u64, ceiling: u64) -> String {
    let measure = match at.rule {
        "file.lines" => format!("{value} lines"),
        "file.bytes" => format!("{value} bytes"),
        "routine.lines" => format!("{value} lines in the routine"),
        _ => format!("complexity {value}"),
    };
    let subject = at.routine.map_or_else(String::new, |r| format!("{r}: "));
    match v {
        Verdict::Under => format!("{subject}{measure}, within {base}"),
        Verdict::Flexed => format!(
            "{subject}{measure}, above the base {base} (flex ceiling {ceiling}): passes, and is latched: it may not grow until it is back at {base}"
        ),
        Verdict::Held => format!(
            "{subject}{measure}, latched (at most {limit} until it is back at the base {base}): passes"
        ),
        Verdict::Grew => format!(
            "{subject}{measure}, latched at {limit}: it may not grow until it is back at the base {base}; shrink it (split it) to {base} or less"
        ),
        Verdict::Over => format!(
            "{subject}{measure}, past the flex ceiling {ceiling} (base {base}): split it to {base} or less; it is latched until then"
        ),
    }
}

/// One line per finding: `path:line: rule: message`.
pub fn render_text(report: &Report) -> String {
    let mut out = String::new();
    for f in &report.findings {
        if f.rule.starts_with("check.") {
            out.push_str(&format!("{}: failed", f.rule));
            let shown: Vec<&str> = f.message.lines().collect();
            if shown.is_empty() {
                out.push('\n');
            } else {
                out.push_str(":\n");
                for l in shown {
                    out.push_str(&format!("    {l}\n"));
                }
            }
        } else {
            out.push_str(&format!(
                "{}:{}: {}: {}\n",
                f.path, f.line, f.rule, f.message
            ));
        }
    }
    for n in &report.could_not_run {
        match &n.path {
            Some(p) => out.push_str(&format!("{p}: {}: could not run: {}\n", n.rule, n.why)),
            None => out.push_str(&format!("{}: could not run: {}\n", n.rule, n.why)),
        }
    }
    out
}
