//! What a claim's sessions carry from one to the next, read from the task's ledger
//! (the authority), not from the lane's row (a report a restart may have lost or
//! another supervisor overwritten): the lineage of sessions the claim passed through
//! by renewal, the conversation they have been continuing and the transcript it is
//! written to.
//!
//! Invariants:
//! - The lineage of a claimant is the chain of `successor` entries that leads to it,
//!   back to the holding's start (`claimed` or `takeover`): however many supervisor
//!   restarts and successions lie between, a successor knows every predecessor.
//! - The conversation is the last one a session of that lineage launched with or
//!   reported (`launched` names what the session was started on; `conversation`
//!   what its transcript calls it, as Codex names its own threads), so a resume never
//!   names spice's own session id for a conversation the agent calls otherwise.

use super::Lane;
use crate::config::profile::Placeholder;
use crate::error::Result;
use crate::fleet::launch;
use crate::store::{Claim, LedgerEntry};
use serde_json::json;
use std::path::Path;

/// What a successor of `claimant` continues.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Carried {
    /// Earlier sessions of the holding, oldest first, ending with `claimant`.
    pub lineage: Vec<String>,
    /// The agent's id of the conversation to resume, if any session launched.
    pub conversation: Option<String>,
    /// The transcript that conversation is written to, if one was found.
    pub transcript: Option<String>,
}

/// Reads what a successor of `claimant` carries from the task's `ledger` (oldest
/// first). A claimant the ledger does not know carries only itself.
pub fn carried(ledger: &[LedgerEntry], claimant: &str) -> Carried {
    let mut lineage = vec![claimant.to_string()];
    // Walk back through the successions from the newest entry that made `claimant`
    // the holder.
    let mut current = claimant.to_string();
    let mut upto = ledger.len();
    loop {
        let found = ledger[..upto].iter().rposition(|e| {
            e.actor.as_deref() == Some(current.as_str())
                && matches!(e.kind.as_str(), "successor" | "claimed" | "takeover")
        });
        let Some(i) = found else { break };
        let e = &ledger[i];
        upto = i;
        if e.kind != "successor" {
            break;
        }
        let Some(from) = e.detail.get("from").and_then(|v| v.as_str()) else {
            break;
        };
        if lineage.iter().any(|s| s == from) {
            break; // a cycle would be a corrupt ledger: stop rather than loop
        }
        lineage.insert(0, from.to_string());
        current = from.to_string();
    }
    let mut carried = Carried {
        lineage,
        ..Carried::default()
    };
    let start = upto;
    for e in &ledger[start..] {
        let Some(actor) = e.actor.as_deref() else {
            continue;
        };
        if !carried.lineage.iter().any(|s| s == actor) {
            continue;
        }
        let text = |k: &str| e.detail.get(k).and_then(|v| v.as_str()).map(String::from);
        match e.kind.as_str() {
            "launched" | "conversation" => {
                if let Some(c) = text("conversation") {
                    if carried.conversation.as_ref() != Some(&c) && e.kind == "launched" {
                        // A launch on another conversation (a fresh start) makes an
                        // earlier transcript irrelevant.
                        carried.transcript = None;
                    }
                    carried.conversation = Some(c);
                }
                if let Some(t) = text("transcript") {
                    carried.transcript = Some(t);
                }
            }
            _ => {}
        }
    }
    carried
}

