//! The lane's finer states with the real CLIs (issue #19): a turn that ends on a
//! question is `asking`, told apart from a turn done with nothing asked; a command the
//! agent may not run without the operator's approval (permissions not bypassed) shows
//! its permission prompt on the screen, and the lane is `asking` for it.

use super::{Agent, Fleet, Mode, Step};

const QUESTION: &str = "I found two ways to do it. Which one do you prefer?";

fn asks_at_the_end_of_its_turn(agent: Agent) {
    let mut f = Fleet::new(agent, Mode::Pty, vec![Step::Say(QUESTION.into())]);
    f.env.add(&["Ask the operator", "--project", "demo"]);
    f.start();
    let l = f.wait_lane("the agent to ask", 60, |l| l["state"] == "asking");
    assert_eq!(l["state_note"], "Which one do you prefer?", "{l}");
    assert_eq!(l["needs_you"], true, "{l}");
    f.report(
        "question at the end of a turn -> lane asking",
        f.up_at().elapsed(),
    );
    f.down();
}

#[test]
#[ignore = "needs the real agent CLIs (npm install --no-save --prefix tests/agents)"]
fn claude_pty_a_question_at_the_end_of_a_turn_asks_the_operator() {
    asks_at_the_end_of_its_turn(Agent::Claude);
}

#[test]
#[ignore = "needs the real agent CLIs (npm install --no-save --prefix tests/agents)"]
fn codex_pty_a_question_at_the_end_of_a_turn_asks_the_operator() {
    asks_at_the_end_of_its_turn(Agent::Codex);
}

/// Claude Code with its permissions not bypassed: the built-in profile overridden by
/// one without `--dangerously-skip-permissions`.
#[test]
#[ignore = "needs the real agent CLIs (npm install --no-save --prefix tests/agents)"]
fn claude_pty_a_permission_prompt_asks_the_operator() {
    let mut f = Fleet::new(
        Agent::Claude,
        Mode::Pty,
        vec![
            Step::Shell("touch made-by-the-agent".into()),
            Step::Say("Done.".into()),
        ],
    );
    std::fs::create_dir_all(f.env.repo.join("profiles")).unwrap();
    std::fs::write(
        f.env.repo.join("profiles/claude.toml"),
        "command = [\"claude\", \"--session-id\", \"{session_id}\", \"--model={model}\", \"{brief}\"]\n\
         mode = \"pty\"\nhooks = [\"claude-post-tool-use\"]\n\
         [env]\nCLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC = \"1\"\nDISABLE_AUTOUPDATER = \"1\"\n\
         CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL = \"1\"\nDISABLE_TELEMETRY = \"1\"\n\
         [transcript]\nformat = \"claude\"\ndir = \"{home}/.claude/projects/{cwd_slug}\"\n\
         glob = \"{session_id}.jsonl\"\n",
    )
    .unwrap();
    asks_for_its_permission(&mut f, "permission prompt (");
    f.down();
}

/// Starts the fleet on a task whose agent's first command (`touch made-by-the-agent`)
/// needs the operator's approval, and checks that the lane asks for it with a note
/// starting `note_starts` and naming the command, the command not run.
fn asks_for_its_permission(f: &mut Fleet, note_starts: &str) {
    f.env.add(&["Make a file", "--project", "demo"]);
    f.start();
    let l = f.wait_lane("the permission prompt", 60, |l| l["state"] == "asking");
    let note = l["state_note"].as_str().unwrap_or_default().to_string();
    assert!(note.starts_with(note_starts), "{l}");
    assert!(note.contains("touch made-by-the-agent"), "{l}");
    assert_eq!(l["needs_you"], true, "{l}");
    assert!(
        !f.worktrees()
            .join(l["task"]["handle"].as_str().unwrap())
            .join("made-by-the-agent")
            .exists(),
        "the command waits for the operator"
    );
    f.report("permission prompt -> lane asking", f.up_at().elapsed());
}

/// Codex with approvals not bypassed (`-a on-request`, the workspace-write sandbox):
/// the built-in profile overridden by one without
/// `--dangerously-bypass-approvals-and-sandbox`. The mock's shell call asks to run
/// outside the sandbox (`sandbox_permissions: "require_escalated"`), so Codex shows its
/// approval prompt and waits; the lane is `asking` for it.
#[test]
#[ignore = "needs the real agent CLIs (npm install --no-save --prefix tests/agents)"]
fn codex_pty_an_approval_prompt_asks_the_operator() {
    let mut f = Fleet::new(
        Agent::Codex,
        Mode::Pty,
        vec![
            Step::Escalated("touch made-by-the-agent".into()),
            Step::Say("Done.".into()),
        ],
    );
    std::fs::create_dir_all(f.env.repo.join("profiles")).unwrap();
    std::fs::write(
        f.env.repo.join("profiles/codex.toml"),
        "command = [\"codex\", \"--no-daemon\", \"-a\", \"on-request\", \"-s\", \"workspace-write\",\n\
         \"-c\", \"features.plugins=false\", \"-c\", \"analytics.enabled=false\",\n\
         \"-c\", \"check_for_update_on_startup=false\",\n\
         \"-c\", 'projects={{\"{worktree}\"={{trust_level=\"trusted\"}}}}',\n\
         \"--model={model}\", \"{brief}\"]\n\
         mode = \"pty\"\nhooks = []\nwritable = [\"{home}/.codex\"]\n\
         [transcript]\nformat = \"codex\"\ndir = \"{home}/.codex/sessions\"\n\
         glob = \"*/*/*/rollout-*.jsonl\"\n",
    )
    .unwrap();
    asks_for_its_permission(
        &mut f,
        "permission prompt (Would you like to run the following command?)",
    );
    let asked = f.mock.turns();
    assert!(
        asked.iter().any(|t| t.reply
            == super::mock::Reply::Escalated("touch made-by-the-agent".into())
            && t.text().contains("sandbox_permissions")),
        "the shell tool offered no sandbox escalation:\n{}",
        f.mock.summary()
    );
    f.down();
}
