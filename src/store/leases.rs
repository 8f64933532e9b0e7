//! The rules on a claim someone holds, written once for both backends: renewing it
//! (and passing it to a successor session), holding it across an act outside the store,
//! recording its worktree, releasing it, and taking it over. Each runs inside one
//! transaction of its backend, reached through [`LeaseTx`], the row-level steps that
//! transaction offers; what is refused, with which words ([`super::refusals`]), and what
//! the ledger records live only here. Claiming a ready task is not among them: each
//! backend finds the task to claim its own way (SQLite's one writer, PostgreSQL's
//! `SKIP LOCKED`).
//!
//! Invariants: the claim is read (and, where the backend locks rows, locked) before
//! the authority's clock, so a writer that waited for the lock never judges a lease by
//! a moment before it; every write names the fence it judged, so it changes only that
//! holding; a lease is never shortened; a successor and a takeover each get a fresh
//! fence, a plain renewal keeps its own; a lapsed lease goes only to a takeover naming
//! its exact fence, a live one only with `force` as well.

use super::authority::Cell;
use super::claims::{check_claimant, judge_holder, lease_end};
use super::refusals;
use super::{Claim, Holder, Takeover};
use crate::clock::Micros;
use crate::error::Result;
use std::time::Duration;

/// A holding given to someone else under a fresh fence.
pub(crate) struct Handover<'a> {
    pub claimant: &'a str,
    pub lane: Option<&'a str>,
    pub worktree: Option<&'a str>,
    pub until: Micros,
    /// The holding starts afresh (a takeover: it is claimed now) rather than
    /// continuing the one it replaces (a successor session).
    pub afresh: bool,
}

