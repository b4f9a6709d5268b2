//! The backend handle: its connections, opening the file and migrating.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use leaseq_core::testing::StepCounter;
use leaseq_core::{Error, QueueName, Result};
use sqlx::migrate::Migrator;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use sqlx::Connection;

use crate::events::{DbEvents, Sender};
use crate::notify::Wakeups;
use crate::rows::{certainly_not_applied, col, db, refused};
use crate::{Durability, SqliteOptions};

/// The embedded migrations.
static MIGRATOR: Migrator = sqlx::migrate!("./migrations");

/// The embedded migrations, for tests that build a bare database.
#[cfg(test)]
pub(crate) fn migrator() -> &'static Migrator {
    &MIGRATOR
}

/// How often opening a file retries while another process holds a lock
/// the busy timeout cannot wait on (switching a new file to WAL).
const OPEN_TRIES: u32 = 50;

/// A leaseq [`leaseq_core::Backend`] on an SQLite file. Cheap to clone;
/// clones share one writer connection and one pool of readers.
#[derive(Clone)]
pub struct SqliteBackend {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    /// One connection: every write of this backend goes through it, one at
    /// a time, as SQLite writes a file anyway.
    pub(crate) writer: SqlitePool,
    /// Reads; the writer itself for an in-memory database.
    pub(crate) reader: SqlitePool,
    pub(crate) options: SqliteOptions,
    pub(crate) in_memory: bool,
    pub(crate) wakeups: Wakeups,
    /// Job events, shared with every handle on the database in this process.
    pub(crate) events: Arc<DbEvents>,
    /// Statements run per queue, counted only with test hooks on.
    pub(crate) steps: StepCounter,
}

impl fmt::Debug for SqliteBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqliteBackend")
            .field("in_memory", &self.inner.in_memory)
            .field("durability", &self.inner.options.durability)
            .field("readers", &self.inner.reader.size())
            .finish_non_exhaustive()
    }
}

impl SqliteBackend {
    /// Opens the database `url` names, creating the file if it is missing,
    /// and runs the migrations unless [`SqliteOptions::migrate_on_connect`]
    /// is off.
    ///
    /// - `sqlite://path/to/jobs.db` (relative) or `sqlite:///var/jobs.db`
    ///   (absolute): a file, in WAL mode, shared by every process that
    ///   opens it.
    /// - `sqlite::memory:`: a private in-memory database for this handle
    ///   and its clones, gone when the last clone is dropped.
    ///
    /// A malformed URL is [`Error::InvalidInput`]; a file that cannot be
    /// opened, or that is not a database, is [`Error::OutcomeUnknown`]; a lock
    /// held past the busy timeout is [`Error::Unavailable`].
    pub async fn connect(url: &str, options: SqliteOptions) -> Result<Self> {
        let connect: SqliteConnectOptions = url
            .parse()
            .map_err(|e| Error::invalid(format!("database url {url:?}: {e}")))?;
        Self::connect_with(connect, options).await
    }

