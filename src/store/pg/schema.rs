//! The PostgreSQL schema, versioned by the one row of `spice_schema`.
//!
//! [`migrate`] first reads the version without locking anything: a database at this
//! build's version costs one round trip (every process that connects pays it); a newer one is refused before a byte is written;
//! a database with tables but no `spice_schema` is someone else's and is refused too.
//! Only an older or empty one takes the migration transaction, which serialises
//! concurrent first connections with a transaction-scoped advisory lock (schema set-up
//! only: no claim ever depends on it), reads the version again from the catalog's own
//! rows (never a cached lookup, which misses a migration committed while it waited),
//! and applies each step after the version it finds.

use super::{reason, PgContext};
use crate::error::{Error, Result};
use postgres::error::SqlState;
use postgres::{Client, SimpleQueryMessage};

/// Each step takes the schema from version `i` to `i + 1`.
const MIGRATIONS: &[&str] = &[
    // 1: tasks, dependencies, claims with fences from a sequence, the ledger, and the
    // server's clock in microseconds since the Unix epoch (the SQLite store's unit).
    "CREATE TABLE spice_schema (version integer NOT NULL);
     INSERT INTO spice_schema VALUES (0);
     CREATE FUNCTION spice_now() RETURNS bigint LANGUAGE sql VOLATILE
       AS $$ SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint $$;
     CREATE SEQUENCE fences;
     CREATE TABLE tasks (
       id text PRIMARY KEY,
       uuid text NOT NULL UNIQUE,
       title text NOT NULL,
       body text NOT NULL DEFAULT '',
       project text,
       phase text NOT NULL,
       priority text,
       due bigint,
       wait bigint,
       status text NOT NULL,
       entry bigint NOT NULL,
       end_at bigint,
       modified bigint NOT NULL);
     CREATE INDEX tasks_open ON tasks (status) WHERE status IN ('pending', 'waiting');
     CREATE TABLE tags (
       task_id text NOT NULL REFERENCES tasks (id),
       tag text NOT NULL,
       PRIMARY KEY (task_id, tag));
     CREATE TABLE deps (
       task_id text NOT NULL REFERENCES tasks (id),
       dep_id text NOT NULL REFERENCES tasks (id),
       PRIMARY KEY (task_id, dep_id));
     CREATE INDEX deps_by_dep ON deps (dep_id);
     CREATE TABLE claims (
       task_id text PRIMARY KEY REFERENCES tasks (id),
       claimant text NOT NULL,
       lane text,
       worktree text,
       fence bigint NOT NULL UNIQUE,
       lease_until bigint NOT NULL,
       claimed_at bigint NOT NULL,
       renewed_at bigint NOT NULL);
     CREATE TABLE ledger (
       seq bigserial PRIMARY KEY,
       task_id text NOT NULL,
       at bigint NOT NULL,
       kind text NOT NULL,
       actor text,
       fence bigint,
       detail jsonb NOT NULL);
     CREATE INDEX ledger_by_task ON ledger (task_id, seq);
     CREATE INDEX ledger_by_actor ON ledger (actor, seq);",
    // 2: steering items, the acknowledgments found for them and transcript
    // checkpoints (SQLite's schemas 2 and 3), and change notification: a committed
    // change to steering or claims sends `NOTIFY spice_changes` with the table's name
    // (row triggers, so every writer sends it; PostgreSQL folds a transaction's
    // identical notifications into one and delivers them at commit). Showing an item
    // (`shown`, `last_shown`) and renewing a lease change nothing a waiter acts on and
    // send nothing.
    "CREATE TABLE steering (
       key text PRIMARY KEY,
       target_kind text NOT NULL CHECK (target_kind IN ('lane', 'worktree', 'session')),
       target text NOT NULL,
       text text NOT NULL,
       state text NOT NULL DEFAULT 'pending'
         CHECK (state IN ('pending', 'acked', 'refused', 'expired')),
       created bigint NOT NULL,
       expires bigint NOT NULL,
       shown bigint NOT NULL DEFAULT 0,
       last_shown bigint,
       closed_at bigint,
       problem text);
     CREATE INDEX steering_pending ON steering (expires) WHERE state = 'pending';
     CREATE TABLE acks (
       seq bigserial PRIMARY KEY,
       key text NOT NULL,
       polarity text NOT NULL CHECK (polarity IN ('ack', 'nack')),
       body text NOT NULL,
       source text NOT NULL,
       line bigint NOT NULL,
       at bigint NOT NULL,
       effect text NOT NULL,
       UNIQUE (key, polarity, source, line));
     CREATE INDEX acks_by_key ON acks (key, seq);
     CREATE TABLE transcript_checkpoints (
       path text PRIMARY KEY,
       byte_offset bigint NOT NULL,
       line bigint NOT NULL,
       hash bigint NOT NULL,
       updated bigint NOT NULL);
     CREATE FUNCTION spice_notify() RETURNS trigger LANGUAGE plpgsql
       AS $$ BEGIN PERFORM pg_notify('spice_changes', TG_TABLE_NAME); RETURN NULL; END $$;
     CREATE TRIGGER steering_made AFTER INSERT OR DELETE ON steering
       FOR EACH ROW EXECUTE FUNCTION spice_notify();
     CREATE TRIGGER steering_changed AFTER UPDATE ON steering FOR EACH ROW
       WHEN ((OLD.state, OLD.problem, OLD.text, OLD.expires)
             IS DISTINCT FROM (NEW.state, NEW.problem, NEW.text, NEW.expires))
       EXECUTE FUNCTION spice_notify();
     CREATE TRIGGER claims_made AFTER INSERT OR DELETE ON claims
       FOR EACH ROW EXECUTE FUNCTION spice_notify();
     CREATE TRIGGER claims_changed AFTER UPDATE ON claims FOR EACH ROW
       WHEN ((OLD.claimant, OLD.fence) IS DISTINCT FROM (NEW.claimant, NEW.fence))
       EXECUTE FUNCTION spice_notify();",
    // Lane rows (SQLite's schemas 4 and 8), supervisor rows and lane runners (SQLite's
    // 11), and the generation (SQLite's 10): moved by the same writes as SQLite's
    // triggers move it (tasks' ranked columns, deps, claims taken, released or changing
    // holder, lane, worktree or fence; never renewals, lane rows, steering or the
    // ledger), and notifying `spice_changes` so a waiter wakes at once on any host. It
    // is the sum of 16 stripes, each writer moving its backend's: one counter row would
    // be locked by every claim until its commit, queueing claimers that SKIP LOCKED
    // lets pass each other. (A sequence would not do: its value is seen before the
    // write that moved it commits.) Flows are not on PostgreSQL yet; their migration
    // adds their trigger.
    "CREATE TABLE lanes (
       name text PRIMARY KEY,
       state text NOT NULL
         CHECK (state IN ('starting', 'working', 'waiting', 'asking', 'subagent', 'idle',
                          'stalled', 'held', 'errored', 'stopped')),
       profile text,
       session text,
       conversation text,
       task_id text,
       pid bigint,
       pid_start bigint,
       transcript text,
       recording text,
       lineage text NOT NULL DEFAULT '[]',
       restarts bigint NOT NULL DEFAULT 0,
       hold_until bigint,
       hold_reason text,
       last_error text,
       last_activity bigint,
       updated bigint NOT NULL,
       state_note text);
     CREATE TABLE supervisors (
       id bigserial PRIMARY KEY,
       host text NOT NULL,
       pid bigint NOT NULL,
       started bigint NOT NULL,
       registered bigint NOT NULL,
       heartbeat bigint NOT NULL,
       lease_until bigint NOT NULL,
       ended bigint,
       superseded_by bigint);
     CREATE INDEX supervisors_by_host ON supervisors (host);
     CREATE TABLE lane_runners (
       lane text PRIMARY KEY,
       supervisor bigint NOT NULL REFERENCES supervisors (id),
       taken bigint NOT NULL);
     CREATE TABLE spice_generation (stripe integer PRIMARY KEY, value bigint NOT NULL);
     INSERT INTO spice_generation SELECT s, 0 FROM generate_series(0, 15) s;
     CREATE INDEX tasks_by_wait ON tasks (wait) WHERE wait IS NOT NULL;
     CREATE FUNCTION spice_generation_move() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
       UPDATE spice_generation SET value = value + 1 WHERE stripe = pg_backend_pid() % 16;
       PERFORM pg_notify('spice_changes', 'generation');
       RETURN NULL; END $$;
     CREATE TRIGGER generation_tasks AFTER INSERT OR DELETE ON tasks
       FOR EACH ROW EXECUTE FUNCTION spice_generation_move();
     CREATE TRIGGER generation_tasks_update
       AFTER UPDATE OF title, project, phase, priority, due, wait, status, end_at ON tasks
       FOR EACH ROW EXECUTE FUNCTION spice_generation_move();
     CREATE TRIGGER generation_deps AFTER INSERT OR UPDATE OR DELETE ON deps
       FOR EACH ROW EXECUTE FUNCTION spice_generation_move();
     CREATE TRIGGER generation_claims AFTER INSERT OR DELETE ON claims
       FOR EACH ROW EXECUTE FUNCTION spice_generation_move();
     CREATE TRIGGER generation_claims_holder
       AFTER UPDATE OF task_id, claimant, lane, worktree, fence ON claims
       FOR EACH ROW EXECUTE FUNCTION spice_generation_move();",
    // Usage, budgets and bed slots (SQLite's schemas 6 and 9): the tokens each
    // session's transcript counted, what reading each transcript remembers across a
    // restart, the operator's budgets, and the slot and ports each live test bed holds
    // (a bed's ports an array; reservations lock the table, so no two share one).
    "CREATE TABLE usage (
       path text NOT NULL,
       session text NOT NULL,
       lane text,
       task_id text,
       input bigint NOT NULL DEFAULT 0 CHECK (input >= 0),
       output bigint NOT NULL DEFAULT 0 CHECK (output >= 0),
       cache_read bigint NOT NULL DEFAULT 0 CHECK (cache_read >= 0),
       cache_creation bigint NOT NULL DEFAULT 0 CHECK (cache_creation >= 0),
       updated bigint NOT NULL,
       PRIMARY KEY (path, session));
     CREATE INDEX usage_by_lane ON usage (lane);
     CREATE INDEX usage_by_task ON usage (task_id);
     CREATE TABLE usage_carry (path text PRIMARY KEY, carry text NOT NULL);
     CREATE TABLE budgets (
       kind text NOT NULL CHECK (kind IN ('lane', 'task')),
       name text NOT NULL,
       tokens bigint,
       stop boolean NOT NULL DEFAULT false,
       updated bigint NOT NULL,
       PRIMARY KEY (kind, name));
     CREATE TABLE bed_slots (
       slot integer PRIMARY KEY CHECK (slot >= 0),
       worktree text NOT NULL UNIQUE,
       task_id text,
       template text,
       method text,
       ports integer[] NOT NULL DEFAULT '{}',
       at bigint NOT NULL);",
    // The ledger's and acknowledgments' feeds, and the conscience. Each row of the two
    // feeds carries the transaction that wrote it (`xid`, 0 for rows written before),
    // so a reader hands out only what no transaction in flight can still precede
    // ([`super::ledger`]). The conscience's log, each lane's compaction epoch, which
    // maxim published in which epoch (its primary key is the once-per-epoch proof),
    // and the maxims proposed as tasks: SQLite's schema 7.
    "ALTER TABLE ledger ADD COLUMN xid xid8 NOT NULL DEFAULT '0';
     ALTER TABLE ledger ALTER COLUMN xid SET DEFAULT pg_current_xact_id();
     CREATE INDEX ledger_by_xid ON ledger (xid, seq);
     ALTER TABLE acks ADD COLUMN xid xid8 NOT NULL DEFAULT '0';
     ALTER TABLE acks ALTER COLUMN xid SET DEFAULT pg_current_xact_id();
     CREATE INDEX acks_by_xid ON acks (xid, seq);
     CREATE TABLE conscience_log (
       seq bigserial PRIMARY KEY,
       at bigint NOT NULL,
       lane text NOT NULL,
       maxim text NOT NULL,
       epoch bigint NOT NULL,
       step text NOT NULL,
       key text,
       detail jsonb NOT NULL DEFAULT '{}');
     CREATE INDEX conscience_log_by_lane ON conscience_log (lane, seq);
     CREATE TABLE conscience_epochs (lane text PRIMARY KEY, epoch bigint NOT NULL);
     CREATE TABLE conscience_fired (
       lane text NOT NULL,
       maxim text NOT NULL,
       epoch bigint NOT NULL,
       key text NOT NULL UNIQUE,
       at bigint NOT NULL,
       PRIMARY KEY (lane, maxim, epoch));
     CREATE TABLE conscience_proposals (
       theme text PRIMARY KEY,
       task_id text NOT NULL,
       at bigint NOT NULL);",
    // The graph's own generation and the ranking kept for it (SQLite's 12,
    // `alloc::order`): moved by every statement that writes tasks' ranked columns,
    // dependencies or tags, never by a claim, so claims do not queue on its row.
    "CREATE TABLE spice_graph (one boolean PRIMARY KEY DEFAULT true CHECK (one),
       value bigint NOT NULL);
     INSERT INTO spice_graph VALUES (true, 0);
     CREATE TABLE spice_rankings (one boolean PRIMARY KEY DEFAULT true CHECK (one),
       graph bigint NOT NULL,
       data bytea NOT NULL);
     CREATE FUNCTION spice_graph_move() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
       UPDATE spice_graph SET value = value + 1;
       RETURN NULL; END $$;
     CREATE TRIGGER graph_tasks AFTER INSERT OR DELETE OR TRUNCATE ON tasks
       FOR EACH STATEMENT EXECUTE FUNCTION spice_graph_move();
     CREATE TRIGGER graph_tasks_update
       AFTER UPDATE OF id, project, phase, priority, due, wait, status, entry ON tasks
       FOR EACH STATEMENT EXECUTE FUNCTION spice_graph_move();
     CREATE TRIGGER graph_deps AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON deps
       FOR EACH STATEMENT EXECUTE FUNCTION spice_graph_move();
     CREATE TRIGGER graph_tags AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON tags
       FOR EACH STATEMENT EXECUTE FUNCTION spice_graph_move();",
    // 7: annotations (SQLite's schema 1), kept in the order they were written (`seq`,
    // as SQLite's rowid) among those of one moment; urgency counts them, so they move
    // the graph's generation as on SQLite (never the generation claims wait on).
    "CREATE TABLE annotations (
       seq bigserial PRIMARY KEY,
       task_id text NOT NULL REFERENCES tasks (id),
       entry bigint NOT NULL,
       description text NOT NULL);
     CREATE INDEX annotations_by_task ON annotations (task_id, entry, seq);
     CREATE TRIGGER graph_annotations
       AFTER INSERT OR UPDATE OF task_id OR DELETE OR TRUNCATE ON annotations
       FOR EACH STATEMENT EXECUTE FUNCTION spice_graph_move();",
    // 8: a claim taken notifies no one. PostgreSQL serialises every notifying
    // transaction's commit, its WAL flush included, under one lock on the cluster
    // (so that notifications queue in commit order): with a notification per claim,
    // claims committed one flush at a time (about 300-450 a second here at any number
    // of claimers, commits waiting on `Lock:object`, and the generation's stripes held
    // meanwhile). A new claim makes no work for anyone, so it only moves the
    // generation, which waiters also re-read every second; a claim released, done or
    // passed to another holder (which frees a task, or tells a lane its claim is
    // gone) still notifies at once.
    "CREATE FUNCTION spice_generation_bump() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
       UPDATE spice_generation SET value = value + 1 WHERE stripe = pg_backend_pid() % 16;
       RETURN NULL; END $$;
     DROP TRIGGER claims_made ON claims;
     CREATE TRIGGER claims_gone AFTER DELETE ON claims
       FOR EACH ROW EXECUTE FUNCTION spice_notify();
     DROP TRIGGER generation_claims ON claims;
     CREATE TRIGGER generation_claims_gone AFTER DELETE ON claims
       FOR EACH ROW EXECUTE FUNCTION spice_generation_move();
     CREATE TRIGGER generation_claims_made AFTER INSERT ON claims
       FOR EACH ROW EXECUTE FUNCTION spice_generation_bump();",
    // 9: what a claimer reads of the claims between two claims is what changed
    // ([`super::tasks::claim_view`]), not every claim: each claim row records the
    // transaction that last wrote it (`changed`, set on insert and on every update), so
    // a reader that saw every claim at a snapshot whose horizon was X reads next only
    // the rows written by transactions at or above X (every transaction below it had
    // ended, and what it wrote was seen). A claim that goes (released, done, deleted)
    // leaves no row to read, so it moves a count of its own (16 stripes, as the
    // generation, so deletes do not queue on one row); a reader that sees the count
    // move reads every claim again. The kept ranking's row is made here (at no
    // generation), so keeping one is an update that can skip a locked row. The
    // claimant's last claimed cell, read with every next-claim, is found at once
    // (`ledger_by_actor` read every claim the claimant took, then sorted them).
    "CREATE INDEX ledger_claims_by_actor ON ledger (actor, seq)
       WHERE kind IN ('claimed', 'takeover', 'successor');
     ALTER TABLE claims ADD COLUMN changed xid8 NOT NULL DEFAULT '0';
     ALTER TABLE claims ALTER COLUMN changed SET DEFAULT pg_current_xact_id();
     CREATE INDEX claims_by_change ON claims (changed);
     CREATE TABLE spice_claims_gone (stripe integer PRIMARY KEY, value bigint NOT NULL);
     INSERT INTO spice_claims_gone SELECT s, 0 FROM generate_series(0, 15) s;
     CREATE FUNCTION spice_claims_gone_move() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
       UPDATE spice_claims_gone SET value = value + 1 WHERE stripe = pg_backend_pid() % 16;
       RETURN NULL; END $$;
     CREATE FUNCTION spice_claim_rewritten() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
       NEW.changed := pg_current_xact_id();
       IF NEW.task_id IS DISTINCT FROM OLD.task_id THEN
         UPDATE spice_claims_gone SET value = value + 1 WHERE stripe = pg_backend_pid() % 16;
       END IF;
       RETURN NEW; END $$;
     CREATE TRIGGER claims_rewritten BEFORE UPDATE ON claims
       FOR EACH ROW EXECUTE FUNCTION spice_claim_rewritten();
     CREATE TRIGGER claims_gone_count AFTER DELETE OR TRUNCATE ON claims
       FOR EACH STATEMENT EXECUTE FUNCTION spice_claims_gone_move();
     INSERT INTO spice_rankings VALUES (true, -1, '') ON CONFLICT (one) DO NOTHING;",
    // 10: phase flows (SQLite's schema 1): a project's phases, comma-separated, the
    // default for every project under ''. A flow decides a new task's first phase and
    // which phase follows, so it moves the generation (as on SQLite), never the graph.
    "CREATE TABLE flows (project text PRIMARY KEY, phases text NOT NULL);
     CREATE TRIGGER generation_flows AFTER INSERT OR UPDATE OR DELETE ON flows
       FOR EACH ROW EXECUTE FUNCTION spice_generation_move();",
];

