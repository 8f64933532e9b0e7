//! A refusal is not an acknowledgment (issue #37), with the real CLIs: the model
//! answers a steering item delivered mid-command with "I refuse to ACK <key>: …". The
//! item stays pending, so when the turn ends it is typed into the waiting agent again;
//! the model's next reply ACKs it, and only that line retires it.

use super::{Agent, Fleet, Mode, Step, SLOW};

fn a_refusal_leaves_the_item_pending_and_shown_again(agent: Agent) {
    let mut f = Fleet::new(
        agent,
        Mode::Pty,
        vec![Step::Shell(SLOW.into()), Step::Say("{refusals}".into())],
    );
    let task = f.env.add(&["Refuse, then accept", "--project", "demo"]);
    f.start();
    f.wait_command("sleep", 60);
    let (key, _) = f.steer("Rename the helper to `probe`.");
    let first = f.wait_shown(&key, 60);
    let refused = f.mock.wait("the refusal", 30, |log| {
        log.iter()
            .skip_while(|l| l.at < first.at)
            .find(|l| matches!(&l.reply, super::mock::Reply::Text(t) if t.contains("I refuse to ACK")))
            .cloned()
    });
    // Typed into the agent again once its turn ended: it was still pending after the
    // lane read the refusal (a retired item is never typed).
    let again = f
        .mock
        .wait(&format!("[{key}] to be shown again"), 60, |log| {
            log.iter()
                .skip_while(|l| l.at <= refused.at)
                .find(|l| l.turn && super::mock::last_user_text(l).contains(&format!("[{key}]")))
                .cloned()
        });
    assert!(again.at > refused.at);
    let typed: Vec<_> = f
        .env
        .ledger_of(&task, "delivered")
        .into_iter()
        .filter(|e| e["detail"]["keys"][0] == key.as_str())
        .collect();
    assert!(
        typed.iter().any(|e| e["detail"]["how"]
            .as_str()
            .is_some_and(|h| h.contains("typed"))),
        "{key} was not typed in again after the refusal: {typed:?}"
    );
    // The next reply ACKs it, and the ACK retires it: not the refusal's line.
    let (source, line) = f.wait_acked(&key, 30);
    let text = std::fs::read_to_string(&source).unwrap();
    let at = text.lines().nth(line as usize - 1).unwrap_or_default();
    assert!(!at.contains("I refuse to"), "retired by the refusal: {at}");
    let acks: Vec<(String, String)> = {
        let db = f.env.sql();
        let mut q = db
            .prepare("SELECT polarity, body FROM acks WHERE key = ?1 ORDER BY seq")
            .unwrap();
        q.query_map([&key], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    };
    assert_eq!(acks, [("ack".to_string(), "done".to_string())], "{acks:?}");
    f.down();
    f.report("refusal -> shown again -> acked", f.started.elapsed());
}

#[test]
#[ignore = "needs the real agent CLIs (npm install --no-save --prefix tests/agents)"]
fn claude_pty_a_refusal_leaves_the_item_pending_and_shown_again() {
    a_refusal_leaves_the_item_pending_and_shown_again(Agent::Claude);
}

#[test]
#[ignore = "needs the real agent CLIs (npm install --no-save --prefix tests/agents)"]
fn codex_pty_a_refusal_leaves_the_item_pending_and_shown_again() {
    a_refusal_leaves_the_item_pending_and_shown_again(Agent::Codex);
}