    /// Like [`SqliteBackend::connect`], from parsed connect options. The
    /// journal mode, `synchronous`, the busy timeout and file creation are
    /// set from `options`.
    pub async fn connect_with(
        connect: SqliteConnectOptions,
        options: SqliteOptions,
    ) -> Result<Self> {
        let name = connect.get_filename().display().to_string();
        let in_memory = names_memory(&name);
        if !in_memory {
            check_path(connect.get_filename(), options.migrate_on_connect)?;
        }
        // Without migrations a missing file is a mistake (a typo in the
        // path), not something to create empty.
        let connect = connect
            .create_if_missing(options.migrate_on_connect)
            .busy_timeout(options.busy_timeout)
            .foreign_keys(false)
            .synchronous(match options.durability {
                Durability::Full => SqliteSynchronous::Full,
                Durability::Normal => SqliteSynchronous::Normal,
            });
        let (writer, reader) = if in_memory {
            // One connection keeps the database alive and is its only door.
            let pool = pool_options(&options)
                .max_connections(1)
                .min_connections(1)
                .idle_timeout(None)
                .max_lifetime(None)
                .connect_with(connect)
                .await
                .map_err(db("opening the in-memory database"))?;
            (pool.clone(), pool)
        } else {
            let writer = open_writer(&connect, &options).await?;
            // WAL is a property of the file now: readers need not set it.
            let reader = pool_options(&options)
                .max_connections(options.readers)
                .connect_lazy_with(connect);
            (writer, reader)
        };
        let db_name = if in_memory {
            // Each in-memory database is its own: never share wake-ups.
            format!("memory:{:p}", Arc::as_ptr(&Arc::new(())))
        } else {
            std::fs::canonicalize(&name)
                .map(|p| p.display().to_string())
                .unwrap_or_else(|_| name.clone())
        };
        let backend = SqliteBackend {
            inner: Arc::new(Inner {
                writer,
                reader,
                in_memory,
                events: DbEvents::of(&db_name),
                wakeups: Wakeups::new(db_name, options.poll_interval),
                steps: StepCounter::new(options.test_hooks),
                options,
            }),
        };
        if backend.inner.options.migrate_on_connect {
            backend.migrate().await?;
        } else {
            backend.check_schema(&name).await?;
        }
        Ok(backend)
    }

    /// Applies the migrations not yet applied. Running it again is a no-op.
    /// Any number of processes may run it at once: it runs inside one
    /// `BEGIN IMMEDIATE` transaction, so they take turns on the file's
    /// write lock and each later one finds the work done.
    pub async fn migrate(&self) -> Result<()> {
        let mut conn = self
            .inner
            .writer
            .acquire()
            .await
            .map_err(refused("acquiring a connection to migrate"))?;
        let mut tx = conn
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(db("locking the file to migrate"))?;
        MIGRATOR
            .run_direct(&mut *tx)
            .await
            .map_err(|e| migration_error(e, "the database"))?;
        tx.commit().await.map_err(db("committing the migrations"))
    }

    /// Fails clearly when the file has no queue table (migrations off, on a
    /// file nobody migrated).
    async fn check_schema(&self, name: &str) -> Result<()> {
        let found = sqlx::query(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'leaseq_items'",
        )
        .fetch_optional(&self.inner.writer)
        .await
        .map_err(db("looking for the queue table"))?;
        match found {
            Some(_) => Ok(()),
            None => Err(Error::invalid(format!(
                "sqlite: {name} holds no leaseq tables: run `leaseq migrate`, open it \
                 once with migrations on (the default) or call SqliteBackend::migrate"
            ))),
        }
    }

    /// Checks the file's structure with SQLite's `PRAGMA quick_check` (it
    /// reads the whole file: run it after restoring a copy, not per call).
    /// A damaged file is [`Error::Corrupt`] with SQLite's own report.
    pub async fn verify(&self) -> Result<()> {
        let rows = sqlx::query("PRAGMA quick_check")
            .fetch_all(&self.inner.writer)
            .await
            .map_err(db("checking the file"))?;
        let rows: Vec<String> = rows
            .iter()
            .map(|r| col::<String>(r, 0))
            .collect::<Result<_>>()?;
        let report: Vec<String> = rows
            .iter()
            .flat_map(|r| r.lines())
            .filter(|l| !l.starts_with("***"))
            .map(str::to_owned)
            .collect();
        if report.is_empty() {
            return Err(Error::Corrupt {
                what: "sqlite: the database file is damaged".into(),
            });
        }
        if report.len() == 1 && report[0] == "ok" {
            return Ok(());
        }
        // SQLite lists up to 100 problems; the first few say enough.
        let shown: Vec<&str> = report.iter().take(4).map(String::as_str).collect();
        Err(Error::Corrupt {
            what: format!(
                "sqlite: the database file is damaged ({} problems): {}",
                report.len(),
                shown.join("; ")
            ),
        })
    }

