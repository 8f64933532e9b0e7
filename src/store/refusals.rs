//! Every refusal of a claim operation, said once for both backends: each function
//! builds the [`ClaimError`] (the typed [`Refusal`] a caller decides on, and the one
//! line a user reads) from what the backend read inside its transaction.

use super::claims::{describe, Claim};
use crate::clock::Micros;
use crate::error::{ClaimError, Refusal};
use crate::when;

fn refused(task: &str, refusal: Refusal, message: String) -> ClaimError {
    ClaimError {
        task: task.to_string(),
        refusal,
        message,
    }
}

/// `verb` (claim, renew, release, …) of task `id` as `claimant`, who does not hold it:
/// nobody does.
pub(crate) fn not_held(verb: &str, id: &str, claimant: &str) -> ClaimError {
    let message = format!(
        "cannot {verb} task {id} as {claimant}: {claimant} does not hold it (it is not claimed)"
    );
    refused(id, Refusal::NotClaimed, message)
}

/// A renewal of task `id` by `claimant`: nobody holds it.
pub(crate) fn renew_unclaimed(id: &str, claimant: &str) -> ClaimError {
    let message = format!("cannot renew task {id} as {claimant}: it is not claimed");
    refused(id, Refusal::NotClaimed, message)
}

/// A takeover of task `id`: nobody holds it.
pub(crate) fn takeover_unclaimed(id: &str) -> ClaimError {
    let message = format!("cannot take over task {id}: it is not claimed (claim it instead)");
    refused(id, Refusal::NotClaimed, message)
}

/// `verb` of task `id` as `claimant` under fence `seen`: that holding ended, the
/// claim is now `claim`.
pub(crate) fn stale_holding(
    verb: &str,
    id: &str,
    claimant: &str,
    seen: i64,
    claim: &Claim,
    now: Micros,
) -> ClaimError {
    let message = format!(
        "cannot {verb} task {id} as {claimant} with fence {seen}: that holding ended; the claim is now {}",
        describe(claim, now)
    );
    let current = claim.fence;
    refused(id, Refusal::StaleFence { seen, current }, message)
}

/// A takeover of task `id` naming fence `seen`, which is not the claim's.
pub(crate) fn takeover_stale(id: &str, seen: i64, claim: &Claim, now: Micros) -> ClaimError {
    let message = format!(
        "cannot take over task {id}: fence {seen} is not current; it is held by {}",
        describe(claim, now)
    );
    let current = claim.fence;
    refused(id, Refusal::StaleFence { seen, current }, message)
}

/// `verb` of task `id` as `claimant` (or, `None`, as nobody) while `claim` holds it;
/// a renewal says whom the claim passed to (`passed_to`) when it passed from the
/// caller.
pub(crate) fn held_by(
    verb: &str,
    id: &str,
    claimant: Option<&str>,
    claim: &Claim,
    now: Micros,
    passed_to: Option<&str>,
) -> ClaimError {
    let held = describe(claim, now);
    let passed = match (claimant, passed_to) {
        (Some(c), Some(s)) => format!(" (the claim passed from {c} to {s})"),
        _ => String::new(),
    };
    let message = match claimant {
        Some(c) => format!("cannot {verb} task {id} as {c}: it is held by {held}{passed}"),
        None => format!(
            "cannot {verb} task {id}: it is held by {held}; pass --claimant {}",
            claim.claimant
        ),
    };
    refused(id, Refusal::HeldBy(claim.claimant.clone()), message)
}

/// A takeover of task `id` whose claim's lease is still live.
pub(crate) fn lease_live(id: &str, claim: &Claim, now: Micros) -> ClaimError {
    let message = format!(
        "cannot take over task {id}: its lease is still live, held by {}",
        describe(claim, now)
    );
    refused(id, Refusal::LeaseLive, message)
}

/// A claim of task `id` lost to another claimant in the same moment.
pub(crate) fn taken(id: &str) -> ClaimError {
    let message = format!("cannot claim task {id}: another claimant took it");
    refused(id, Refusal::Taken, message)
}

/// Why task `id` cannot be claimed now, from what was read of it in order (each read
/// only when the ones before found nothing): its status and wait, its claim, the
/// first dependency not done. `None`: it is ready.
pub(crate) fn unready(
    id: &str,
    status: &str,
    wait: Option<Micros>,
    now: Micros,
) -> Option<ClaimError> {
    let why = if status != "pending" && status != "waiting" {
        format!("it is {status}")
    } else if let Some(w) = wait.filter(|w| *w > now) {
        format!("it waits until {}", when::rfc3339(w))
    } else {
        return None;
    };
    Some(refused(
        id,
        Refusal::NotReady,
        format!("cannot claim task {id}: {why}"),
    ))
}

/// A claim of task `id`, which `c` holds: who, and how a lapsed lease is taken over.
pub(crate) fn claimed(id: &str, c: &Claim, now: Micros) -> ClaimError {
    let message = format!("cannot claim task {id}: {}", held(id, c, now));
    refused(id, Refusal::HeldBy(c.claimant.clone()), message)
}

/// A claim of task `id`, which waits on `blocker`.
pub(crate) fn blocked(id: &str, blocker: &str) -> ClaimError {
    let message = format!("cannot claim task {id}: it waits on {blocker}, which is not done");
    refused(id, Refusal::NotReady, message)
}

/// Who holds a claimed task, and how a lapsed lease is taken over.
fn held(id: &str, c: &Claim, now: Micros) -> String {
    if c.is_live(now) {
        format!("it is held by {}", describe(c, now))
    } else {
        format!(
            "it is held by {}; a lapsed lease is taken over with `spice task takeover {id} --stale {}`",
            describe(c, now),
            c.fence
        )
    }
}

/// A bed slot reserved for task `task` under fence `seen` while its claim is now
/// held under `current`.
pub(crate) fn slot_stale(task: &str, seen: i64, current: i64) -> ClaimError {
    let message = format!(
        "task {task}'s claim is held under fence {current} now, not {seen}: its bed slot is not \
         this holder's to reserve"
    );
    refused(task, Refusal::StaleFence { seen, current }, message)
}

/// A bed slot reserved for task `task` under fence `seen`, which no longer holds it.
pub(crate) fn slot_unclaimed(task: &str, seen: i64) -> ClaimError {
    let message = format!(
        "task {task} is no longer claimed (fence {seen} was released or dropped): no bed slot \
         to reserve for it"
    );
    refused(task, Refusal::NotClaimed, message)
}

/// A re-import (from `source`) of the task with `uuid` (id `id`), which `c` holds.
pub(crate) fn import_held(source: &str, uuid: &str, id: &str, c: &Claim) -> ClaimError {
    let message = format!(
        "{source}: task {uuid}: it is claimed by {} (fence {}); release it before re-importing",
        c.claimant, c.fence
    );
    refused(id, Refusal::HeldBy(c.claimant.clone()), message)
}
