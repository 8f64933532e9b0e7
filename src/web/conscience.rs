//! `/api/conscience`: what the conscience did, newest last: each step of its log
//! (fired, suppressed, each judge's raw answer, abandoned, dismissed, disputed,
//! published) with the answers its reminders got (acked, nacked, expired), as the
//! store derives them from the reminders' steering items.

use crate::error::Result;
use crate::store::Authority;
use crate::when;
use serde_json::{json, Value};

/// How many of the newest steps the panel shows.
pub const STEPS: usize = 200;

pub fn doc(s: &mut dyn Authority) -> Result<Value> {
    let steps: Vec<Value> = s
        .conscience_log(None, STEPS)?
        .into_iter()
        .map(|e| {
            json!({
                "seq": e.seq, "at": when::rfc3339(e.at), "lane": e.lane, "maxim": e.maxim,
                "epoch": e.epoch, "step": e.step, "key": e.key, "detail": e.detail,
            })
        })
        .collect();
    Ok(json!({ "now": when::rfc3339(s.now()?), "steps": steps }))
}
