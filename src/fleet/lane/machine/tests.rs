//! Every transition of the lane's machine, on made-up instants.

use super::*;
use crate::fleet::crash_loop::{CrashLoop, HOLD_FIRST};

const S: Duration = Duration::from_secs(1);

fn rules(interactive: bool) -> Rules {
    Rules {
        start_timeout: 60 * S,
        renew: 3600 * S,
        interactive,
        has_transcript: true,
        stall_after: 600 * S,
        type_while_busy: false,
    }
}

/// A session launched at `t0`, and a clock reading `t0 + secs`.
fn session(interactive: bool) -> (Session, impl Fn(u64) -> Instant) {
    let t0 = Instant::now();
    (Session::new(rules(interactive), t0), move |s: u64| {
        t0 + Duration::from_secs(s)
    })
}

fn events(n: u64, turn_ended: Option<bool>, text_last: Option<bool>) -> Event {
    Event::Transcript {
        events: n,
        turn_ended,
        text_last,
        turn: None,
    }
}

const TICK: Event = Event::Tick { found: true };

#[test]
fn a_silent_start_is_reported_once_and_cleared_by_the_first_event() {
    let (mut s, at) = session(true);
    assert_eq!(s.step(TICK, at(59)), []);
    assert_eq!(s.step(TICK, at(60)), [Action::ReportSilentStart]);
    assert_eq!(s.step(TICK, at(61)), [], "reported once");
    assert_eq!(s.state, LaneState::Starting);
    assert_eq!(
        s.step(events(2, Some(false), Some(false)), at(62)),
        [Action::ClearSilentStart]
    );
    assert_eq!(s.state, LaneState::Working);
    assert!(s.wrote);
}

#[test]
fn no_transcript_in_the_profile_means_no_silent_start_report() {
    let t0 = Instant::now();
    let mut s = Session::new(
        Rules {
            has_transcript: false,
            ..rules(true)
        },
        t0,
    );
    assert_eq!(s.step(TICK, t0 + 120 * S), []);
}

#[test]
fn a_turn_end_means_waiting_and_steering_is_typed_into_an_interactive_agent() {
    let (mut s, at) = session(true);
    s.step(events(3, Some(false), None), at(1));
    assert_eq!(s.step(TICK, at(2)), []);
    s.step(events(1, Some(true), Some(true)), at(3));
    assert_eq!(s.state, LaneState::Waiting);
    assert_eq!(s.step(TICK, at(4)), [Action::Deliver]);
    s.step(Event::Delivered, at(4));
    assert_eq!(s.state, LaneState::Working);
    assert_eq!(s.step(TICK, at(5)), []);
}

#[test]
fn a_headless_agent_is_never_typed_to() {
    let (mut s, at) = session(false);
    s.step(events(1, Some(true), None), at(1));
    assert_eq!(s.step(TICK, at(2)), []);
}

#[test]
fn text_followed_by_quiet_ends_the_turn_and_long_silence_is_a_stall() {
    let (mut s, at) = session(true);
    s.step(events(1, Some(false), Some(true)), at(1));
    s.step(TICK, at(5));
    assert_eq!(s.state, LaneState::Working, "4 s of quiet is not enough");
    s.step(TICK, at(6));
    assert_eq!(s.state, LaneState::Waiting);

    let (mut s, at) = session(true);
    s.step(events(1, Some(false), Some(false)), at(1));
    s.step(TICK, at(1 + 599));
    assert_eq!(s.state, LaneState::Working);
    s.step(TICK, at(1 + 600));
    assert_eq!(s.state, LaneState::Stalled);
}

#[test]
fn renewal_is_due_every_renew_interval_while_the_claim_is_ours() {
    let t0 = Instant::now();
    let at = |secs: u64| t0 + Duration::from_secs(secs);
    let rules = Rules {
        renew: 30 * S,
        ..rules(false)
    };
    let mut s = Session::new(rules, t0);
    s.step(events(1, Some(false), None), at(1));
    assert_eq!(s.step(TICK, at(29)), []);
    assert_eq!(s.step(TICK, at(30)), [Action::Renew]);
    assert_eq!(s.step(TICK, at(31)), []);
    assert_eq!(s.step(TICK, at(60)), [Action::Renew]);
}