/// The channel the schema's triggers notify on a change to steering, claims or the
/// generation.
pub const CHANGES: &str = "spice_changes";

/// The schema version this build writes.
pub const VERSION: i32 = MIGRATIONS.len() as i32;

/// An arbitrary key for the advisory lock that serialises schema set-up.
const MIGRATION_LOCK: i64 = 0x5350_4943_4530_0001;

/// The version a database is at: `None` for one without spice's table (empty, or
/// someone else's: then `foreign` is how many tables it has).
fn version(client: &mut Client, at: &str) -> Result<(Option<i32>, i64)> {
    let row = client
        .query_one(
            "SELECT to_regclass('spice_schema') IS NOT NULL,
                    (SELECT count(*) FROM pg_tables WHERE schemaname = current_schema())",
            &[],
        )
        .ctx("to read the schema version", at)?;
    let (has, tables): (bool, i64) = (row.get(0), row.get(1));
    if !has {
        return Ok((None, tables));
    }
    let v: i32 = client
        .query_one("SELECT version FROM spice_schema", &[])
        .ctx("to read the schema version", at)?
        .get(0);
    Ok((Some(v), tables))
}

fn refuse_newer(v: i32, at: &str) -> Error {
    Error::Store(format!(
        "{at}: schema version {v} is newer than this spice understands ({VERSION}); \
         upgrade spice (nothing was changed)"
    ))
}