    /// Writes a consistent copy of the database to `path` (SQLite's
    /// `VACUUM INTO`), while other connections go on reading and writing.
    /// This is how to back the file up: a plain file copy taken while
    /// writers run can be torn (see [`SqliteBackend::verify`]). `path`
    /// must not exist yet.
    pub async fn backup(&self, path: &std::path::Path) -> Result<()> {
        let target = path
            .to_str()
            .ok_or_else(|| Error::invalid(format!("backup path {path:?} is not UTF-8")))?;
        sqlx::query("VACUUM INTO ?1")
            .bind(target)
            .execute(&self.inner.reader)
            .await
            .map_err(db("writing a backup"))?;
        Ok(())
    }

    /// The writer's pool (one connection), for health checks.
    pub fn pool(&self) -> &SqlitePool {
        &self.inner.writer
    }

    /// Whether this is an in-memory database.
    pub fn is_in_memory(&self) -> bool {
        self.inner.in_memory
    }

    /// Closes every connection (checkpointing the WAL when this is the last
    /// connection to the file). Later calls fail with
    /// [`Error::Unavailable`].
    pub async fn close(&self) {
        self.inner.writer.close().await;
        self.inner.reader.close().await;
    }

    /// Before a write on `queues`: the sender of its events, holding the
    /// order lock, when a stream of one of them is open in this process
    /// (see [`crate::events`]); `None` otherwise, at the cost of one atomic
    /// load while no stream is open. Taken before the writer.
    pub(crate) async fn watch<'q>(
        &self,
        queues: impl IntoIterator<Item = &'q QueueName>,
    ) -> Option<Sender<'_>> {
        self.inner.events.watch(queues).await
    }

    /// The writer, for one statement on `queues` (counted for
    /// [`leaseq_core::testing::TestHooks::steps`] once per distinct queue).
    pub(crate) fn write_on<'a>(
        &self,
        queues: impl IntoIterator<Item = &'a QueueName>,
    ) -> &SqlitePool {
        self.count(queues);
        &self.inner.writer
    }

    /// A write transaction on `queue` (`BEGIN IMMEDIATE`: the file's write
    /// lock from its first statement), counted as one step; `what` names
    /// the failure.
    pub(crate) async fn begin_on(
        &self,
        queue: &QueueName,
        what: &'static str,
    ) -> Result<sqlx::Transaction<'static, sqlx::Sqlite>> {
        self.count([queue]);
        self.begin_write(what).await
    }

    /// A write transaction (`BEGIN IMMEDIATE`) on no queue; `what` names
    /// the failure.
    pub(crate) async fn begin_write(
        &self,
        what: &'static str,
    ) -> Result<sqlx::Transaction<'static, sqlx::Sqlite>> {
        self.inner
            .writer
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(db(what))
    }

    /// A reader, for one statement on `queue` (counted like writes).
    pub(crate) fn read_on(&self, queue: &QueueName) -> &SqlitePool {
        self.count([queue]);
        &self.inner.reader
    }

    /// Counts one step on each distinct queue of `queues`.
    pub(crate) fn count<'a>(&self, queues: impl IntoIterator<Item = &'a QueueName>) {
        if !self.inner.steps.is_enabled() {
            return;
        }
        let mut seen: Vec<&QueueName> = Vec::new();
        for q in queues {
            if !seen.contains(&q) {
                self.inner.steps.count(q);
                seen.push(q);
            }
        }
    }
}

/// The pool options every pool of this backend starts from: no ping
/// before an acquire, and [`close_orphaned_transaction`] on each release.
fn pool_options(options: &SqliteOptions) -> SqlitePoolOptions {
    SqlitePoolOptions::new()
        .test_before_acquire(false)
        .acquire_timeout(options.acquire_timeout)
        .after_release(|conn, _| Box::pin(close_orphaned_transaction(conn)))
}

