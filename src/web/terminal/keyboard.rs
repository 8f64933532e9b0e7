//! Who may type into a lane's terminal from the console: the open terminal pages and
//! the keyboard each may hold.
//!
//! A page is one open terminal stream (`/api/lanes/L/terminal/live`): its lane, the
//! write half of its own attach connection, and its keyboard state. Pages are read-only
//! until they take the keyboard; taking it is a write behind the same guard as every
//! other (`POST /api/lanes/L/terminal/keyboard`) and is recorded in the lane's task's
//! ledger (`keyboard_taken`) before any key is accepted; giving it back, closing the
//! page, or the session ending records `keyboard_released` with why.
//!
//! Invariants:
//! - Keys and resizes reach the agent only from a page that holds the keyboard, and
//!   only through that page's own attach connection, which serves one session: a
//!   successor's agent never receives keys meant for the session the operator saw.
//! - At most one page of this console holds (or is taking) a lane's keyboard.
//! - A `keyboard_taken` entry is written before the page is marked as holding, and
//!   every holding that ends writes one `keyboard_released` (a page that closed while
//!   its take was being recorded included).

use super::super::routes::{error, no_lane, reply};
use super::super::writes::parse;
use super::super::App;
use crate::error::{Error, Result};
use crate::fleet::attach::frame;
use bytes::Bytes;
use serde::Deserialize;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::io::AsyncWriteExt;
use tokio::net::unix::OwnedWriteHalf;
use warp::reply::Response;

/// The largest terminal a page may ask for, either way.
const MAX_SIDE: u16 = 1000;

type Keys = Arc<tokio::sync::Mutex<OwnedWriteHalf>>;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Keyboard {
    ReadOnly,
    /// The take is being recorded in the ledger; nothing is accepted yet.
    Taking,
    /// Held for the operator; `task` is whose ledger recorded it.
    Held {
        task: String,
    },
}

struct Page {
    lane: String,
    keys: Keys,
    keyboard: Keyboard,
}

/// The open terminal pages of this console, by id.
#[derive(Default)]
pub(super) struct Pages(Mutex<HashMap<String, Page>>);

/// Whether a take has anything left to record.
enum Reserved {
    Now,
    Already(String),
}

impl Pages {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Page>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers a read-only page of `lane` writing to `keys`; its id.
    pub(super) fn open(&self, lane: &str, keys: OwnedWriteHalf) -> String {
        let id = uuid::Uuid::new_v4().simple().to_string();
        let page = Page {
            lane: lane.to_string(),
            keys: Arc::new(tokio::sync::Mutex::new(keys)),
            keyboard: Keyboard::ReadOnly,
        };
        self.lock().insert(id.clone(), page);
        id
    }

    /// Forgets page `id`; the task whose keyboard it held, if it held one.
    pub(super) fn close(&self, id: &str) -> Option<String> {
        match self.lock().remove(id)?.keyboard {
            Keyboard::Held { task } => Some(task),
            _ => None,
        }
    }

    fn reserve(&self, id: &str, lane: &str) -> Result<Reserved> {
        let mut pages = self.lock();
        let mine = page_of(&pages, id, lane)?;
        if let Keyboard::Held { task } = &mine.keyboard {
            return Ok(Reserved::Already(task.clone()));
        }
        let taken = pages
            .iter()
            .any(|(other, p)| other != id && p.lane == lane && p.keyboard != Keyboard::ReadOnly);
        if taken || mine.keyboard == Keyboard::Taking {
            return Err(Error::conflict(format!(
                "the keyboard of lane {lane} is held by another console page: release it there first"
            )));
        }
        pages.get_mut(id).expect("just found").keyboard = Keyboard::Taking;
        Ok(Reserved::Now)
    }

    /// Marks a reserved page as holding; false when the page closed meanwhile.
    fn confirm(&self, id: &str, task: &str) -> bool {
        match self.lock().get_mut(id) {
            Some(p) => {
                p.keyboard = Keyboard::Held {
                    task: task.to_string(),
                };
                true
            }
            None => false,
        }
    }

    fn unreserve(&self, id: &str) {
        if let Some(p) = self.lock().get_mut(id) {
            p.keyboard = Keyboard::ReadOnly;
        }
    }

