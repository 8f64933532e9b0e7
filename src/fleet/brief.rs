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
    /// Steering items pending for the session, framed as `spice exec` shows them: they
    /// go first, since agents may keep only the start of a long message.
    pub steering: Option<&'a str>,
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
    s.push_str(&format!(
        "Phase: {phase}. Your working directory is a git worktree on its own branch; commit your work there.\n\n\
         Steering: the operator may send you instructions. They appear on the stderr of your shell \
         commands inside a box starting with \"spice:\", each with a key like [dZxPMZGfr]. Answer every \
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
    s
}