#[test]
fn a_takeover_is_told_once_and_the_agent_stopped_after_the_grace() {
    let (mut s, at) = session(true);
    s.step(events(1, Some(false), None), at(1));
    assert_eq!(
        s.step(Event::Claim(Holding::Other("op".into())), at(2)),
        [Action::TellTakenOver("op".into())]
    );
    assert!(!s.watches_claim());
    assert_eq!(s.step(Event::Claim(Holding::Other("x".into())), at(3)), []);
    // Never renewed again, never typed to, stopped after LOST_GRACE.
    assert_eq!(s.step(TICK, at(11)), []);
    assert_eq!(s.step(TICK, at(12)), [Action::Stop(End::Lost("op".into()))]);
    assert_eq!(s.step(TICK, at(13)), [], "over");
}

#[test]
fn a_released_claim_stops_the_agent_once_its_turn_ended_or_after_the_grace() {
    let (mut s, at) = session(true);
    s.step(events(1, Some(false), None), at(1));
    s.step(Event::Claim(Holding::Released), at(2));
    assert_eq!(s.step(TICK, at(3)), [], "mid-turn: let it finish");
    s.step(events(1, Some(true), None), at(4));
    assert_eq!(s.step(TICK, at(4)), [Action::Stop(End::Finished)]);

    let (mut s, at) = session(true);
    s.step(events(1, Some(false), None), at(1));
    s.step(Event::Claim(Holding::Released), at(2));
    assert_eq!(s.step(TICK, at(31)), []);
    assert_eq!(s.step(TICK, at(32)), [Action::Stop(End::Finished)]);

    // Its transcript never found: nothing can say its turn ended.
    let (mut s, at) = session(true);
    s.step(Event::Claim(Holding::Released), at(1));
    assert_eq!(
        s.step(Event::Tick { found: false }, at(1)),
        [Action::Stop(End::Finished)]
    );
}

#[test]
fn an_exit_or_a_stopping_supervisor_ends_the_session() {
    let (mut s, at) = session(true);
    assert_eq!(
        s.step(
            Event::Exited {
                how: "exit 3".into(),
                clean: false
            },
            at(1)
        ),
        [Action::Over(End::Exited("exit 3".into(), false))]
    );
    assert_eq!(s.step(TICK, at(100)), []);
    let (mut s, at) = session(true);
    assert_eq!(
        s.step(Event::Stopping, at(1)),
        [Action::Stop(End::Stopping)]
    );
}

#[test]
fn after_a_session_a_headless_turn_waits_a_death_succeeds_and_three_hold() {
    let t0 = Instant::now();
    let mut c = CrashLoop::default();
    let died = End::Exited("signal 9".into(), false);
    let turn = End::Exited("exit 0".into(), true);
    assert_eq!(after(&turn, true, true, &mut c, t0), Next::BetweenTurns);
    assert_eq!(after(&turn, true, false, &mut c, t0), Next::Successor);
    assert_eq!(after(&died, true, false, &mut c, t0 + S), Next::Successor);
    assert_eq!(
        after(&died, true, false, &mut c, t0 + 2 * S),
        Next::Hold(HOLD_FIRST)
    );
    assert_eq!(
        after(&died, false, false, &mut c, t0),
        Next::Done,
        "not ours"
    );
    for end in [End::Finished, End::Lost("x".into()), End::Stopping] {
        assert_eq!(after(&end, true, true, &mut c, t0), Next::Done);
    }
}

