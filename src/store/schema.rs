//! Migrations keyed by `PRAGMA user_version`. Each entry of [`MIGRATIONS`] moves the
//! schema up by one version inside the same `BEGIN IMMEDIATE` transaction that bumps
//! the version, so concurrent first openers apply each migration exactly once.

use crate::error::{Error, Result};
use rusqlite::{Connection, TransactionBehavior};
use std::path::Path;

/// The schema version this build writes.
pub const VERSION: i64 = MIGRATIONS.len() as i64;

const MIGRATIONS: &[&str] = &[
    // 1: tasks, dependencies, flows, claims, ledger.
    r#"
    CREATE TABLE meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
    INSERT INTO meta (key, value) VALUES ('fence', 0);
    CREATE TABLE tasks (
        id TEXT PRIMARY KEY,
        uuid TEXT NOT NULL UNIQUE,
        title TEXT NOT NULL,
        body TEXT NOT NULL DEFAULT '',
        project TEXT,
        phase TEXT NOT NULL,
        priority TEXT CHECK (priority IN ('H', 'M', 'L')),
        due INTEGER,
        wait INTEGER,
        status TEXT NOT NULL CHECK (status IN ('pending', 'waiting', 'completed', 'deleted')),
        entry INTEGER NOT NULL,
        end_at INTEGER,
        modified INTEGER NOT NULL
    ) WITHOUT ROWID;
    CREATE INDEX tasks_status ON tasks (status);
    CREATE TABLE tags (
        task_id TEXT NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
        tag TEXT NOT NULL,
        PRIMARY KEY (task_id, tag)
    ) WITHOUT ROWID;
    CREATE TABLE deps (
        task_id TEXT NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
        dep_id TEXT NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
        PRIMARY KEY (task_id, dep_id)
    ) WITHOUT ROWID;
    CREATE INDEX deps_by_dep ON deps (dep_id);
    CREATE TABLE annotations (
        task_id TEXT NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
        entry INTEGER NOT NULL,
        description TEXT NOT NULL
    );
    CREATE INDEX annotations_by_task ON annotations (task_id);
    CREATE TABLE flows (project TEXT PRIMARY KEY, phases TEXT NOT NULL) WITHOUT ROWID;
    CREATE TABLE claims (
        task_id TEXT PRIMARY KEY REFERENCES tasks (id),
        claimant TEXT NOT NULL,
        lane TEXT,
        worktree TEXT,
        fence INTEGER NOT NULL UNIQUE,
        lease_until INTEGER NOT NULL,
        claimed_at INTEGER NOT NULL,
        renewed_at INTEGER NOT NULL
    ) WITHOUT ROWID;
    CREATE INDEX claims_by_claimant ON claims (claimant);
    CREATE TABLE ledger (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        task_id TEXT NOT NULL,
        at INTEGER NOT NULL,
        kind TEXT NOT NULL,
        actor TEXT,
        fence INTEGER,
        detail TEXT NOT NULL DEFAULT '{}'
    );
    CREATE INDEX ledger_by_task ON ledger (task_id, seq);
    CREATE INDEX ledger_by_actor ON ledger (actor, kind, seq);
    "#,
    // 2: steering items and the acknowledgments found for them.
    r#"
    CREATE TABLE steering (
        key TEXT PRIMARY KEY,
        target_kind TEXT NOT NULL CHECK (target_kind IN ('lane', 'worktree', 'session')),
        target TEXT NOT NULL,
        text TEXT NOT NULL,
        state TEXT NOT NULL DEFAULT 'pending'
            CHECK (state IN ('pending', 'acked', 'refused', 'expired')),
        created INTEGER NOT NULL,
        expires INTEGER NOT NULL,
        shown INTEGER NOT NULL DEFAULT 0,
        last_shown INTEGER,
        closed_at INTEGER,
        problem TEXT
    ) WITHOUT ROWID;
    CREATE INDEX steering_by_target ON steering (state, target_kind, target);
    CREATE TABLE acks (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        key TEXT NOT NULL,
        polarity TEXT NOT NULL CHECK (polarity IN ('ack', 'nack')),
        body TEXT NOT NULL,
        source TEXT NOT NULL,
        line INTEGER NOT NULL,
        at INTEGER NOT NULL,
        effect TEXT NOT NULL,
        UNIQUE (key, polarity, source, line)
    );
    CREATE INDEX acks_by_key ON acks (key, seq);
    "#,
    // 3: where reading each transcript got to, written with what was derived from it.
    r#"
    CREATE TABLE transcript_checkpoints (
        path TEXT PRIMARY KEY,
        offset INTEGER NOT NULL,
        line INTEGER NOT NULL,
        hash INTEGER NOT NULL,
        updated INTEGER NOT NULL
    ) WITHOUT ROWID;
    "#,
    // 4: what the supervisor last knew of each lane, for `fleet status`, the console
    // and the next supervisor's reconciliation.
    r#"
    CREATE TABLE lanes (
        name TEXT PRIMARY KEY,
        state TEXT NOT NULL
            CHECK (state IN ('starting', 'working', 'waiting', 'idle', 'stalled', 'held', 'stopped')),
        profile TEXT,
        session TEXT,
        conversation TEXT,
        task_id TEXT,
        pid INTEGER,
        pid_start INTEGER,
        transcript TEXT,
        recording TEXT,
        lineage TEXT NOT NULL DEFAULT '[]',
        restarts INTEGER NOT NULL DEFAULT 0,
        hold_until INTEGER,
        hold_reason TEXT,
        last_error TEXT,
        last_activity INTEGER,
        updated INTEGER NOT NULL
    ) WITHOUT ROWID;
    "#,
    // 5: the ledger by kind, for what the console gathers across tasks (the gates'
    // last runs, refusals and bypasses) without reading every entry.
    r#"
    CREATE INDEX ledger_by_kind ON ledger (kind, seq);
    "#,
    // 6: the slot and ports each live test bed holds.
    r#"
    CREATE TABLE bed_slots (
        slot INTEGER PRIMARY KEY,
        worktree TEXT NOT NULL UNIQUE,
        task_id TEXT,
        template TEXT,
        method TEXT,
        ports TEXT NOT NULL DEFAULT '[]',
        at INTEGER NOT NULL
    );
    "#,
    // 7: the conscience's log, each lane's compaction epoch, which maxim published in
    // which epoch, and the maxims proposed as tasks.
    r#"
    CREATE TABLE conscience_log (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        at INTEGER NOT NULL,
        lane TEXT NOT NULL,
        maxim TEXT NOT NULL,
        epoch INTEGER NOT NULL,
        step TEXT NOT NULL,
        key TEXT,
        detail TEXT NOT NULL DEFAULT '{}'
    );
    CREATE INDEX conscience_log_by_lane ON conscience_log (lane, seq);
    CREATE TABLE conscience_epochs (lane TEXT PRIMARY KEY, epoch INTEGER NOT NULL) WITHOUT ROWID;
    CREATE TABLE conscience_fired (
        lane TEXT NOT NULL,
        maxim TEXT NOT NULL,
        epoch INTEGER NOT NULL,
        key TEXT NOT NULL UNIQUE,
        at INTEGER NOT NULL,
        PRIMARY KEY (lane, maxim, epoch)
    ) WITHOUT ROWID;
    CREATE TABLE conscience_proposals (
        theme TEXT PRIMARY KEY,
        task_id TEXT NOT NULL,
        at INTEGER NOT NULL
    ) WITHOUT ROWID;
    "#,
    // 8: finer lane states (asking the operator, waiting on a sub-agent, errored) and
    // what the state is about (the question asked, the permission sought). SQLite
    // cannot change a CHECK in place: the table is made again with its rows.
    r#"
    CREATE TABLE lanes_new (
        name TEXT PRIMARY KEY,
        state TEXT NOT NULL
            CHECK (state IN ('starting', 'working', 'waiting', 'asking', 'subagent', 'idle',
                             'stalled', 'held', 'errored', 'stopped')),
        profile TEXT,
        session TEXT,
        conversation TEXT,
        task_id TEXT,
        pid INTEGER,
        pid_start INTEGER,
        transcript TEXT,
        recording TEXT,
        lineage TEXT NOT NULL DEFAULT '[]',
        restarts INTEGER NOT NULL DEFAULT 0,
        hold_until INTEGER,
        hold_reason TEXT,
        last_error TEXT,
        last_activity INTEGER,
        updated INTEGER NOT NULL,
        state_note TEXT
    ) WITHOUT ROWID;
    INSERT INTO lanes_new (name, state, profile, session, conversation, task_id, pid,
        pid_start, transcript, recording, lineage, restarts, hold_until, hold_reason,
        last_error, last_activity, updated)
        SELECT name, state, profile, session, conversation, task_id, pid, pid_start,
            transcript, recording, lineage, restarts, hold_until, hold_reason, last_error,
            last_activity, updated FROM lanes;
    DROP TABLE lanes;
    ALTER TABLE lanes_new RENAME TO lanes;
    "#,
    // 9: tokens each session's transcript counted, what reading each transcript
    // remembers across a restart, and the operator's budgets.
    r#"
    CREATE TABLE usage (
        path TEXT NOT NULL,
        session TEXT NOT NULL,
        lane TEXT,
        task_id TEXT,
        input INTEGER NOT NULL DEFAULT 0,
        output INTEGER NOT NULL DEFAULT 0,
        cache_read INTEGER NOT NULL DEFAULT 0,
        cache_creation INTEGER NOT NULL DEFAULT 0,
        updated INTEGER NOT NULL,
        PRIMARY KEY (path, session)
    ) WITHOUT ROWID;
    CREATE INDEX usage_by_lane ON usage (lane);
    CREATE INDEX usage_by_task ON usage (task_id);
    CREATE TABLE usage_carry (path TEXT PRIMARY KEY, carry TEXT NOT NULL) WITHOUT ROWID;
    CREATE TABLE budgets (
        kind TEXT NOT NULL CHECK (kind IN ('lane', 'task')),
        name TEXT NOT NULL,
        tokens INTEGER,
        stop INTEGER NOT NULL DEFAULT 0,
        updated INTEGER NOT NULL,
        PRIMARY KEY (kind, name)
    ) WITHOUT ROWID;
    "#,
    // 10: the generation of the graph and its claims (`store::generation`): moved by
    // triggers on every write that can change what is eligible or how it ranks, by any
    // writer, so an idle lane waits on one small read instead of re-ranking the graph;
    // lane rows, lease renewals, checkpoints and steering do not move it. The index
    // finds the next wait date that makes a task eligible.
    r#"
    INSERT INTO meta (key, value) VALUES ('generation', 0);
    CREATE INDEX tasks_by_wait ON tasks (wait) WHERE wait IS NOT NULL;
    CREATE TRIGGER generation_tasks_insert AFTER INSERT ON tasks
        BEGIN UPDATE meta SET value = value + 1 WHERE key = 'generation'; END;
    CREATE TRIGGER generation_tasks_update
        AFTER UPDATE OF title, project, phase, priority, due, wait, status, end_at ON tasks
        BEGIN UPDATE meta SET value = value + 1 WHERE key = 'generation'; END;
    CREATE TRIGGER generation_tasks_delete AFTER DELETE ON tasks
        BEGIN UPDATE meta SET value = value + 1 WHERE key = 'generation'; END;
    CREATE TRIGGER generation_deps_insert AFTER INSERT ON deps
        BEGIN UPDATE meta SET value = value + 1 WHERE key = 'generation'; END;
    CREATE TRIGGER generation_deps_update AFTER UPDATE ON deps
        BEGIN UPDATE meta SET value = value + 1 WHERE key = 'generation'; END;
    CREATE TRIGGER generation_deps_delete AFTER DELETE ON deps
        BEGIN UPDATE meta SET value = value + 1 WHERE key = 'generation'; END;
    CREATE TRIGGER generation_flows_insert AFTER INSERT ON flows
        BEGIN UPDATE meta SET value = value + 1 WHERE key = 'generation'; END;
    CREATE TRIGGER generation_flows_update AFTER UPDATE ON flows
        BEGIN UPDATE meta SET value = value + 1 WHERE key = 'generation'; END;
    CREATE TRIGGER generation_flows_delete AFTER DELETE ON flows
        BEGIN UPDATE meta SET value = value + 1 WHERE key = 'generation'; END;
    CREATE TRIGGER generation_claims_insert AFTER INSERT ON claims
        BEGIN UPDATE meta SET value = value + 1 WHERE key = 'generation'; END;
    CREATE TRIGGER generation_claims_holder
        AFTER UPDATE OF task_id, claimant, lane, worktree, fence ON claims
        BEGIN UPDATE meta SET value = value + 1 WHERE key = 'generation'; END;
    CREATE TRIGGER generation_claims_delete AFTER DELETE ON claims
        BEGIN UPDATE meta SET value = value + 1 WHERE key = 'generation'; END;
    "#,
    // 11: supervisor rows (host, pid, start time, heartbeat lease) and which one runs
    // each lane (`store::supervisors`), so the supervisors of several hosts share the
    // lanes. Ids are never reused (AUTOINCREMENT). Neither table moves the generation.
    r#"
    CREATE TABLE supervisors (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        host TEXT NOT NULL,
        pid INTEGER NOT NULL,
        started INTEGER NOT NULL,
        registered INTEGER NOT NULL,
        heartbeat INTEGER NOT NULL,
        lease_until INTEGER NOT NULL,
        ended INTEGER,
        superseded_by INTEGER
    );
    CREATE INDEX supervisors_by_host ON supervisors (host);
    CREATE TABLE lane_runners (
        lane TEXT PRIMARY KEY,
        supervisor INTEGER NOT NULL REFERENCES supervisors (id),
        taken INTEGER NOT NULL
    ) WITHOUT ROWID;
    "#,
    // 12: the graph's own generation (`alloc::order`): moved by every write that can
    // change how the open tasks rank (tasks, dependencies, tags, annotations), never by
    // a claim; and the ranking kept for it, so a claim reads the order instead of
    // ranking the whole graph again (`rankings`: one row, the generation it was made at).
    r#"
    INSERT INTO meta (key, value) VALUES ('graph', 0);
    CREATE TABLE rankings (
        one INTEGER PRIMARY KEY CHECK (one = 1),
        graph INTEGER NOT NULL,
        data BLOB NOT NULL
    );
    CREATE TRIGGER graph_tasks_insert AFTER INSERT ON tasks
        BEGIN UPDATE meta SET value = value + 1 WHERE key = 'graph'; END;
    CREATE TRIGGER graph_tasks_update
        AFTER UPDATE OF id, project, phase, priority, due, wait, status, entry ON tasks
        BEGIN UPDATE meta SET value = value + 1 WHERE key = 'graph'; END;
    CREATE TRIGGER graph_tasks_delete AFTER DELETE ON tasks
        BEGIN UPDATE meta SET value = value + 1 WHERE key = 'graph'; END;
    CREATE TRIGGER graph_deps_insert AFTER INSERT ON deps
        BEGIN UPDATE meta SET value = value + 1 WHERE key = 'graph'; END;
    CREATE TRIGGER graph_deps_update AFTER UPDATE ON deps
        BEGIN UPDATE meta SET value = value + 1 WHERE key = 'graph'; END;
    CREATE TRIGGER graph_deps_delete AFTER DELETE ON deps
        BEGIN UPDATE meta SET value = value + 1 WHERE key = 'graph'; END;
    CREATE TRIGGER graph_tags_insert AFTER INSERT ON tags
        BEGIN UPDATE meta SET value = value + 1 WHERE key = 'graph'; END;
    CREATE TRIGGER graph_tags_update AFTER UPDATE ON tags
        BEGIN UPDATE meta SET value = value + 1 WHERE key = 'graph'; END;
    CREATE TRIGGER graph_tags_delete AFTER DELETE ON tags
        BEGIN UPDATE meta SET value = value + 1 WHERE key = 'graph'; END;
    CREATE TRIGGER graph_annotations_insert AFTER INSERT ON annotations
        BEGIN UPDATE meta SET value = value + 1 WHERE key = 'graph'; END;
    CREATE TRIGGER graph_annotations_update AFTER UPDATE OF task_id ON annotations
        BEGIN UPDATE meta SET value = value + 1 WHERE key = 'graph'; END;
    CREATE TRIGGER graph_annotations_delete AFTER DELETE ON annotations
        BEGIN UPDATE meta SET value = value + 1 WHERE key = 'graph'; END;
    "#,
    // 13: the claimant's last claimed cell, read before every next-claim, found at
    // once: with `ledger_by_actor` alone it sorted every claim the claimant ever took.
    r#"
    CREATE INDEX ledger_claims_by_actor ON ledger (actor, seq)
        WHERE kind IN ('claimed', 'takeover', 'successor');
    "#,
];