impl Lane<'_> {
    /// A claim whose sessions' transcript was never found (its supervisor was
    /// killed before the first search): the newest transcript an earlier session
    /// wrote in the worktree is the conversation to resume, under the id it gives.
    pub(super) fn recover_conversation(&mut self, claim: &Claim, worktree: &Path) -> Result<()> {
        let value = |p: Placeholder| -> Option<String> {
            match p {
                Placeholder::Home => launch::home(&launch::environment(
                    self.cfg,
                    self.opts,
                    &self.base,
                    "",
                    &claim.task_id,
                )),
                Placeholder::Worktree => Some(worktree.display().to_string()),
                _ => None,
            }
        };
        let (_, Some(search)) = crate::fleet::follow::transcript_place(self.cfg, &value) else {
            return Ok(());
        };
        if let Some((path, id)) = crate::fleet::follow::recover(&search, worktree) {
            let path = path.display().to_string();
            self.store.note(
                &claim.task_id,
                "conversation",
                &claim.claimant,
                json!({ "conversation": id, "transcript": path, "recovered": true }),
            )?;
            self.row.conversation = Some(id);
            self.row.transcript = Some(path);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn entry(kind: &str, actor: &str, detail: serde_json::Value) -> LedgerEntry {
        LedgerEntry {
            seq: 0,
            task_id: "t".into(),
            at: 0,
            kind: kind.into(),
            actor: Some(actor.into()),
            fence: None,
            detail,
        }
    }

    #[test]
    fn a_claimant_unknown_to_the_ledger_carries_only_itself() {
        assert_eq!(
            carried(&[], "s1"),
            Carried {
                lineage: vec!["s1".into()],
                ..Carried::default()
            }
        );
    }

    #[test]
    fn regression_the_conversation_survives_any_number_of_restarts() {
        // Codex names its own thread: the first session launched on spice's id, then
        // its transcript said "thread-1"; three successions (supervisor restarts and
        // a death) later, the claimant still resumes thread-1 from its rollout.
        let mut l = vec![
            entry("claimed", "s1", json!({})),
            entry("launched", "s1", json!({"conversation": "s1"})),
            entry(
                "conversation",
                "s1",
                json!({"conversation": "thread-1", "transcript": "/r/rollout-1.jsonl"}),
            ),
        ];
        for (from, to) in [("s1", "s2"), ("s2", "s3"), ("s3", "s4")] {
            l.push(entry("successor", to, json!({"from": from})));
            l.push(entry("launched", to, json!({"conversation": "thread-1"})));
        }
        let c = carried(&l, "s4");
        assert_eq!(c.lineage, ["s1", "s2", "s3", "s4"]);
        assert_eq!(c.conversation.as_deref(), Some("thread-1"));
        assert_eq!(c.transcript.as_deref(), Some("/r/rollout-1.jsonl"));
    }

    #[test]
    fn a_successor_killed_before_its_launch_still_carries_the_conversation() {
        let l = vec![
            entry("claimed", "s1", json!({})),
            entry("launched", "s1", json!({"conversation": "s1"})),
            entry("successor", "s2", json!({"from": "s1"})),
        ];
        let c = carried(&l, "s2");
        assert_eq!(c.lineage, ["s1", "s2"]);
        assert_eq!(c.conversation.as_deref(), Some("s1"));
    }

    #[test]
    fn an_earlier_holding_of_the_task_is_not_carried() {
        // Another lane held the task before (its phase is done): its conversation is
        // not this holding's.
        let l = vec![
            entry("claimed", "a1", json!({})),
            entry("launched", "a1", json!({"conversation": "a1"})),
            entry(
                "conversation",
                "a1",
                json!({"conversation": "a1", "transcript": "/a.jsonl"}),
            ),
            entry("claimed", "b1", json!({})),
        ];
        let c = carried(&l, "b1");
        assert_eq!(c.lineage, ["b1"]);
        assert_eq!(c.conversation, None);
        assert_eq!(c.transcript, None);
    }

    #[test]
    fn a_takeover_starts_a_new_lineage() {
        let l = vec![
            entry("claimed", "s1", json!({})),
            entry("launched", "s1", json!({"conversation": "s1"})),
            entry("takeover", "op", json!({})),
            entry("successor", "s2", json!({"from": "op"})),
        ];
        let c = carried(&l, "s2");
        assert_eq!(c.lineage, ["op", "s2"]);
        assert_eq!(c.conversation, None);
    }
}
