//! `/api/tasks/ID/review`: what a task's agent changed, for the operator to read and
//! comment on. The task's branch against the base its lane merges into (both as the
//! supervisor recorded them when it launched the agent: the `launched` ledger entry's
//! `base` and `worktree`, never anything the agent wrote), read in that worktree by
//! [`crate::git::Git::review`]; with the review comments already made on it (steering
//! items anchored to its lines, `steer::anchor`): their state, the agent's answer, and
//! whether the lines they quote still read the same. Once the phase has merged (nothing
//! left between base and the branch), the review is of what the merge brought in, from
//! the `merged` ledger entry `phase_done` writes; edits not committed yet come apart
//! (`uncommitted`). Each commit says what the pre-commit gate made of it
//! (`gate::phase::verdicts`: `passed`, `unverified`, or null for a merge or a
//! repository whose hooks do not run the gate).

use crate::error::{Error, Result};
use crate::git::{Git, Runner};
use crate::steer::anchor;
use crate::store::{agent_targets, Authority, ItemState};
use crate::when;
use serde_json::{json, Value};
use std::path::Path;

pub fn doc(s: &mut dyn Authority, runner: &Runner, id: &str) -> Result<Value> {
    let task = s.task(id)?;
    let launched = s.ledger_of_kinds(&task.id, &["launched"], 1)?;
    let Some(l) = launched.first() else {
        return Err(Error::input(format!(
            "no agent was launched on {}: nothing to review yet",
            task.handle()
        )));
    };
    let (Some(base), Some(worktree)) = (l.detail["base"].as_str(), l.detail["worktree"].as_str())
    else {
        return Err(Error::input(format!(
            "the launch of {} recorded no base and worktree (a supervisor older than the review)",
            task.handle()
        )));
    };
    let wt = Path::new(worktree);
    if !wt.is_dir() {
        return Err(Error::input(format!(
            "{}'s worktree {worktree} is gone: nothing to review",
            task.handle()
        )));
    }
    // The repository as the supervisor recorded it: a worktree's `.git` is its
    // agent's to write, so git is never pointed at what that file names.
    let Some(repo) = l.detail["repo"].as_str() else {
        return Err(Error::input(format!(
            "the launch of {} recorded no repository (a supervisor older than the review)",
            task.handle()
        )));
    };
    let git = Git::open(Path::new(repo), runner.clone())?;
    let mut review = git.review(wt, base, "HEAD")?;
    // Nothing left to merge: the phase merged, so show what its merge brought in (base
    // before the merge up to the merged commit, both as the supervisor recorded them).
    let mut merged = Value::Null;
    if review.commits.is_empty() && review.files.is_empty() {
        if let Some(m) = s.ledger_of_kinds(&task.id, &["merged"], 1)?.pop() {
            let (Some(from), Some(to)) =
                (m.detail["previous"].as_str(), m.detail["commit"].as_str())
            else {
                return Err(Error::Other(format!(
                    "{}'s merge entry has no commits",
                    task.handle()
                )));
            };
            review = git.review_range(wt, base, from, to)?;
            merged = json!({
                "phase": m.detail["phase"], "base": m.detail["base"], "commit": to,
                "at": when::rfc3339(m.at),
            });
        }
    }
    // What the pre-commit gate made of each commit; nothing when the repository's
    // hooks do not run it (or the worktree is no longer the repository's).
    let verdicts = crate::gate::phase::pinned(wt, git.common_dir())
        .and_then(|r| crate::gate::phase::verdicts(&r, &review.merge_base, &review.head))
        .ok()
        .flatten()
        .unwrap_or_default();
    let (uncommitted, uncommitted_cut) = git.uncommitted(wt)?;
    let lane = l.detail["lane"].as_str();
    let targets = agent_targets(l.actor.as_deref(), lane, Some(wt));
    let now = s.now()?;
    // A lane's items from before this task was claimed are about other work.
    let since = s
        .ledger_of_kinds(&task.id, &["claimed"], 1000)?
        .iter()
        .map(|e| e.at)
        .min()
        .unwrap_or(0);
    let mut comments = Vec::new();
    for item in s.inbox(&targets, true)? {
        if item.created < since {
            continue;
        }
        let Some((a, quoted, comment)) = anchor::parse(&item.text) else {
            continue;
        };
        let outdated = anchor::excerpt(wt, &a).map_or(true, |now| now != quoted);
        let answer = if item.state == ItemState::Pending {
            Value::Null
        } else {
            s.acks_for(&item.key)?
                .into_iter()
                .rev()
                .find(|r| r.effect == "acked" || r.effect == "refused")
                .map_or(
                    Value::Null,
                    |r| json!({"polarity": r.polarity, "body": r.body, "at": when::rfc3339(r.at)}),
                )
        };
        comments.push(json!({
            "key": item.key, "state": item.state, "path": a.path, "start": a.start, "end": a.end,
            "comment": comment, "outdated": outdated, "answer": answer,
            "created": when::rfc3339(item.created),
        }));
    }
    let mut v = serde_json::to_value(&review).expect("a review serialises");
    for c in v["commits"].as_array_mut().into_iter().flatten() {
        let verdict = verdicts.iter().find(|(sha, _)| c["sha"] == sha.as_str());
        c["gate"] = json!(verdict.map(|(_, passed)| if *passed { "passed" } else { "unverified" }));
    }
    v["task"] =
        json!({"id": task.id, "handle": task.handle(), "title": task.title, "phase": task.phase});
    v["lane"] = json!(lane);
    v["worktree"] = json!(worktree);
    v["comments"] = json!(comments);
    v["merged"] = merged;
    v["uncommitted"] = json!(uncommitted);
    v["uncommitted_truncated"] = json!(uncommitted_cut);
    v["now"] = json!(when::rfc3339(now));
    Ok(v)
}
