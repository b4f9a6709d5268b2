//! Enqueue inside the caller's own transaction (the outbox pattern): a job
//! exists if and only if the caller's data commits.

use leaseq_core::{Enqueued, NewItem, QueueName, Result};
use sqlx::PgConnection;

use crate::PgBackend;

impl PgBackend {
    /// Begins a transaction on this backend's pool, for
    /// [`PgBackend::enqueue_in`] beside the caller's own writes. Unlike
    /// `pool().begin()`, a caller cancelled while the `BEGIN` is on its way
    /// (a timeout or `select!` around it, an aborted task) cannot leave the
    /// connection in a transaction the pool does not know of, in which
    /// every later statement on it would run uncommitted: sqlx 0.8 counts
    /// the transaction only after the server's answer. Errors as
    /// [`leaseq_core::Error::Unavailable`]: nothing was begun.
    pub async fn begin(&self) -> Result<sqlx::Transaction<'static, sqlx::Postgres>> {
        crate::begin::begin(&self.inner.pool, None)
            .await
            .map_err(crate::rows::refused("beginning a transaction"))
    }

    /// Enqueues `items` into `queue` on `conn`, inside the caller's own
    /// transaction: the items exist if and only if that transaction
    /// commits, together with whatever else it wrote. Use it where a job
    /// must follow a row (send the mail of an order that was saved, and
    /// only then).
    ///
    /// ```no_run
    /// # async fn demo(backend: leaseq_postgres::PgBackend) -> Result<(), Box<dyn std::error::Error>> {
    /// use leaseq_core::{NewItem, QueueName};
    /// let queue = QueueName::new("emails")?;
    /// let mut tx = backend.begin().await?;
    /// sqlx::query("INSERT INTO orders (id) VALUES (42)").execute(&mut *tx).await?;
    /// backend.enqueue_in(&mut tx, &queue, vec![NewItem::new("order 42 placed")]).await?;
    /// tx.commit().await?; // the order and its job, or neither
    /// # Ok(()) }
    /// ```
    ///
    /// - `conn` may be any connection to the database that holds the
    ///   backend's schema (this backend's [`PgBackend::begin`], or the
    ///   application's own pool); the statements name the schema, so the
    ///   connection's `search_path` does not matter. A transaction begun
    ///   with sqlx's own `begin` may be left open by a cancelled caller
    ///   (see [`PgBackend::begin`]).
    /// - Workers are woken when the transaction commits (PostgreSQL holds a
    ///   `NOTIFY` until then); until it commits no claim sees the items.
    /// - Input is checked as [`leaseq_core::Backend::enqueue`] checks it,
    ///   before anything is sent. A dedup key held by a row another open
    ///   transaction inserted makes this call wait for that transaction,
    ///   as any unique key does.
    /// - An error from a statement leaves the caller's transaction aborted
    ///   (PostgreSQL's rule): roll it back.
    /// - Returns the ids as [`leaseq_core::Backend::enqueue`] does; they are
    ///   spent even when the transaction rolls back (ids come from a
    ///   sequence), never reused.
    pub async fn enqueue_in(
        &self,
        conn: &mut PgConnection,
        queue: &QueueName,
        items: Vec<NewItem>,
    ) -> Result<Vec<Enqueued>> {
        self.check_items(&items)?;
        if items.is_empty() {
            return Ok(Vec::new());
        }
        self.enqueue_on(conn, queue, &items).await
    }
}