#[test]
fn between_turns_steering_starts_a_turn_and_a_claim_gone_ends_the_wait() {
    assert_eq!(between(&Holding::Ours, false), None);
    assert_eq!(between(&Holding::Ours, true), Some(BetweenNext::Turn));
    assert_eq!(
        between(&Holding::Other("op".into()), true),
        Some(BetweenNext::Lost("op".into()))
    );
    assert_eq!(between(&Holding::Released, true), Some(BetweenNext::Over));
}

#[test]
fn a_hold_ends_when_its_time_passes_when_lifted_or_when_taken_over() {
    assert_eq!(hold(10, 20, false, None), HoldNext::Wait);
    assert_eq!(hold(10, 20, false, Some(&Holding::Ours)), HoldNext::Wait);
    assert_eq!(hold(20, 20, false, None), HoldNext::Over);
    assert_eq!(hold(10, 20, true, None), HoldNext::Over);
    assert_eq!(
        hold(10, 20, true, Some(&Holding::Other("op".into()))),
        HoldNext::Lost("op".into()),
        "taken over wins over lifted"
    );
    assert!(matches!(
        hold(10, 20, false, Some(&Holding::Released)),
        HoldNext::Lost(_)
    ));
}

#[test]
fn a_branch_in_another_lanes_worktree_is_waited_for_then_freed() {
    assert_eq!(handoff(None, None), Handoff::Make);
    assert_eq!(
        handoff(Some(false), Some("lane core's agent")),
        Handoff::Wait("lane core's agent".into())
    );
    assert_eq!(handoff(Some(false), None), Handoff::Free);
    assert_eq!(handoff(Some(true), None), Handoff::Make, "git refuses it");
}

#[test]
fn the_backoff_doubles_to_its_cap_and_resets() {
    let mut b = Backoff::new(S, 5 * S);
    let pauses: Vec<u64> = (0..5).map(|_| b.failed().as_secs()).collect();
    assert_eq!(pauses, [1, 2, 4, 5, 5]);
    b.succeeded();
    assert_eq!(b.next(), S);
}

#[test]
fn the_renewer_is_due_once_per_interval() {
    let t0 = Instant::now();
    let mut r = Renewer::new(10 * S, t0);
    assert!(!r.due(t0 + 9 * S));
    assert!(r.due(t0 + 10 * S));
    assert!(!r.due(t0 + 19 * S));
    assert!(r.due(t0 + 25 * S));
}

/// A scan's events with where the turn stands: `open` calls by name, `text` last said.
fn turn(n: u64, ended: bool, open: &[&str], text: Option<&str>) -> Event {
    use crate::transcript::turn::{OpenCall, Turn};
    Event::Transcript {
        events: n,
        turn_ended: Some(ended),
        text_last: Some(text.is_some() && open.is_empty()),
        turn: Some(Turn {
            open: open
                .iter()
                .enumerate()
                .map(|(i, name)| OpenCall {
                    id: format!("c{i}"),
                    name: name.to_string(),
                    command: (*name == "Bash").then(|| "rm -rf build".to_string()),
                    input: "{}".into(),
                })
                .collect(),
            last_text: text.map(str::to_string),
            last_call_at: None,
        }),
    }
}

#[test]
fn a_turn_ending_on_a_question_asks_the_operator_and_steering_answers_it() {
    let (mut s, at) = session(true);
    s.step(
        turn(2, true, &[], Some("Done. Shall I also bump the version?")),
        at(1),
    );
    assert_eq!(s.state, LaneState::Asking);
    assert_eq!(s.ask, Some(Ask::Question));
    assert_eq!(s.note.as_deref(), Some("Shall I also bump the version?"));
    assert_eq!(s.step(TICK, at(2)), [Action::Deliver], "typing answers it");
    s.step(Event::Delivered, at(2));
    assert_eq!((s.state, s.note.as_ref()), (LaneState::Working, None));
    // Done with nothing asked is `waiting`; the API's error is `errored`.
    s.step(turn(1, true, &[], Some("All tests pass.")), at(3));
    assert_eq!((s.state, s.note.as_ref()), (LaneState::Waiting, None));
    s.step(
        turn(1, true, &[], Some("API Error: 529 overloaded\nretry later")),
        at(4),
    );
    assert_eq!(s.state, LaneState::Errored);
    assert_eq!(s.note.as_deref(), Some("API Error: 529 overloaded"));
}