/// The steps of one open transaction of a backend that the lease rules are made of.
/// `id` is a task id; a `fence` names the holding a write is for, and a backend
/// writes only under it.
pub(crate) trait LeaseTx {
    /// A typed id (stamp, prefix, handle, uuid) as a task id.
    fn resolve(&mut self, input: &str) -> Result<String>;
    /// The claim on a task, if any, locked until the transaction ends where the
    /// backend locks rows.
    fn lock_claim(&mut self, id: &str) -> Result<Option<Claim>>;
    /// The authority's time, read after the claim.
    fn now(&mut self) -> Result<Micros>;
    /// The task's (project, phase), for the ledger.
    fn cell_of(&mut self, id: &str) -> Result<Cell>;
    /// The session the claim last passed to from `claimant`, if it did.
    fn successor_of(&mut self, id: &str, claimant: &str) -> Result<Option<String>>;
    /// Moves the holding's deadline to `until`, renewed `now`.
    fn extend(&mut self, id: &str, fence: i64, until: Micros, now: Micros) -> Result<()>;
    /// Records where the holding works.
    fn set_worktree(&mut self, id: &str, fence: i64, worktree: &str) -> Result<()>;
    /// Gives the holding to `to` under a fresh fence, which it returns.
    fn hand_over(&mut self, id: &str, fence: i64, to: &Handover<'_>, now: Micros) -> Result<i64>;
    /// Deletes the holding, with the ledger entry `kind` by `actor`.
    fn drop_claim(
        &mut self,
        id: &str,
        fence: i64,
        now: Micros,
        kind: &str,
        actor: Option<&str>,
    ) -> Result<()>;
    /// Appends an entry (its kind, actor and fence) to the task's ledger.
    fn append(
        &mut self,
        id: &str,
        now: Micros,
        entry: (&str, Option<&str>, Option<i64>),
        detail: serde_json::Value,
    ) -> Result<()>;
    /// The claim as it stands now (it must exist).
    fn claim(&mut self, id: &str) -> Result<Claim>;
}

/// The claim on `input`, the authority's time after reading it, and the task's id.
fn open(t: &mut impl LeaseTx, input: &str) -> Result<(String, Option<Claim>, Micros)> {
    let id = t.resolve(input)?;
    let claim = t.lock_claim(&id)?;
    let now = t.now()?;
    Ok((id, claim, now))
}

/// Extends the holder's lease to at least `lease` from now (never shortening it); with
/// `successor`, passes the claim to the successor session under a new fence without
/// releasing it. A claimant whose claim passed on is told to whom.
pub(crate) fn renew(
    t: &mut impl LeaseTx,
    input: &str,
    holder: &Holder,
    successor: Option<&str>,
    lease: Duration,
) -> Result<Claim> {
    let claimant = holder.claimant.as_str();
    if let Some(s) = successor {
        check_claimant(s)?;
    }
    let (id, claim, now) = open(t, input)?;
    let claim = claim.ok_or_else(|| refusals::renew_unclaimed(&id, claimant))?;
    if claim.claimant != claimant {
        let passed = t.successor_of(&id, claimant)?;
        let held = Some(claimant);
        return Err(refusals::held_by("renew", &id, held, &claim, now, passed.as_deref()).into());
    }
    judge_holder(&id, Some(&claim), Some(holder), now, "renew")?;
    let until = claim.lease_until.max(lease_end(now, lease)?);
    match successor {
        Some(next) if next != claimant => {
            let to = Handover {
                claimant: next,
                lane: claim.lane.as_deref(),
                worktree: claim.worktree.as_deref(),
                until,
                afresh: false,
            };
            let fence = t.hand_over(&id, claim.fence, &to, now)?;
            let (project, phase) = t.cell_of(&id)?;
            let detail = serde_json::json!({
                "from": claimant, "from_fence": claim.fence, "lease_until": until,
                "project": project, "phase": phase,
            });
            t.append(&id, now, ("successor", Some(next), Some(fence)), detail)?;
        }
        _ => t.extend(&id, claim.fence, until, now)?,
    }
    t.claim(&id)
}

/// A renewal made before the holder acts outside the store (a merge at phase
/// completion): refused, in `verb`'s words, unless `holder` holds the task (under its
/// fence, if it names one; a lapsed lease nobody took over still counts). The lease is
/// extended to at least `lease` from now (never shortened), so it cannot lapse and be
/// taken over while the act runs; the returned claim's fence pins the write that
/// records the act. No ledger entry, like any plain renewal.
pub(crate) fn hold(
    t: &mut impl LeaseTx,
    input: &str,
    holder: &Holder,
    lease: Duration,
    verb: &str,
) -> Result<Claim> {
    let (id, claim, now) = open(t, input)?;
    judge_holder(&id, claim.as_ref(), Some(holder), now, verb)?;
    let claim = claim.ok_or_else(|| refusals::not_held(verb, &id, &holder.claimant))?;
    let until = claim.lease_until.max(lease_end(now, lease)?);
    t.extend(&id, claim.fence, until, now)?;
    t.claim(&id)
}

/// Records where the holder works on the task (the supervisor knows the worktree only
/// once it has the claim, since the path is named after the task).
pub(crate) fn set_worktree(
    t: &mut impl LeaseTx,
    input: &str,
    holder: &Holder,
    worktree: &str,
) -> Result<()> {
    let (id, claim, now) = open(t, input)?;
    let verb = "set the worktree of";
    let fence = judge_holder(&id, claim.as_ref(), Some(holder), now, verb)?
        .ok_or_else(|| refusals::not_held(verb, &id, &holder.claimant))?;
    t.set_worktree(&id, fence, worktree)
}

/// Gives the task back: it becomes ready again for anyone. Returns its id.
pub(crate) fn release(t: &mut impl LeaseTx, input: &str, holder: &Holder) -> Result<String> {
    let (id, claim, now) = open(t, input)?;
    let fence = judge_holder(&id, claim.as_ref(), Some(holder), now, "release")?
        .ok_or_else(|| refusals::not_held("release", &id, &holder.claimant))?;
    t.drop_claim(&id, fence, now, "released", Some(&holder.claimant))?;
    Ok(id)
}

/// Takes over a claim whose lease has lapsed (or any, with `force`), but only the
/// exact holding the caller saw (`stale_fence`). The work stays where it is: worktree
/// and lane carry over unless named. The displaced claimant gets a `displaced` ledger
/// entry; the `takeover` entry says whether a live lease was `forced`.
pub(crate) fn takeover(t: &mut impl LeaseTx, input: &str, tk: &Takeover) -> Result<Claim> {
    check_claimant(&tk.claimant)?;
    let (id, claim, now) = open(t, input)?;
    let claim = may_take_over(&id, claim, tk, now)?;
    let until = lease_end(now, tk.lease)?;
    let worktree = tk.worktree.as_deref().or(claim.worktree.as_deref());
    let lane = tk.lane.as_deref().or(claim.lane.as_deref());
    let to = Handover {
        claimant: &tk.claimant,
        lane,
        worktree,
        until,
        afresh: true,
    };
    let fence = t.hand_over(&id, claim.fence, &to, now)?;
    let (project, phase) = t.cell_of(&id)?;
    let detail = serde_json::json!({
        "from": claim.claimant, "stale_fence": claim.fence, "worktree": worktree,
        "lease_until": until, "project": project, "phase": phase,
        "forced": claim.is_live(now),
    });
    t.append(
        &id,
        now,
        ("takeover", Some(&tk.claimant), Some(fence)),
        detail,
    )?;
    let detail = serde_json::json!({ "by": tk.claimant, "new_fence": fence });
    let displaced = (
        "displaced",
        Some(claim.claimant.as_str()),
        Some(claim.fence),
    );
    t.append(&id, now, displaced, detail)?;
    t.claim(&id)
}

/// The claim on task `id` that takeover `t` may displace at `now`: it exists, it is
/// the exact holding the caller saw (`stale_fence`), and its lease has lapsed (or the
/// takeover forces a live one).
fn may_take_over(id: &str, claim: Option<Claim>, t: &Takeover, now: Micros) -> Result<Claim> {
    let claim = claim.ok_or_else(|| refusals::takeover_unclaimed(id))?;
    if claim.fence != t.stale_fence {
        return Err(refusals::takeover_stale(id, t.stale_fence, &claim, now).into());
    }
    if claim.is_live(now) && !t.force {
        return Err(refusals::lease_live(id, &claim, now).into());
    }
    Ok(claim)
}

#[cfg(test)]
mod tests {
    //! The rules over an in-memory backend: what each writes, under which fence.
    use super::*;

