//! Whole sessions on a fake clock: a scripted world answers the loop's senses at
//! scripted times, every tick moves the clock by [`TICK`], and the test reads what
//! was done when.

use super::*;
use crate::clock::ManualClock;
use crate::fleet::lane::machine::{Budget, Holding, Rules};
use crate::fleet::lane::{LOST_GRACE, TICK};
use crate::store::LaneState;
use std::time::{Duration, Instant};

const S: Duration = Duration::from_secs(1);

/// A world whose transcript, process, claim and screen say what the script says at
/// its times, whose budgets are what `budgets` last says, and which records what the
/// loop did.
struct World {
    clock: ManualClock,
    start: Instant,
    /// One-off news: handed to the first read of its sense at or after its time.
    script: Vec<(Duration, Sense, Event)>,
    /// The budgets from each time on (within before the first).
    budgets: Vec<(Duration, Budget)>,
    /// From this time on, renewals are refused with what the claim is then.
    renewal_refused: Option<(Duration, Holding)>,
    found: bool,
    done: Vec<(Duration, Action)>,
    shown: Vec<(Duration, LaneState)>,
    ticks: u64,
}

impl World {
    fn new(script: Vec<(Duration, Sense, Event)>) -> World {
        let clock = ManualClock::new(0);
        World {
            start: clock.monotonic(),
            clock,
            script,
            budgets: Vec::new(),
            renewal_refused: None,
            found: true,
            done: Vec::new(),
            shown: Vec::new(),
            ticks: 0,
        }
    }

    fn elapsed(&self) -> Duration {
        self.clock.monotonic() - self.start
    }

    /// Runs a session with `rules` launched at the clock's start.
    fn run(&mut self, rules: Rules) -> (End, Session) {
        let mut machine = Session::new(rules, self.clock.monotonic());
        let clock = self.clock.clone();
        let end = drive(self, &mut machine, &clock).expect("the scripted world never fails");
        (end, machine)
    }

    /// When each action matching `which` was done.
    fn when(&self, which: impl Fn(&Action) -> bool) -> Vec<Duration> {
        self.done
            .iter()
            .filter(|(_, a)| which(a))
            .map(|(t, _)| *t)
            .collect()
    }

    fn actions(&self) -> Vec<Action> {
        self.done.iter().map(|(_, a)| a.clone()).collect()
    }
}

impl SessionIo for World {
    fn observe(&mut self, sense: Sense) -> Result<Option<Event>> {
        let now = self.elapsed();
        Ok(match sense {
            Sense::Tick => Some(Event::Tick { found: self.found }),
            Sense::Budget => Some(Event::Budget(
                self.budgets
                    .iter()
                    .rev()
                    .find(|(at, _)| *at <= now)
                    .map(|(_, b)| b.clone())
                    .unwrap_or(Budget::Within),
            )),
            _ => self
                .script
                .iter()
                .position(|(at, s, _)| *s == sense && *at <= now)
                .map(|i| self.script.remove(i).2),
        })
    }

    fn perform(&mut self, action: Action) -> Result<Vec<Event>> {
        let now = self.elapsed();
        self.done.push((now, action.clone()));
        Ok(match action {
            Action::Renew => match &self.renewal_refused {
                Some((from, holding)) if *from <= now => vec![Event::Claim(holding.clone())],
                _ => Vec::new(),
            },
            Action::Deliver => vec![Event::Delivered],
            _ => Vec::new(),
        })
    }

    fn publish(&mut self, machine: &Session) -> Result<()> {
        if self.shown.last().map(|(_, s)| *s) != Some(machine.shown()) {
            self.shown.push((self.elapsed(), machine.shown()));
        }
        Ok(())
    }

    fn pause(&mut self) {
        self.ticks += 1;
        assert!(self.ticks < 1_000_000, "the session never ended");
        self.clock.advance(TICK);
    }
}

