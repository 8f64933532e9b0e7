//! The brief: the first message an agent gets, telling it its task, how steering
//! reaches it and how to answer, how to finish a phase, and where its predecessor's
//! session is.

use crate::task::Task;

pub struct BriefInput<'a> {
    pub task: &'a Task,
    pub lane: &'a str,
    pub session: &'a str,
    pub spice: &'a str,
    /// The transcript of the session this one succeeds, if any.
    pub predecessor: Option<&'a str>,
    /// What the previous session (or turn) was in the middle of when it ended: the
    /// commands still running, as `agent::inflight::quote` shows them. No result came
    /// back for them, and some agents (Claude Code) leave such a call out of a resumed
    /// conversation, so only the brief can say so.
    pub interrupted: &'a [String],
    /// Steering items pending for the session, framed as `spice exec` shows them: they
    /// go first, since agents may keep only the start of a long message.
    pub steering: Option<&'a str>,
    /// Whether steering comes as the user's messages (`deliver = "message"`) rather
    /// than on the stderr of its commands.
    pub as_messages: bool,
}

pub fn compose(b: &BriefInput<'_>) -> String {
    let t = b.task;
    let mut s = b
        .steering
        .map(|f| format!("{}\n", f.trim()))
        .unwrap_or_default();
    s.push_str(&format!(
        "You are working on task {handle} in lane {lane}: {title}\n\n",
        handle = t.handle(),
        lane = b.lane,
        title = t.title
    ));
    if !t.body.trim().is_empty() {
        s.push_str(&format!("{}\n\n", t.body.trim()));
    }
    let appear = if b.as_messages {
        "They come as messages from the user"
    } else {
        "They appear on the stderr of your shell commands"
    };
    s.push_str(&format!(
        "Phase: {phase}. Your working directory is a git worktree on its own branch; commit your work there.\n\n\
         Steering: the operator may send you instructions. {appear} \
         inside a box starting with \"spice:\", each with a key like [dZxPMZGfr]. Answer every \
         one in your next reply, on its own line: ACK <key>: <what you did> or NACK <key>: <why not>.\n\n\
         When the phase is done and committed, run: {spice} task phase {id} --done --claimant {session}\n",
        phase = t.phase,
        spice = b.spice,
        id = t.id,
        session = b.session,
    ));
    if let Some(p) = b.predecessor {
        s.push_str(&format!(
            "\nYou continue an earlier session. Read what it did with: {} session briefing {p}\n",
            b.spice
        ));
    }
    if !b.interrupted.is_empty() {
        s.push_str(
            "\nThe previous session ended while this was still running; it was stopped and no \
             result came back:\n",
        );
        for call in b.interrupted {
            s.push_str(&format!("- {call}\n"));
        }
        s.push_str(
            "It may have done part of its work: check its effects before running it again.\n",
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input<'a>(task: &'a Task, interrupted: &'a [String]) -> BriefInput<'a> {
        BriefInput {
            as_messages: false,
            task,
            lane: "a",
            session: "s2",
            spice: "spice",
            predecessor: Some("/t/s1.jsonl"),
            interrupted,
            steering: Some("┌── spice: 1 steering item for you ──\n└──"),
        }
    }

    #[test]
    fn steering_comes_first_and_an_interrupted_call_is_named() {
        let task = Task {
            id: "abc".into(),
            uuid: "u".into(),
            title: "Fix it".into(),
            body: String::new(),
            project: None,
            phase: "todo".into(),
            priority: None,
            due: None,
            wait: None,
            tags: vec![],
            status: crate::task::Status::Pending,
            entry: 0,
            end: None,
            modified: 0,
            depends: vec![],
            annotations: vec![],
        };
        let calls = ["`sleep 120`".to_string()];
        let text = compose(&input(&task, &calls));
        assert!(text.starts_with("┌── spice"), "{text}");
        assert!(text.contains("session briefing /t/s1.jsonl"), "{text}");
        assert!(
            text.contains("no result came back:\n- `sleep 120`\nIt may"),
            "{text}"
        );
        let plain = compose(&input(&task, &[]));
        assert!(!plain.contains("no result came back"), "{plain}");
    }
}