/// Rolls back a transaction a connection still holds as it goes back to
/// its pool, so that no later statement runs inside it.
///
/// sqlx's `begin_with("BEGIN IMMEDIATE")` reads the connection's state in a
/// second round trip after the `BEGIN` has run: a call cancelled there (a
/// worker aborted, a timeout) drops the connection with the transaction
/// open and no `Transaction` to end it. On the one writer connection every
/// later write would then run inside it, never committed, holding the
/// file's write lock. A dropped `Transaction` queues its own rollback: the
/// ping waits behind it, so what is still open after the ping is an
/// orphan. One that will not roll back closes the connection.
async fn close_orphaned_transaction(
    conn: &mut sqlx::SqliteConnection,
) -> std::result::Result<bool, sqlx::Error> {
    use sqlx::TransactionManager as _;
    if !conn.is_in_transaction() {
        return Ok(true);
    }
    conn.ping().await?;
    if !conn.is_in_transaction() {
        return Ok(true);
    }
    tracing::warn!("leaseq-sqlite: rolling back a transaction a cancelled call left open");
    // Nested savepoints end one level per rollback; more than a few is
    // not a state this backend makes.
    for _ in 0..4 {
        sqlx::sqlite::SqliteTransactionManager::rollback(conn).await?;
        if !conn.is_in_transaction() {
            return Ok(true);
        }
    }
    Ok(false)
}

/// The writer's pool on a file, switched to WAL. Switching a new file
/// takes a lock the busy timeout does not wait on, so a process that
/// meets another one doing the same retries for a while.
async fn open_writer(
    connect: &SqliteConnectOptions,
    options: &SqliteOptions,
) -> Result<SqlitePool> {
    let connect = connect.clone().journal_mode(SqliteJournalMode::Wal);
    let mut tries = 0;
    loop {
        let opened = pool_options(options)
            .max_connections(1)
            .connect_with(connect.clone())
            .await;
        match opened {
            Ok(pool) => return Ok(pool),
            Err(e) if certainly_not_applied(&e) && tries < OPEN_TRIES => {
                tries += 1;
                tracing::debug!(error = %e, "leaseq-sqlite: file busy while opening; retrying");
                tokio::time::sleep(Duration::from_millis(20 * u64::from(tries.min(10)))).await;
            }
            Err(e) => return Err(db("opening the database file")(e)),
        }
    }
}

/// A missing file (when it may not be created) or a missing directory, as
/// [`Error::InvalidInput`] that says how to fix it, instead of SQLite's
/// "unable to open database file".
fn check_path(path: &std::path::Path, create: bool) -> Result<()> {
    if path.exists() {
        return Ok(());
    }
    if !create {
        return Err(Error::invalid(format!(
            "no database file at {}: create it, with its tables, by \
             `leaseq migrate --backend sqlite://{}` (or connect with migrations on, \
             as `leaseq::connect` does)",
            path.display(),
            path.display()
        )));
    }
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() && !dir.is_dir() => Err(Error::invalid(format!(
            "cannot create the database file {}: the directory {} does not exist",
            path.display(),
            dir.display()
        ))),
        _ => Ok(()),
    }
}

/// Whether a filename names an in-memory database: SQLite's `:memory:`
/// (private to one connection) or a `file:` URI in memory mode, as
/// `sqlite::memory:` becomes.
fn names_memory(name: &str) -> bool {
    name == ":memory:"
        || name.starts_with("file:sqlx-in-memory-")
        || (name.starts_with("file:") && name.contains("mode=memory"))
}

/// A migration that failed: a store another build migrated is refused
/// ([`Error::migrated_by_another_build`]) before anything runs; anything
/// else is [`Error::OutcomeUnknown`].
fn migration_error(e: sqlx::migrate::MigrateError, store: &str) -> Error {
    use sqlx::migrate::MigrateError;
    match e {
        MigrateError::VersionMissing(v) => Error::migrated_by_another_build(store, v, true, e),
        MigrateError::VersionMismatch(v) => Error::migrated_by_another_build(store, v, false, e),
        e => Error::outcome_unknown("sqlite: running migrations", e),
    }
}

#[cfg(test)]
mod tests {
    use super::names_memory;

    #[test]
    fn memory_names_are_recognised() {
        for name in [":memory:", "file:sqlx-in-memory-3", "file:x?mode=memory"] {
            assert!(names_memory(name), "{name}");
        }
        for name in ["jobs.db", "/tmp/memory.db", "file:jobs.db"] {
            assert!(!names_memory(name), "{name}");
        }
    }
}
