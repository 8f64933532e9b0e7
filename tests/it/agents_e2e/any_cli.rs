//! The steering loop for a CLI spice has no decoder for (issue #42): the tests' own
//! one-tool agent (`tests/agents/onetool.sh`, a bash loop over the mock's one-line
//! protocol) writes no transcript, and is run by a profile file only, whose
//! transcript format is `terminal`. Its replies are read from the lane's recording
//! of its terminal: an ACK it prints retires the item, the prompt it stops on is its
//! turn's end, a prompt that asks is the lane asking, and the operator's reply
//! reaches it by the path steering an idle agent takes.

use super::{Agent, Fleet, Mode};
use crate::common::wait_for;
use crate::mock::{self, Step};

const SLOW: &str = "echo start; sleep 4; echo done";
const QUESTION: &str = "Which file should I edit next?";

#[test]
#[ignore = "needs the real agent CLIs (npm install --no-save --prefix tests/agents)"]
fn any_cli_closes_the_loop_from_its_terminal() {
    let script = vec![
        Step::Shell(SLOW.into()),
        Step::Say("{acks}".into()),
        Step::Say(format!("{{acks}}\n{QUESTION}")),
        Step::Shell("{done}".into()),
        Step::Say("All done.".into()),
    ];
    let mut f = Fleet::new(Agent::OneTool, Mode::Pty, script);
    let task = f
        .env
        .add(&["Work through the terminal", "--project", "demo"]);
    f.start();
    let lane = f.wait_lane("the agent to start", 60, |l| l["session"].is_string());
    assert_eq!(lane["reads"], "terminal", "{lane}");
    assert_eq!(lane["delivers"], "command output", "{lane}");
    // The session's own record says it too (what the console, reading no lane file,
    // shows).
    let launched = f.env.ledger_of(&task, "launched");
    assert_eq!(launched[0]["detail"]["reads"], "terminal", "{launched:?}");
    assert_eq!(
        launched[0]["detail"]["delivers"], "command output",
        "{launched:?}"
    );

    // Steering on the output of its command reaches the model; the ACK the agent
    // prints is read from its terminal and retires the item.
    f.wait_command("sleep", 30);
    let (key, steered) = f.steer("Say the word pineapple when you are done.");
    let shown = f.wait_shown(&key, 60);
    f.report("spice steer -> item reaches the model", shown.at - steered);
    assert!(mock::last_user_text(&shown).contains("pineapple"));
    let (source, _) = f.wait_acked(&key, 30);
    assert!(
        source.ends_with(".cast"),
        "not read from the recording: {source}"
    );
    f.report(
        "spice steer -> ACK read from the terminal",
        steered.elapsed(),
    );

    // Its prompt ends the turn; steering is typed in and answered.
    f.wait_lane("the prompt to end the turn", 30, |l| {
        l["state"] == "waiting"
    });
    let (next, steered) = f.steer("Tell me what you will do next.");
    f.wait_shown(&next, 30);
    f.wait_acked(&next, 30);
    f.report(
        "idle: spice steer -> typed, answered, ACK read",
        steered.elapsed(),
    );

    // A prompt that asks is the lane asking, with the question; the operator's answer
    // reaches the agent and it completes the phase.
    let asking = f.wait_lane("the agent to ask", 30, |l| l["state"] == "asking");
    assert_eq!(asking["state_note"], QUESTION, "{asking}");
    f.steer("Edit src/lib.rs.");
    wait_for("the phase to be done", 60, || {
        let show = f.env.run(&["task", "show", &task, "--json"]).json();
        (show["phase"] == "review").then_some(())
    });
    let done = f.env.ledger_of(&task, "phase_completed");
    assert_eq!(done.len(), 1, "{done:?}");
    f.down();
    f.report("any CLI loop, total", f.started.elapsed());
}
