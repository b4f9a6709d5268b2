//! Transactions that a cancelled caller cannot leave open.
//!
//! sqlx-postgres 0.8 counts a transaction only once the server has answered
//! its `BEGIN`. A caller cancelled in between (an aborted task, a timeout or
//! `select!` around a call, a worker stopped mid-call) returns the
//! connection to the pool inside a transaction sqlx does not know of; its
//! guard rolls back only what it counted. Every later statement on that
//! connection then runs inside the forgotten transaction: answered, never
//! committed, invisible to other sessions, until a later `BEGIN` on it
//! commits them all or an error rolls them all back (acks undone, jobs run
//! twice). Here the `BEGIN` runs in a task of its own, which gets as far as
//! sqlx counting the transaction whatever happens to the caller; a caller
//! gone by then drops the transaction, and that queues its rollback.

use sqlx::{PgPool, Postgres, Transaction};

/// Begins a transaction on `pool`: a plain `BEGIN`, or `statement` (which
/// must open one, e.g. `BEGIN; SET LOCAL …`). See the [module docs](self).
pub(crate) async fn begin(
    pool: &PgPool,
    statement: Option<&'static str>,
) -> Result<Transaction<'static, Postgres>, sqlx::Error> {
    let pool = pool.clone();
    let task = tokio::spawn(async move {
        match statement {
            Some(s) => pool.begin_with(s).await,
            None => pool.begin().await,
        }
    });
    // A task that panicked or that the runtime dropped while shutting down
    // began nothing this caller can use.
    task.await.map_err(|_| sqlx::Error::WorkerCrashed)?
}