    const MIN: Micros = 60_000_000;

    /// One claim in memory, and every write made to it.
    struct Fake {
        claim: Option<Claim>,
        now: Micros,
        next_fence: i64,
        ledger: Vec<(String, Option<String>, Option<i64>, serde_json::Value)>,
    }

    impl Fake {
        fn holding(claimant: &str, fence: i64, lease_until: Micros) -> Fake {
            let claim = Claim {
                task_id: "t1".into(),
                handle: "t1".into(),
                title: "a task".into(),
                claimant: claimant.into(),
                lane: Some("a".into()),
                worktree: Some("/w/t1".into()),
                fence,
                lease_until,
                claimed_at: 0,
                renewed_at: 0,
            };
            Fake {
                claim: Some(claim),
                now: 10 * MIN,
                next_fence: 100,
                ledger: Vec::new(),
            }
        }
        fn held(&mut self, fence: i64) -> &mut Claim {
            let c = self.claim.as_mut().expect("a claim");
            assert_eq!(c.fence, fence, "a write under the fence judged");
            c
        }
        fn kinds(&self) -> Vec<&str> {
            self.ledger.iter().map(|e| e.0.as_str()).collect()
        }
    }

    impl LeaseTx for Fake {
        fn resolve(&mut self, input: &str) -> Result<String> {
            Ok(input.to_string())
        }
        fn lock_claim(&mut self, _id: &str) -> Result<Option<Claim>> {
            Ok(self.claim.clone())
        }
        fn now(&mut self) -> Result<Micros> {
            Ok(self.now)
        }
        fn cell_of(&mut self, _id: &str) -> Result<Cell> {
            Ok((None, "todo".into()))
        }
        fn successor_of(&mut self, _id: &str, _claimant: &str) -> Result<Option<String>> {
            Ok(None)
        }
        fn extend(&mut self, _id: &str, fence: i64, until: Micros, now: Micros) -> Result<()> {
            let c = self.held(fence);
            (c.lease_until, c.renewed_at) = (until, now);
            Ok(())
        }
        fn set_worktree(&mut self, _id: &str, fence: i64, worktree: &str) -> Result<()> {
            self.held(fence).worktree = Some(worktree.into());
            Ok(())
        }
        fn hand_over(
            &mut self,
            _: &str,
            fence: i64,
            to: &Handover<'_>,
            now: Micros,
        ) -> Result<i64> {
            let new = self.next_fence;
            self.next_fence += 1;
            let c = self.held(fence);
            c.claimant = to.claimant.into();
            c.lane = to.lane.map(str::to_string);
            c.worktree = to.worktree.map(str::to_string);
            (c.fence, c.lease_until, c.renewed_at) = (new, to.until, now);
            if to.afresh {
                c.claimed_at = now;
            }
            Ok(new)
        }
        fn drop_claim(
            &mut self,
            id: &str,
            fence: i64,
            now: Micros,
            kind: &str,
            actor: Option<&str>,
        ) -> Result<()> {
            self.held(fence);
            self.claim = None;
            self.append(id, now, (kind, actor, Some(fence)), serde_json::json!({}))
        }
        fn append(
            &mut self,
            _id: &str,
            _now: Micros,
            (kind, actor, fence): (&str, Option<&str>, Option<i64>),
            detail: serde_json::Value,
        ) -> Result<()> {
            let entry = (kind.to_string(), actor.map(str::to_string), fence, detail);
            self.ledger.push(entry);
            Ok(())
        }
        fn claim(&mut self, _id: &str) -> Result<Claim> {
            Ok(self.claim.clone().expect("a claim"))
        }
    }