/// Reads the schema version and refuses a database from a newer spice or another
/// program, without writing anything; returns the version.
///
/// The version and the tables are read by one statement, so from one snapshot: read
/// apart, another process's first migration could commit between the two reads, and a
/// new spice store would look like another program's (version 0, tables present).
pub fn refuse_foreign(conn: &Connection, path: &Path) -> Result<i64> {
    let (version, tables): (i64, i64) = conn
        .query_row(
            "SELECT (SELECT user_version FROM pragma_user_version),
                    (SELECT count(*) FROM sqlite_schema WHERE type = 'table')",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .map_err(|e| store_err(path, e))?;
    check_not_newer(version, path)?;
    if version == 0 && tables > 0 {
        return Err(foreign(path));
    }
    Ok(version)
}

fn foreign(path: &Path) -> Error {
    Error::Store(format!(
        "{} is a SQLite database but not spice's (it has tables and no spice schema version): refusing to use it",
        path.display()
    ))
}

fn check_no_tables(conn: &Connection, path: &Path) -> Result<()> {
    let tables: i64 = conn
        .query_row(
            "SELECT count(*) FROM sqlite_schema WHERE type = 'table'",
            [],
            |r| r.get(0),
        )
        .map_err(|e| store_err(path, e))?;
    if tables > 0 {
        return Err(foreign(path));
    }
    Ok(())
}

/// Brings the database at `path` up to [`VERSION`], or refuses it.
pub fn migrate(conn: &mut Connection, path: &Path) -> Result<()> {
    let current = refuse_foreign(conn, path)?;
    if current == VERSION {
        return Ok(());
    }
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(|e| store_err(path, e))?;
    // Another process may have migrated while we waited for the lock.
    let current: i64 = tx
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(|e| store_err(path, e))?;
    check_not_newer(current, path)?;
    if current == 0 {
        check_no_tables(&tx, path)?;
    }
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(current as usize) {
        tx.execute_batch(sql).map_err(|e| store_err(path, e))?;
        tx.pragma_update(None, "user_version", (i + 1) as i64)
            .map_err(|e| store_err(path, e))?;
    }
    tx.commit().map_err(|e| store_err(path, e))?;
    Ok(())
}

fn check_not_newer(version: i64, path: &Path) -> Result<()> {
    if version > VERSION {
        return Err(Error::Store(format!(
            "{} has schema version {version}, written by a newer spice (this one knows up to {VERSION}): upgrade spice",
            path.display()
        )));
    }
    Ok(())
}

fn store_err(path: &Path, e: rusqlite::Error) -> Error {
    super::open::explain(
        path,
        None,
        Error::Sqlite {
            context: format!("failed to migrate {}", path.display()),
            source: e,
        },
    )
}
