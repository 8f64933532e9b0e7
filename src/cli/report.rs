//! Where the library's reports go. The library never prints: what it reports and goes on
//! from (a warm that failed, a store that came back, a collection that freed a worktree)
//! it emits as a `tracing` event with the target `spice` (a module's own `spice::…`
//! target for finer records). This module installs the one global subscriber that
//! hears them, once per process ([`install`]), for every command but the hot ones
//! (`spice exec`, the agent shim, gates in hooks).
//!
//! Until a command gives it a sink of its own ([`redirect`]: `fleet up` sends them to its
//! terminal lines and `logs/fleet.log`), an event is one line on stderr, `spice: message`,
//! as the CLI's errors are. Events below INFO and of other crates are not recorded.

use std::io::Write;
use std::sync::RwLock;
use tracing::field::{Field, Visit};
use tracing::{Dispatch, Event, Level, Metadata, Subscriber};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};

/// The sink events go to instead of stderr, while a command has one.
static REDIRECT: RwLock<Option<Dispatch>> = RwLock::new(None);

/// Installs the global subscriber; later calls (a second command in one process, as in
/// the tests of the CLI's own functions) change nothing.
pub(crate) fn install() {
    let _ = tracing::subscriber::set_global_default(tracing_subscriber::registry().with(Global));
}

/// Sends every event to `sink` from now on, or back to stderr with `None`.
pub(crate) fn redirect(sink: Option<Dispatch>) {
    *REDIRECT.write().unwrap_or_else(|p| p.into_inner()) = sink;
}

/// Whether an event is one spice reports.
pub(crate) fn reported(m: &Metadata<'_>) -> bool {
    m.target().starts_with("spice") && *m.level() <= Level::INFO
}

struct Global;

impl<S: Subscriber> Layer<S> for Global {
    fn enabled(&self, m: &Metadata<'_>, _: Context<'_, S>) -> bool {
        reported(m)
    }

    fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
        if let Some(sink) = REDIRECT.read().unwrap_or_else(|p| p.into_inner()).as_ref() {
            sink.event(event);
            return;
        }
        let mut line = Line::default();
        event.record(&mut line);
        let text = crate::sanitize::for_terminal(&line.text());
        // One write per line: a reader of the pipe never sees half of one.
        let _ = std::io::stderr()
            .lock()
            .write_all(format!("{text}\n").as_bytes());
    }
}

/// `spice: message field=value…`, whatever order the fields came in.
#[derive(Default)]
struct Line {
    message: String,
    fields: String,
}

impl Visit for Line {
    fn record_str(&mut self, field: &Field, v: &str) {
        self.push(field, v);
    }
    fn record_debug(&mut self, field: &Field, v: &dyn std::fmt::Debug) {
        self.push(field, &format!("{v:?}"));
    }
}

impl Line {
    fn push(&mut self, field: &Field, v: &str) {
        if field.name() == "message" {
            self.message = v.to_string();
        } else {
            self.fields.push_str(&format!(" {}={v}", field.name()));
        }
    }

    fn text(&self) -> String {
        format!("spice: {}{}", self.message, self.fields)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    thread_local! {
        static LINES: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
    }

    /// `Global`'s filter and line, kept instead of written.
    struct Capture;

    impl<S: Subscriber> Layer<S> for Capture {
        fn enabled(&self, m: &Metadata<'_>, _: Context<'_, S>) -> bool {
            reported(m)
        }
        fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
            let mut line = Line::default();
            event.record(&mut line);
            LINES.with(|l| l.borrow_mut().push(line.text()));
        }
    }

    #[test]
    fn spices_events_of_info_and_above_are_one_line_each() {
        let dispatch = Dispatch::new(tracing_subscriber::registry().with(Capture));
        tracing::dispatcher::with_default(&dispatch, || {
            tracing::warn!(target: "spice::fleet", lane = "a", "the store is back");
            tracing::info!(target: "spice::bed", "test bed t1 ready");
            tracing::debug!(target: "spice::fleet", "too fine to report");
            tracing::warn!(target: "postgres", "another crate's");
        });
        assert_eq!(
            LINES.with(|l| l.borrow().clone()),
            [
                "spice: the store is back lane=a",
                "spice: test bed t1 ready"
            ]
        );
    }
}