    fn takeover_of(fence: i64, force: bool) -> Takeover {
        Takeover {
            stale_fence: fence,
            claimant: "op".into(),
            lane: None,
            worktree: None,
            lease: Duration::from_secs(60),
            force,
        }
    }

    #[test]
    fn a_renewal_never_shortens_a_lease_and_a_successor_continues_the_holding() {
        let mut t = Fake::holding("s1", 7, 40 * MIN);
        let c = renew(
            &mut t,
            "t1",
            &Holder::fenced("s1", 7),
            None,
            Duration::from_secs(60),
        )
        .unwrap();
        assert_eq!(
            (c.fence, c.lease_until),
            (7, 40 * MIN),
            "same fence, lease kept"
        );
        assert!(
            t.ledger.is_empty(),
            "a plain renewal writes no ledger entry"
        );

        let lease = Duration::from_secs(3600);
        let c = renew(&mut t, "t1", &Holder::new("s1"), Some("s2"), lease).unwrap();
        assert_eq!((c.claimant.as_str(), c.fence), ("s2", 100));
        assert_eq!(
            (c.lane.as_deref(), c.worktree.as_deref()),
            (Some("a"), Some("/w/t1"))
        );
        assert_eq!(
            (c.lease_until, c.claimed_at),
            (70 * MIN, 0),
            "claimed_at carries on"
        );
        assert_eq!(t.kinds(), ["successor"]);
        assert_eq!(t.ledger[0].3["from_fence"], 7);

        let stale = renew(&mut t, "t1", &Holder::fenced("s2", 7), None, lease).unwrap_err();
        assert!(stale.to_string().contains("fence"), "{stale}");
    }

    #[test]
    fn a_live_lease_goes_only_by_force_and_the_displaced_holder_is_recorded() {
        let mut t = Fake::holding("s1", 7, 40 * MIN);
        let refused = takeover(&mut t, "t1", &takeover_of(7, false)).unwrap_err();
        assert!(refused.to_string().contains("live"), "{refused}");
        let stale = takeover(&mut t, "t1", &takeover_of(6, true)).unwrap_err();
        assert!(stale.to_string().contains('6'), "{stale}");
        assert!(t.ledger.is_empty() && t.claim.as_ref().unwrap().fence == 7);

        let c = takeover(&mut t, "t1", &takeover_of(7, true)).unwrap();
        assert_eq!(
            (c.claimant.as_str(), c.fence, c.claimed_at),
            ("op", 100, 10 * MIN)
        );
        assert_eq!(
            c.worktree.as_deref(),
            Some("/w/t1"),
            "the work stays where it is"
        );
        assert_eq!(t.kinds(), ["takeover", "displaced"]);
        assert_eq!(t.ledger[0].3["forced"], true);
        assert_eq!(
            (t.ledger[1].1.as_deref(), t.ledger[1].2),
            (Some("s1"), Some(7))
        );
    }

    #[test]
    fn only_the_holder_releases_or_moves_a_claim_and_a_refusal_writes_nothing() {
        let mut t = Fake::holding("s1", 7, 40 * MIN);
        assert!(release(&mut t, "t1", &Holder::new("s2")).is_err());
        assert!(set_worktree(&mut t, "t1", &Holder::fenced("s1", 8), "/x").is_err());
        assert!(hold(
            &mut t,
            "t1",
            &Holder::new("s2"),
            Duration::from_secs(60),
            "merge"
        )
        .is_err());
        assert!(
            t.ledger.is_empty() && t.claim.as_ref().unwrap().worktree.as_deref() == Some("/w/t1")
        );

        set_worktree(&mut t, "t1", &Holder::fenced("s1", 7), "/w/t1b").unwrap();
        assert_eq!(release(&mut t, "t1", &Holder::new("s1")).unwrap(), "t1");
        assert!(t.claim.is_none());
        assert_eq!(t.ledger[0].0, "released");
        let again = release(&mut t, "t1", &Holder::new("s1")).unwrap_err();
        assert!(again.to_string().contains("s1"), "{again}");
    }
}