    /// Makes page `id` read-only; the task whose keyboard it held, if it held one.
    fn release(&self, id: &str, lane: &str) -> Result<Option<String>> {
        let mut pages = self.lock();
        page_of(&pages, id, lane)?;
        let p = pages.get_mut(id).expect("just found");
        if matches!(p.keyboard, Keyboard::Taking) {
            return Err(Error::conflict(format!(
                "the keyboard of lane {lane} is still being taken: release it once that is done"
            )));
        }
        match std::mem::replace(&mut p.keyboard, Keyboard::ReadOnly) {
            Keyboard::Held { task } => Ok(Some(task)),
            _ => Ok(None),
        }
    }

    /// The way to page `id`'s agent, only while it holds the keyboard.
    fn keys(&self, id: &str, lane: &str) -> Result<Keys> {
        let pages = self.lock();
        let p = page_of(&pages, id, lane)?;
        match p.keyboard {
            Keyboard::Held { .. } => Ok(p.keys.clone()),
            _ => Err(Error::conflict(format!(
                "the terminal of lane {lane} is read-only: take the keyboard first"
            ))),
        }
    }
}

fn page_of<'a>(pages: &'a HashMap<String, Page>, id: &str, lane: &str) -> Result<&'a Page> {
    pages.get(id).filter(|p| p.lane == lane).ok_or_else(|| {
        Error::conflict(format!(
            "no open terminal page {id} on lane {lane}: it closed (the session ended or the page left); open the terminal again"
        ))
    })
}

