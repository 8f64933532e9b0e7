//! A claim's test bed: seeded into its worktree from the repository's best template
//! once the worktree is ready, with a slot and ports reserved in the store; the agent
//! gets them in its environment (`SPICE_SLOT`, `SPICE_PORTS`, `SPICE_PORT_0…`).
//!
//! A bed is help, not a condition: when no template matches, or seeding fails, the
//! worktree stays cold (the agent builds from nothing) and the ledger says why
//! (`bed`). Only the paths not already in the worktree are seeded, so a reused
//! worktree keeps its own bed.

use super::Lane;
use crate::bed::config::{self, BedConfig};
use crate::bed::template;
use crate::error::Result;
use crate::store::{BedSlot, Claim, Holder, SlotRequest};
use serde_json::{json, Value};
use std::path::Path;
use std::time::Instant;

/// How often a reservation is retried when another bed took an offered port.
const PORT_TRIES: usize = 8;

impl Lane<'_> {
    /// Seeds the bed of `claim`'s worktree at `wt` and reserves its slot; records
    /// what happened in the task's ledger.
    pub(super) fn seed_bed(
        &mut self,
        git: &crate::git::Git,
        claim: &Claim,
        holder: &Holder,
        wt: &Path,
    ) -> Result<()> {
        let cfg = match self.bed_config(git)? {
            Some(Ok(c)) => c,
            None => return Ok(()),
            Some(Err(why)) => {
                return self.note_bed(claim, holder, json!({ "seeded": false, "error": why }));
            }
        };
        let started = Instant::now();
        let mut detail = match git
            .resolve_commit(&self.base)
            .and_then(|commit| template::seed_worktree(git, &cfg, &commit, wt))
        {
            Ok(d) => d,
            Err(e) => json!({ "seeded": false, "method": "cold", "error": e.to_string() }),
        };
        detail["seconds"] = json!(started.elapsed().as_secs_f64());
        let method = detail["method"].as_str().map(str::to_string);
        let template = detail["template"].as_str().map(str::to_string);
        let slot = self.reserve_slot(
            claim,
            holder,
            wt,
            cfg.ports,
            template.as_deref(),
            method.as_deref(),
        )?;
        detail["worktree"] = json!(wt);
        detail["slot"] = json!(slot.slot);
        detail["ports"] = json!(slot.ports);
        self.note_bed(claim, holder, detail)
    }

    /// The repository's `[testbed]` at base: `None` without one, an error when it
    /// does not parse.
    pub(super) fn bed_config(
        &self,
        git: &crate::git::Git,
    ) -> Result<Option<std::result::Result<BedConfig, String>>> {
        let Some(text) = git.file_at(&self.base, config::FILE)? else {
            return Ok(None);
        };
        let shown = format!("{} (at {})", config::FILE, self.base);
        Ok(match config::parse(Path::new(&shown), &text) {
            Ok(Some(c)) => Some(Ok(c)),
            Ok(None) => None,
            Err(errs) => {
                let why: Vec<String> = errs.iter().map(|e| e.to_string()).collect();
                Some(Err(why.join("; ")))
            }
        })
    }

    fn note_bed(&mut self, claim: &Claim, holder: &Holder, mut detail: Value) -> Result<()> {
        detail["lane"] = json!(self.cfg.name);
        self.store
            .note(&claim.task_id, "bed", &holder.claimant, detail)
    }

    /// A slot and `n` ports no other live bed holds.
    fn reserve_slot(
        &mut self,
        claim: &Claim,
        holder: &Holder,
        wt: &Path,
        n: u16,
        template: Option<&str>,
        method: Option<&str>,
    ) -> Result<BedSlot> {
        let worktree = wt.display().to_string();
        // A worktree made again for the same task (after a supervisor restart found it
        // gone) keeps its ports when they are still free: its agent was told them.
        let before = self
            .store
            .bed_slot(&worktree)?
            .filter(|s| s.task_id.as_deref() == Some(claim.task_id.as_str()))
            .map(|s| s.ports)
            .filter(|p| p.len() == usize::from(n) && bindable(p));
        for i in 0..PORT_TRIES {
            let ports = match (&before, i) {
                (Some(p), 0) => p.clone(),
                _ => crate::bed::template::free_ports(n)?,
            };
            let req = SlotRequest {
                worktree: &worktree,
                task_id: &claim.task_id,
                template,
                method,
                ports: &ports,
                fence: holder.fence,
            };
            if let Ok(slot) = self.store.reserve_bed_slot(&req)? {
                return Ok(slot);
            }
        }
        Err(crate::error::Error::Other(format!(
            "no {n} free ports for the bed of {} after {PORT_TRIES} tries",
            claim.handle
        )))
    }
}

/// Whether every one of `ports` can be bound on 127.0.0.1 now.
fn bindable(ports: &[u16]) -> bool {
    let held: Vec<_> = ports
        .iter()
        .map(|p| std::net::TcpListener::bind(("127.0.0.1", *p)))
        .collect();
    held.iter().all(|l| l.is_ok())
}

/// What the agent is told of its bed.
pub(super) fn environment(slot: Option<&BedSlot>) -> Vec<(String, String)> {
    let Some(s) = slot else {
        return Vec::new();
    };
    let mut env = vec![
        ("SPICE_SLOT".to_string(), s.slot.to_string()),
        (
            "SPICE_PORTS".to_string(),
            s.ports
                .iter()
                .map(u16::to_string)
                .collect::<Vec<_>>()
                .join(","),
        ),
    ];
    for (i, p) in s.ports.iter().enumerate() {
        env.push((format!("SPICE_PORT_{i}"), p.to_string()));
    }
    env
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_agent_is_told_its_slot_and_ports() {
        assert!(environment(None).is_empty());
        let s = BedSlot {
            slot: 3,
            worktree: "/w".into(),
            task_id: None,
            template: None,
            method: None,
            ports: vec![4100, 4101],
            at: 0,
        };
        let env = environment(Some(&s));
        let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("SPICE_SLOT"), Some("3"));
        assert_eq!(get("SPICE_PORTS"), Some("4100,4101"));
        assert_eq!(get("SPICE_PORT_0"), Some("4100"));
        assert_eq!(get("SPICE_PORT_1"), Some("4101"));
    }
}