fn rules() -> Rules {
    Rules {
        start_timeout: 30 * S,
        renew: 60 * S,
        interactive: true,
        has_transcript: true,
        stall_after: 600 * S,
        type_while_busy: false,
    }
}

fn transcript(events: u64, turn_ended: bool) -> Event {
    Event::Transcript {
        events,
        turn_ended: Some(turn_ended),
        text_last: Some(turn_ended),
        turn: None,
    }
}

/// The agent ended by itself, cleanly.
fn exited() -> Event {
    Event::Exited {
        how: "exited with 0".into(),
        clean: true,
    }
}

/// What the loop did, renewals left out.
fn besides_renewals(world: &World) -> Vec<Action> {
    world
        .actions()
        .into_iter()
        .filter(|a| *a != Action::Renew)
        .collect()
}

/// Within one tick after `at`.
fn about(got: Duration, at: Duration) -> bool {
    got >= at && got <= at + TICK
}

#[test]
fn a_silent_start_is_reported_renewals_come_on_time_and_a_takeover_stops_the_agent() {
    let mut world = World::new(vec![
        (45 * S, Sense::Transcript, transcript(3, false)),
        (
            150 * S,
            Sense::Claim,
            Event::Claim(Holding::Other("them".into())),
        ),
    ]);
    let (end, _) = world.run(rules());
    assert_eq!(end, End::Lost("them".into()));
    let silent = world.when(|a| *a == Action::ReportSilentStart);
    assert!(silent.len() == 1 && about(silent[0], 30 * S), "{silent:?}");
    let cleared = world.when(|a| *a == Action::ClearSilentStart);
    assert!(
        cleared.len() == 1 && about(cleared[0], 45 * S),
        "{cleared:?}"
    );
    let renewals = world.when(|a| *a == Action::Renew);
    assert_eq!(renewals.len(), 2, "{renewals:?}");
    assert!(about(renewals[0], 60 * S) && about(renewals[1], 120 * S));
    let told = world.when(|a| matches!(a, Action::TellTakenOver(by) if by == "them"));
    assert!(told.len() == 1 && about(told[0], 150 * S), "{told:?}");
    let stopped = world.when(|a| matches!(a, Action::Stop(_)));
    assert!(about(stopped[0], 150 * S + LOST_GRACE), "{stopped:?}");
    assert_eq!(
        world.shown.iter().map(|(_, s)| *s).collect::<Vec<_>>(),
        [LaneState::Starting, LaneState::Working]
    );
    assert!(
        !world.actions().contains(&Action::Deliver),
        "an agent mid-turn is never typed into"
    );
}

#[test]
fn a_budget_crossed_at_the_turn_end_pauses_the_lane_until_a_raise_resumes_it() {
    let mut world = World::new(vec![
        (5 * S, Sense::Transcript, transcript(4, true)),
        (300 * S, Sense::Process, exited()),
    ]);
    world.budgets = vec![
        (
            Duration::ZERO,
            Budget::Crossed("budget: lane a used 120 of 100".into()),
        ),
        (200 * S, Budget::Within),
    ];
    let (end, _) = world.run(rules());
    assert_eq!(end, End::Exited("exited with 0".into(), true));
    let paused = world.when(|a| matches!(a, Action::Pause(_)));
    assert!(paused.len() == 1 && about(paused[0], 5 * S), "{paused:?}");
    let resumed = world.when(|a| *a == Action::Resume { raised: true });
    assert!(
        resumed.len() == 1 && about(resumed[0], 200 * S),
        "{resumed:?}"
    );
    // Nothing typed in while paused; the claim renewed all along.
    let typed = world.when(|a| *a == Action::Deliver);
    assert!(
        !typed.is_empty() && typed.iter().all(|t| *t >= resumed[0]),
        "{typed:?}"
    );
    let renewals = world.when(|a| *a == Action::Renew);
    assert!(
        renewals.iter().filter(|t| **t < 200 * S).count() == 3,
        "{renewals:?}"
    );
    let shown: Vec<LaneState> = world.shown.iter().map(|(_, s)| *s).collect();
    assert_eq!(
        shown,
        // Resumed and typed into in the same tick: it shows working again.
        [LaneState::Starting, LaneState::Held, LaneState::Working],
        "{:?}",
        world.shown
    );
    assert!(about(world.shown[1].0, 5 * S) && about(world.shown[2].0, 200 * S));
}