/// Records in `task`'s ledger that the page gave lane `lane`'s keyboard back.
pub(super) async fn record_release(
    app: &Arc<App>,
    lane: &str,
    page: &str,
    task: String,
    why: &'static str,
) -> Result<()> {
    let detail = json!({"lane": lane, "page": page, "why": why});
    app.store(move |s, _| s.note(&task, "keyboard_released", crate::store::OPERATOR, detail))
        .await
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct KeyboardBody {
    page: String,
    /// True to take the keyboard, false to give it back.
    take: bool,
}

/// `POST /api/lanes/L/terminal/keyboard`: `{"page": ID, "take": true|false}`.
pub(super) async fn keyboard(
    lane: String,
    body: Bytes,
    app: Arc<App>,
    pages: Arc<Pages>,
) -> Response {
    let b: KeyboardBody = match parse(&body) {
        Ok(b) => b,
        Err(e) => return error(&e),
    };
    reply(if b.take {
        take(&app, &pages, lane, b.page).await
    } else {
        give_back(&app, &pages, lane, b.page).await
    })
}

async fn take(app: &Arc<App>, pages: &Pages, lane: String, page: String) -> Result<Value> {
    if let Reserved::Already(task) = pages.reserve(&page, &lane)? {
        return Ok(json!({"lane": lane, "page": page, "keyboard": true, "task": task}));
    }
    let (l, p) = (lane.clone(), page.clone());
    let recorded = app
        .store(move |s, _| {
            let row = s.lane(&l)?.ok_or_else(no_lane)?;
            let task = row.task_id.ok_or_else(|| {
                Error::conflict(format!(
                    "lane {l} has no task: taking its keyboard is recorded in its task's ledger"
                ))
            })?;
            let detail = json!({"lane": l, "page": p, "session": row.session});
            s.note(&task, "keyboard_taken", crate::store::OPERATOR, detail)?;
            Ok(task)
        })
        .await;
    let task = match recorded {
        Ok(task) => task,
        Err(e) => {
            pages.unreserve(&page);
            return Err(e);
        }
    };
    if !pages.confirm(&page, &task) {
        record_release(app, &lane, &page, task, "page closed").await?;
        return Err(Error::conflict(format!(
            "the terminal page of lane {lane} closed while its keyboard was being taken"
        )));
    }
    Ok(json!({"lane": lane, "page": page, "keyboard": true, "task": task}))
}

async fn give_back(app: &Arc<App>, pages: &Pages, lane: String, page: String) -> Result<Value> {
    if let Some(task) = pages.release(&page, &lane)? {
        record_release(app, &lane, &page, task, "released").await?;
    }
    Ok(json!({"lane": lane, "page": page, "keyboard": false}))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct InputBody {
    page: String,
    /// What was typed, as the terminal encodes it.
    data: String,
}

/// `POST /api/lanes/L/terminal/input`: `{"page": ID, "data": TEXT}`, refused unless
/// the page holds the keyboard.
pub(super) async fn input(lane: String, body: Bytes, pages: Arc<Pages>) -> Response {
    let b: InputBody = match parse(&body) {
        Ok(b) => b,
        Err(e) => return error(&e),
    };
    let sent = send(&pages, &lane, &b.page, frame(b'i', b.data.as_bytes())).await;
    reply(sent.map(|()| json!({"lane": lane, "bytes": b.data.len()})))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ResizeBody {
    page: String,
    cols: u16,
    rows: u16,
}

/// `POST /api/lanes/L/terminal/resize`: `{"page": ID, "cols": C, "rows": R}`, refused
/// unless the page holds the keyboard (the operator's window sets the agent's size).
pub(super) async fn resize(lane: String, body: Bytes, pages: Arc<Pages>) -> Response {
    let b: ResizeBody = match parse(&body) {
        Ok(b) => b,
        Err(e) => return error(&e),
    };
    if !(1..=MAX_SIDE).contains(&b.cols) || !(1..=MAX_SIDE).contains(&b.rows) {
        return error(&Error::input(format!(
            "terminal size {}x{} is out of range: 1 to {MAX_SIDE} columns and rows",
            b.cols, b.rows
        )));
    }
    let mut size = b.cols.to_be_bytes().to_vec();
    size.extend_from_slice(&b.rows.to_be_bytes());
    let sent = send(&pages, &lane, &b.page, frame(b'r', &size)).await;
    reply(sent.map(|()| json!({"lane": lane, "cols": b.cols, "rows": b.rows})))
}

/// Writes one frame to the page's attach connection, whole: the lock keeps frames of
/// concurrent requests from interleaving.
async fn send(pages: &Pages, lane: &str, page: &str, frame: Vec<u8>) -> Result<()> {
    let keys = pages.keys(page, lane)?;
    let mut keys = keys.lock().await;
    keys.write_all(&frame).await.map_err(|_| {
        Error::conflict(format!(
            "the session on lane {lane} ended: nothing was typed (the page reconnects to the next one)"
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(pages: &Pages, lane: &str) -> String {
        let (_, b) = tokio::net::UnixStream::pair().unwrap().0.into_split();
        pages.open(lane, b)
    }

    #[tokio::test]
    async fn one_page_holds_a_lanes_keyboard_and_only_it_may_type() {
        let pages = Pages::default();
        let (a, b, other) = (page(&pages, "x"), page(&pages, "x"), page(&pages, "y"));
        assert!(pages.keys(&a, "x").is_err(), "read-only until taken");
        assert!(matches!(pages.reserve(&a, "x").unwrap(), Reserved::Now));
        let busy = pages.reserve(&b, "x").err().unwrap().to_string();
        assert!(busy.contains("held by another console page"), "{busy}");
        assert!(
            pages.keys(&a, "x").is_err(),
            "not while the take is recorded"
        );
        assert!(pages.confirm(&a, "t1"));
        assert!(pages.keys(&a, "x").is_ok());
        assert!(
            pages.keys(&a, "y").is_err(),
            "a page types into its own lane only"
        );
        assert!(matches!(pages.reserve(&other, "y").unwrap(), Reserved::Now));
        assert!(matches!(pages.reserve(&a, "x").unwrap(), Reserved::Already(t) if t == "t1"));
        assert_eq!(pages.release(&a, "x").unwrap().as_deref(), Some("t1"));
        assert_eq!(pages.release(&a, "x").unwrap(), None, "released once");
        assert!(pages.keys(&a, "x").is_err());
        assert!(matches!(pages.reserve(&b, "x").unwrap(), Reserved::Now));
        assert!(pages.confirm(&b, "t2"));
        assert_eq!(
            pages.close(&b).as_deref(),
            Some("t2"),
            "closing returns the holding"
        );
        assert!(!pages.confirm(&b, "t2"), "a closed page holds nothing");
        assert!(pages.keys(&b, "x").is_err());
    }
}
