//! Enqueue inside the caller's own transaction (the outbox pattern): a job
//! exists if and only if the caller's data commits.

use leaseq_core::{Enqueued, NewItem, QueueName, Result};
use sqlx::{Sqlite, SqliteConnection, Transaction};

use crate::rows::refused;
use crate::SqliteBackend;

impl SqliteBackend {
    /// Begins a write transaction (`BEGIN IMMEDIATE`) on the backend's
    /// writer, for the application's own statements and
    /// [`SqliteBackend::enqueue_in`]. SQLite has one writer per file:
    /// while the transaction is open, this backend's writes (claims, acks)
    /// wait for it, so keep it short.
    pub async fn begin(&self) -> Result<Transaction<'static, Sqlite>> {
        self.inner
            .writer
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(refused("beginning a transaction"))
    }

    /// Enqueues `items` into `queue` on `conn`, inside the caller's own
    /// transaction: the items exist if and only if that transaction
    /// commits, together with whatever else it wrote.
    ///
    /// ```
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// use leaseq_core::{Backend, NewItem, QueueName};
    /// use leaseq_sqlite::{SqliteBackend, SqliteOptions};
    /// let backend = SqliteBackend::connect("sqlite::memory:", SqliteOptions::new()).await?;
    /// sqlx::query("CREATE TABLE orders (id INTEGER PRIMARY KEY)").execute(backend.pool()).await?;
    /// let queue = QueueName::new("emails")?;
    ///
    /// let mut tx = backend.begin().await?;
    /// sqlx::query("INSERT INTO orders (id) VALUES (42)").execute(&mut *tx).await?;
    /// backend.enqueue_in(&mut tx, &queue, vec![NewItem::new("order 42 placed")]).await?;
    /// tx.commit().await?; // the order and its job, or neither
    /// assert_eq!(backend.stats(&queue).await?.ready, 1);
    /// # Ok(()) }
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
    /// #     .block_on(demo()).unwrap();
    /// ```
    ///
    /// - Best on a transaction from [`SqliteBackend::begin`]. A transaction
    ///   on a connection of the application's own must write to the same
    ///   file and should begin with `BEGIN IMMEDIATE`; while it is open the
    ///   backend's own writes wait for the file's write lock, up to the
    ///   busy timeout, and then fail with `Unavailable`.
    /// - Input is checked as [`leaseq_core::Backend::enqueue`] checks it,
    ///   before anything is sent.
    /// - Workers of this process are woken at once and find the items when
    ///   the transaction has committed; other processes within their poll
    ///   interval.
    /// - Ids are spent even when the transaction rolls back, never reused.
    /// - No [`leaseq_core::events::EventKind::Enqueued`] event is sent for
    ///   the items: the backend does not see the caller's commit, and an
    ///   event for a transaction that rolls back would report a job that
    ///   never existed.
    pub async fn enqueue_in(
        &self,
        conn: &mut SqliteConnection,
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
