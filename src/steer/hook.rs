//! Steering through an agent's own hooks: Claude Code runs a PostToolUse hook after
//! every tool call (Bash or not), and what the hook prints as `additionalContext` goes
//! to the model right after the tool result (`shared/AGENTS_OFFLINE.md` §9).
//!
//! Invariants: an item is due when it was never shown, or when its last showing (by
//! this hook or by `spice exec` on a command's stderr) is older than the re-show gap
//! for how many times it was shown, so a Bash command that already showed an item
//! does not get it twice; each showing is recorded.

use super::desk::Steering;
use crate::error::Result;
use crate::store::{Item, Target};
use std::time::Duration;

/// The hook's stdout for the items due now, or `None` when nothing is due.
pub fn claude_post_tool_use(
    store: &mut dyn Steering,
    targets: &[Target],
    backoff: &[Duration],
) -> Result<Option<String>> {
    let (items, now) = store.due(targets)?;
    let due: Vec<&Item> = items.iter().filter(|i| due(i, now, backoff)).collect();
    if due.is_empty() {
        return Ok(None);
    }
    let text = super::exec::frame(&due, now);
    let keys: Vec<String> = super::exec::newest(&due)
        .0
        .iter()
        .map(|i| i.key.clone())
        .collect();
    store.mark_shown(&keys)?;
    Ok(Some(
        serde_json::json!({ "hookSpecificOutput": {
            "hookEventName": "PostToolUse",
            "additionalContext": text.trim(),
        }})
        .to_string(),
    ))
}

fn due(item: &Item, now: crate::clock::Micros, backoff: &[Duration]) -> bool {
    let Some(last) = item.last_shown else {
        return true;
    };
    let n = (item.shown.max(1) - 1) as usize;
    let gap = backoff
        .get(n.min(backoff.len().saturating_sub(1)))
        .copied()
        .unwrap_or(super::exec::BACKOFF[0]);
    now - last >= gap.as_micros() as i64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use crate::store::{Authority, Store, TargetKind};
    use std::sync::Arc;

    #[test]
    fn an_item_is_shown_then_held_back_until_its_gap_passes() {
        let dir = tempfile::tempdir().unwrap();
        let clock = Arc::new(ManualClock::new(1_000_000));
        let mut s: Box<dyn Authority> =
            Box::new(Store::open_dir(dir.path(), clock.clone()).unwrap());
        let lane = Target {
            kind: TargetKind::Lane,
            name: "a".into(),
        };
        let item = s
            .steer(&lane, "use the v2 API", Duration::from_secs(3600))
            .unwrap();
        let gaps = [Duration::from_secs(15), Duration::from_secs(60)];
        let lanes = [lane];
        let out = claude_post_tool_use(&mut s, &lanes, &gaps)
            .unwrap()
            .unwrap();
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        let ctx = v["hookSpecificOutput"]["additionalContext"]
            .as_str()
            .unwrap();
        assert!(
            ctx.contains(&item.key) && ctx.contains("use the v2 API"),
            "{ctx}"
        );
        assert_eq!(v["hookSpecificOutput"]["hookEventName"], "PostToolUse");
        assert_eq!(claude_post_tool_use(&mut s, &lanes, &gaps).unwrap(), None);
        clock.advance(Duration::from_secs(16));
        assert!(claude_post_tool_use(&mut s, &lanes, &gaps)
            .unwrap()
            .is_some());
        clock.advance(Duration::from_secs(16));
        assert_eq!(claude_post_tool_use(&mut s, &lanes, &gaps).unwrap(), None);
        let other = Target {
            kind: TargetKind::Lane,
            name: "b".into(),
        };
        assert_eq!(claude_post_tool_use(&mut s, &[other], &gaps).unwrap(), None);
    }

    #[test]
    fn regression_a_flood_of_items_is_framed_as_the_newest_few_and_a_count() {
        // Before: 10,000 pending items put 1.6 MB on the stderr of every command.
        let dir = tempfile::tempdir().unwrap();
        let clock = Arc::new(ManualClock::new(1_000_000));
        let mut s: Box<dyn Authority> =
            Box::new(Store::open_dir(dir.path(), clock.clone()).unwrap());
        let lane = Target {
            kind: TargetKind::Lane,
            name: "a".into(),
        };
        let mut keys = Vec::new();
        for n in 0..300 {
            clock.advance(Duration::from_millis(1));
            let it = s
                .steer(
                    &lane,
                    &format!("item number {n}"),
                    Duration::from_secs(3600),
                )
                .unwrap();
            keys.push(it.key);
        }
        let lanes = [lane];
        let out = claude_post_tool_use(&mut s, &lanes, &[Duration::from_secs(15)])
            .unwrap()
            .unwrap();
        assert!(out.len() < 4096, "{} bytes", out.len());
        assert!(out.contains("300 steering items"), "{out}");
        assert!(out.contains("295 older wait"), "{out}");
        for k in &keys[295..] {
            assert!(out.contains(k.as_str()), "{k} missing: {out}");
        }
        assert!(!out.contains(&format!("[{}]", keys[0])), "{out}");
        // Only what was framed counts as shown.
        let items = s.inbox(&lanes, false).unwrap();
        let shown = items.iter().filter(|i| i.shown > 0).count();
        assert_eq!(shown, super::super::exec::FRAME_MAX);
    }
}