#[test]
fn the_operators_stop_at_the_budget_ends_the_session_and_keeps_its_reason() {
    let mut world = World::new(vec![(5 * S, Sense::Transcript, transcript(4, true))]);
    world.budgets = vec![
        (
            Duration::ZERO,
            Budget::Crossed("budget: task used 9 of 5".into()),
        ),
        (50 * S, Budget::Stopped),
    ];
    let (end, _) = world.run(rules());
    assert_eq!(end, End::Stopping);
    let tail: Vec<Action> = world
        .actions()
        .into_iter()
        .skip_while(|a| *a != Action::StopForBudget)
        .collect();
    assert_eq!(
        tail,
        [Action::StopForBudget, Action::Stop(End::Stopping)],
        "the stop's reason is not undone by a resume"
    );
}

#[test]
fn a_takeover_while_paused_tells_the_agent_and_ends_the_pause() {
    let mut world = World::new(vec![(5 * S, Sense::Transcript, transcript(4, true))]);
    world.budgets = vec![(Duration::ZERO, Budget::Crossed("budget: over".into()))];
    world.renewal_refused = Some((Duration::ZERO, Holding::Other("them".into())));
    let (end, _) = world.run(rules());
    assert_eq!(end, End::Lost("them".into()));
    let kinds = besides_renewals(&world);
    assert_eq!(
        kinds,
        [
            Action::Pause("budget: over".into()),
            Action::TellTakenOver("them".into()),
            Action::Resume { raised: false },
            Action::Stop(End::Lost("them".into())),
        ]
    );
    // Refused at the first renewal (60 s), stopped LOST_GRACE later.
    let stopped = world.when(|a| matches!(a, Action::Stop(_)));
    assert!(about(stopped[0], 60 * S + LOST_GRACE), "{stopped:?}");
}

#[test]
fn a_phase_completed_by_the_agent_stops_it_once_its_turn_is_over() {
    let mut world = World::new(vec![
        (5 * S, Sense::Transcript, transcript(4, false)),
        (20 * S, Sense::Claim, Event::Claim(Holding::Released)),
        (33 * S, Sense::Transcript, transcript(2, true)),
    ]);
    let (end, machine) = world.run(rules());
    assert_eq!(end, End::Finished);
    let stopped = world.when(|a| matches!(a, Action::Stop(_)));
    assert!(about(stopped[0], 33 * S), "{stopped:?}");
    assert!(machine.wrote);
    assert!(!world.actions().contains(&Action::Deliver));
}

#[test]
fn an_agent_that_exits_while_paused_ends_its_session_when_the_pause_ends() {
    // A headless agent's turn ends with its process: the pause outlasts it, one pause.
    let mut world = World::new(vec![
        (5 * S, Sense::Transcript, transcript(4, true)),
        (6 * S, Sense::Process, exited()),
    ]);
    world.budgets = vec![
        (Duration::ZERO, Budget::Crossed("budget: over".into())),
        (130 * S, Budget::Within),
    ];
    let (end, _) = world.run(rules());
    assert_eq!(end, End::Exited("exited with 0".into(), true));
    let kinds = besides_renewals(&world);
    assert_eq!(
        kinds,
        [
            Action::Pause("budget: over".into()),
            Action::Resume { raised: true },
            Action::Over(End::Exited("exited with 0".into(), true)),
        ]
    );
    let over = world.when(|a| matches!(a, Action::Over(_)));
    assert!(about(over[0], 130 * S), "{over:?}");
    assert_eq!(
        world.when(|a| *a == Action::Renew).len(),
        2,
        "renewed while paused"
    );
}