/// The version in `spice_schema`, read in one round trip (the simple protocol sends
/// the text and returns the row together); `None` when there is no such table.
fn current(client: &mut Client, at: &str) -> Result<Option<i32>> {
    match client.simple_query("SELECT version FROM spice_schema") {
        Ok(msgs) => Ok(msgs.iter().find_map(|m| match m {
            SimpleQueryMessage::Row(r) => r.get(0).and_then(|v| v.parse().ok()),
            _ => None,
        })),
        Err(e) if e.code() == Some(&SqlState::UNDEFINED_TABLE) => Ok(None),
        Err(e) => Err(e).ctx("to read the schema version", at),
    }
}

/// Brings the database at `at` to [`VERSION`], or refuses it untouched.
pub fn migrate(client: &mut Client, at: &str) -> Result<()> {
    if current(client, at)? == Some(VERSION) {
        return Ok(());
    }
    match version(client, at)? {
        (Some(v), _) if v == VERSION => return Ok(()),
        (Some(v), _) if v > VERSION => return Err(refuse_newer(v, at)),
        (None, tables) if tables > 0 => {
            return Err(Error::Store(format!(
                "{at}: the database has {tables} table(s) but none of spice's; \
                 refusing to write into it (nothing was changed)"
            )))
        }
        _ => {}
    }
    let mut tx = client
        .transaction()
        .ctx("to start the schema migration", at)?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .ctx("to lock the schema migration", at)?;
    // Read from the catalog's tables, not through `to_regclass`: the lookup cache of a
    // backend that waited for the lock has not taken in the other migration's commit,
    // so it would still call `spice_schema` missing and migrate a second time.
    let has: bool = tx
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM pg_tables
                            WHERE schemaname = current_schema() AND tablename = 'spice_schema')",
            &[],
        )
        .ctx("to read the schema version", at)?
        .get(0);
    let from: i32 = if has {
        tx.query_one("SELECT version FROM spice_schema", &[])
            .ctx("to read the schema version", at)?
            .get(0)
    } else {
        0
    };
    if from > VERSION {
        return Err(refuse_newer(from, at));
    }
    for (i, step) in MIGRATIONS.iter().enumerate().skip(from as usize) {
        tx.batch_execute(step).map_err(|e| {
            Error::Store(format!(
                "{at}: migration to schema {} failed: {}",
                i + 1,
                reason(&e)
            ))
        })?;
    }
    tx.execute("UPDATE spice_schema SET version = $1", &[&VERSION])
        .ctx("to record the schema version", at)?;
    tx.commit().ctx("to commit the schema migration", at)
}
