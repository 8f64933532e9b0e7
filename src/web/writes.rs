//! The console's writes, through the same store calls the CLI makes: a steering item
//! (`spice steer`), a takeover of a stale claim with the fence the page showed
//! (`spice task takeover --stale`), a token budget raised or a paused lane stopped
//! (`spice budget raise|stop`). Bodies are JSON with no unknown fields. A lane is a
//! steering target when a lane file here defines it (as for `spice steer`) or when
//! the store has its row (another host's lane).

use super::payloads;
use super::routes::{error, json_value, reply};
use super::App;
use crate::error::{Error, Result};
use crate::store::{Authority, Takeover, Target, TargetKind, DEFAULT_LEASE, DEFAULT_TTL};
use crate::when;
use bytes::Bytes;
use serde::Deserialize;
use std::sync::Arc;
use warp::http::StatusCode;
use warp::reply::Response;

/// Reads a JSON request body into `T`, refusing unknown fields.
pub(super) fn parse<T: for<'de> Deserialize<'de>>(body: &[u8]) -> Result<T> {
    serde_json::from_slice(body).map_err(|e| Error::input(format!("invalid JSON body: {e}")))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Empty {}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SteerBody {
    target: String,
    text: String,
    /// A duration such as `2h`; the default TTL otherwise.
    ttl: Option<String>,
    /// Lines of the target's worktree the item is about (`PATH:START-END`): a review
    /// comment, its text quoting them (`steer::anchor`).
    at: Option<String>,
}

pub(super) async fn steer(body: Bytes, app: Arc<App>) -> Response {
    let b: SteerBody = match parse(&body) {
        Ok(b) => b,
        Err(e) => return error(&e),
    };
    let r = app
        .store(move |s, app| {
            let ttl = match &b.ttl {
                Some(t) => {
                    when::parse_duration(t).map_err(|e| Error::input(format!("ttl: {e}")))?
                }
                None => DEFAULT_TTL,
            };
            let target = target(s, app, &b.target)?;
            let text = match &b.at {
                Some(at) => {
                    let anchor: crate::steer::anchor::Anchor = at.parse()?;
                    crate::steer::anchor::anchored(s, &target, &anchor, &b.text)?
                }
                None => b.text.trim_end().to_string(),
            };
            let item = s.steer(&target, &text, ttl)?;
            Ok(crate::json::item_json(&item, s.now()?))
        })
        .await;
    match r {
        Ok(v) => json_value(StatusCode::CREATED, &v),
        Err(e) => error(&e),
    }
}

/// The target as the CLI reads it, except that a lane the store has a row for is
/// known even where no lane file defines it: the console shows every host's lanes,
/// and another host's lane files are not here.
fn target(s: &mut dyn Authority, app: &App, typed: &str) -> Result<Target> {
    let t = (app.cfg.parse_target)(typed, true)?;
    if t.kind != TargetKind::Lane || s.lane(&t.name)?.is_some() {
        return Ok(t);
    }
    // Checked against the lane files here, and refused in their words.
    (app.cfg.parse_target)(typed, false)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TakeoverBody {
    task: String,
    /// The fence of the stale claim the operator saw.
    fence: i64,
    /// Who holds the claim afterwards (default `operator`).
    claimant: Option<String>,
    lease: Option<String>,
    /// Take a live claim (the page asks for a confirmation first).
    #[serde(default)]
    force: bool,
}

pub(super) async fn takeover(body: Bytes, app: Arc<App>) -> Response {
    let b: TakeoverBody = match parse(&body) {
        Ok(b) => b,
        Err(e) => return error(&e),
    };
    reply(
        app.store(move |s, _| {
            let lease = match &b.lease {
                Some(l) => {
                    when::parse_duration(l).map_err(|e| Error::input(format!("lease: {e}")))?
                }
                None => DEFAULT_LEASE,
            };
            let t = Takeover {
                stale_fence: b.fence,
                claimant: b.claimant.unwrap_or_else(|| crate::store::OPERATOR.into()),
                lane: None,
                worktree: None,
                lease,
                force: b.force,
            };
            let claim = s.takeover(&b.task, &t)?;
            Ok(payloads::claim_doc(&claim, s.now()?))
        })
        .await,
    )
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "lowercase")]
enum BudgetAction {
    Raise,
    Stop,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct BudgetBody {
    action: BudgetAction,
    /// `raise`: the new budget, in tokens.
    tokens: Option<u64>,
    /// The lane's task's budget instead of the lane's (its id).
    task: Option<String>,
}

/// `POST /api/lanes/L/budget`: `spice budget raise|stop` for the lane, or for the task
/// the body names.
pub(super) async fn budget(lane: String, body: Bytes, app: Arc<App>) -> Response {
    let b: BudgetBody = match parse(&body) {
        Ok(b) => b,
        Err(e) => return error(&e),
    };
    let r = app
        .store(move |s, app| {
            // A lane the console cannot know is refused as `spice budget` refuses it:
            // a stop stored for a lane that does not exist would end the first
            // session of whatever lane later takes the name.
            crate::config::lane::check_lane_name(&lane)?;
            let t = target(s, app, &format!("lane:{lane}"))?;
            let scope = match &b.task {
                Some(t) => crate::store::BudgetScope::Task(s.task(t)?.id),
                None => crate::store::BudgetScope::Lane(t.name.clone()),
            };
            match b.action {
                BudgetAction::Raise => {
                    let tokens = b
                        .tokens
                        .ok_or_else(|| Error::input("a raise needs \"tokens\": the new budget"))?;
                    let now = s.budget_raise(&scope, tokens)?;
                    Ok(serde_json::json!({"lane": lane, "budget": now}))
                }
                BudgetAction::Stop => {
                    s.budget_stop(&scope)?;
                    Ok(serde_json::json!({"lane": lane, "stop": true}))
                }
            }
        })
        .await;
    reply(r)
}
