//! One open PostgreSQL transaction as the steps the shared rules are written over
//! ([`PgSteps`]: `store::leases`'s, `store::phases`'s, `store::acks`'s), and
//! [`in_transaction`], which runs a rule over it and commits. Each step locks the rows
//! it reads for a judgment (`FOR UPDATE`) and writes under the fence or key judged.

use super::{PgContext, PgStore};
use crate::error::Result;
use postgres::Transaction;

/// One open transaction, and where the server is (for messages).
pub(super) struct PgSteps<'a, 'b> {
    pub tx: &'a mut Transaction<'b>,
    pub at: &'a str,
}

/// Runs `rule` over the steps of one transaction and commits it; `what` says what the
/// transaction is for, in messages. An error rolls everything back.
pub(super) fn in_transaction<T>(
    s: &mut PgStore,
    what: &str,
    rule: impl FnOnce(&mut PgSteps<'_, '_>) -> Result<T>,
) -> Result<T> {
    let at = s.at.as_str();
    let mut tx = s.client.transaction().ctx(what, at)?;
    let out = rule(&mut PgSteps { tx: &mut tx, at })?;
    tx.commit().ctx(what, at)?;
    Ok(out)
}
