//! The console's lift control on a lane paused at its token budget (issue #19): the
//! pause is not a crash-loop hold, so `POST /api/lanes/NAME/lift-hold` refuses it
//! (409, naming `spice budget raise` and `spice budget stop`) and the pause is kept,
//! as `spice fleet lift` does.

use crate::common;
use crate::common::console;

use common::TestEnv;
use console::Server;
use serde_json::json;
use spice::store::{LaneRow, LaneState, Store};
use std::sync::Arc;

#[test]
fn the_console_refuses_to_lift_a_budget_pause_and_names_the_budget_commands() {
    let env = TestEnv::new();
    std::fs::create_dir_all(env.repo.join("lanes")).unwrap();
    std::fs::write(env.repo.join("lanes/a.toml"), "profile = \"demo\"\n").unwrap();
    let srv = Server::start(&env, &[]);
    let reason = "budget: lane used 1200 of 1000 tokens";
    let mut s = Store::open_dir(&env.home, Arc::new(spice::clock::SystemClock)).unwrap();
    s.put_lane(&LaneRow {
        name: "a".into(),
        state: LaneState::Held,
        hold_reason: Some(reason.into()),
        ..LaneRow::default()
    })
    .unwrap();
    srv.post("/api/lanes/a/lift-hold", &json!({})).refused(
        409,
        "go on with `spice budget raise a +N`, or end it with `spice budget stop a`",
    );
    let l = s.lane("a").unwrap().unwrap();
    assert_eq!(
        (l.state, l.hold_reason.as_deref()),
        (LaneState::Held, Some(reason)),
        "the pause is kept"
    );
}