#[test]
fn a_question_tool_asks_in_a_dialog_and_a_sub_agent_is_waited_on() {
    let (mut s, at) = session(true);
    s.step(turn(1, false, &["AskUserQuestion"], None), at(1));
    assert_eq!((s.state, s.ask), (LaneState::Asking, Some(Ask::Dialog)));
    assert_eq!(s.step(TICK, at(2)), [], "never typed into a dialog");
    s.step(turn(1, false, &["Task"], None), at(3));
    assert_eq!(s.state, LaneState::Subagent);
    assert_eq!(s.note.as_deref(), Some("Task"));
    s.step(TICK, at(3 + 700));
    assert_eq!(
        s.state,
        LaneState::Subagent,
        "a sub-agent's long run is no stall"
    );
    s.step(turn(1, false, &[], None), at(800));
    assert_eq!((s.state, s.note.as_ref()), (LaneState::Working, None));
}

#[test]
fn a_quiet_open_call_with_a_prompt_on_screen_is_a_permission_asked() {
    let (mut s, at) = session(true);
    s.step(turn(1, false, &["Bash"], None), at(1));
    assert!(!s.wants_screen(at(1)), "not quiet yet");
    assert!(s.wants_screen(at(2)));
    s.step(Event::Screen(None), at(2));
    assert_eq!(s.state, LaneState::Working, "a command running");
    s.step(Event::Screen(Some("Do you want to proceed?")), at(3));
    assert_eq!((s.state, s.ask), (LaneState::Asking, Some(Ask::Permission)));
    assert_eq!(
        s.note.as_deref(),
        Some("permission prompt (Do you want to proceed?) for Bash: rm -rf build")
    );
    assert_eq!(s.step(TICK, at(4)), [], "never typed into a prompt");
    // Answered at the terminal: the prompt goes, or the transcript moves.
    s.step(Event::Screen(None), at(5));
    assert_eq!(s.state, LaneState::Working);
    s.step(Event::Screen(Some("Do you want to proceed?")), at(6));
    s.step(turn(1, false, &[], None), at(7));
    assert_eq!((s.state, s.ask), (LaneState::Working, None));
}

#[test]
fn the_stall_is_as_long_as_the_lane_says() {
    let t0 = Instant::now();
    let mut s = Session::new(
        Rules {
            stall_after: 30 * S,
            ..rules(true)
        },
        t0,
    );
    s.step(turn(1, false, &["Bash"], None), t0 + S);
    s.step(TICK, t0 + 30 * S);
    assert_eq!(s.state, LaneState::Working);
    s.step(TICK, t0 + 31 * S);
    assert_eq!(s.state, LaneState::Stalled);
    assert_eq!(
        s.note.as_deref(),
        Some("Bash: rm -rf build with no transcript growth for 30s")
    );
}

/// A profile that delivers steering as messages has it typed in while the agent works
/// (its TUI queues it), once the agent has written; others wait for the turn's end.
#[test]
fn message_delivery_types_while_the_agent_works() {
    let t0 = Instant::now();
    let mut typing = Session::new(
        Rules {
            type_while_busy: true,
            ..rules(true)
        },
        t0,
    );
    assert_eq!(typing.step(TICK, t0 + S), [], "not before it has written");
    typing.step(turn(1, false, &["run_shell_command"], None), t0 + 2 * S);
    assert_eq!(typing.state, LaneState::Working);
    assert_eq!(typing.step(TICK, t0 + 3 * S), [Action::Deliver]);
    let mut waiting = Session::new(rules(true), t0);
    waiting.step(turn(1, false, &["Bash"], None), t0 + 2 * S);
    assert_eq!(waiting.step(TICK, t0 + 3 * S), []);
}
