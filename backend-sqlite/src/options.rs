//! What a [`crate::SqliteBackend`] is configured with, besides its file.

use std::time::Duration;

use leaseq_core::Bounds;

/// How hard a commit works to reach the disk: SQLite's `synchronous`
/// setting (the journal is always WAL).
///
/// Both levels survive a crash of the process, or of every process using
/// the file: a transaction has been written to the WAL file (into the
/// operating system's cache) before its call returns, and the next opener
/// replays it. A file-backed backend therefore reports itself
/// [`leaseq_core::Capabilities::durable`] at either level (`sqlite::memory:`
/// never does). The levels differ only on a power failure or an operating
/// system crash, when what is in the cache but not yet on the disk is gone:
///
/// | level | a call that returned, after a power failure | the file |
/// |---|---|---|
/// | [`Durability::Full`] | kept: every commit is on the disk before the call returns | intact |
/// | [`Durability::Normal`] | the transactions committed since the last checkpoint may be rolled back | intact: never corrupt, opens at an earlier consistent point |
///
/// With `Normal`, SQLite syncs the WAL only when it checkpoints it into
/// the database file: automatically once the WAL holds 1,000 pages
/// (SQLite's default `wal_autocheckpoint`, about 4 MiB with 4 KiB pages),
/// and when the last connection to the file closes. Everything committed
/// before the last checkpoint is kept; any transaction after it may be
/// rolled back, newest first, as a whole: an enqueued batch disappears
/// (its producer was told it was written), an acked item comes back as
/// it was before the ack (leased, so it is reaped when its lease ends and
/// run again), and a claim, release or redrive is undone. What survives
/// is always a state the queue was in at some instant, so every
/// invariant holds on reopening; only recent history is lost.
///
/// Both levels assume storage that honours `fsync` (a disk or controller
/// that acknowledges writes it has only cached can lose commits under
/// `Full` too).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Durability {
    /// `synchronous=FULL` (the default): every commit waits for the WAL to
    /// reach the disk (an `fsync` per transaction). A call that returned
    /// survives a power failure.
    #[default]
    Full,
    /// `synchronous=NORMAL`: the WAL is synced only at checkpoints, so
    /// commits do not wait for the disk. It survives a crash of any
    /// process like `Full`, and the file is never corrupted, but a power
    /// failure or an operating system crash may roll back the transactions
    /// committed since the last checkpoint (see the table above).
    Normal,
}

/// Options for [`crate::SqliteBackend`], built with chained setters.
///
/// ```
/// use leaseq_sqlite::{Durability, SqliteOptions};
/// use std::time::Duration;
/// let options = SqliteOptions::new()
///     .durability(Durability::Normal)
///     .busy_timeout(Duration::from_secs(10))
///     .poll_interval(Duration::from_millis(200));
/// assert_eq!(options.durability_level(), Durability::Normal);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SqliteOptions {
    pub(crate) durability: Durability,
    pub(crate) busy_timeout: Duration,
    pub(crate) readers: u32,
    pub(crate) migrate_on_connect: bool,
    pub(crate) poll_interval: Duration,
    pub(crate) acquire_timeout: Duration,
    pub(crate) limits: Bounds,
    pub(crate) test_hooks: bool,
}

impl SqliteOptions {
    /// The default of [`SqliteOptions::poll_interval`]: how late, at most,
    /// an idle worker sees work that another process enqueued.
    pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_millis(250);

    /// [`Durability::Full`], a 5 s busy timeout, 4 reader connections,
    /// migrations on connect, a 250 ms poll across processes, a 30 s wait
    /// for a connection and the default limits.
    pub fn new() -> Self {
        SqliteOptions {
            durability: Durability::Full,
            busy_timeout: Duration::from_secs(5),
            readers: 4,
            migrate_on_connect: true,
            poll_interval: Self::DEFAULT_POLL_INTERVAL,
            acquire_timeout: Duration::from_secs(30),
            limits: Bounds::default(),
            test_hooks: false,
        }
    }

    /// What a commit guarantees on power failure; see [`Durability`].
    #[must_use]
    pub fn durability(mut self, durability: Durability) -> Self {
        self.durability = durability;
        self
    }

    /// How long a statement waits for a lock another process (or a
    /// checkpoint) holds before it fails with
    /// [`leaseq_core::Error::Unavailable`]; nothing is applied then, and
    /// the call may be sent again.
    #[must_use]
    pub fn busy_timeout(mut self, timeout: Duration) -> Self {
        self.busy_timeout = timeout;
        self
    }

    /// Connections for reads (stats, peek, item, clock), at least 1. All
    /// writes of one backend share one more connection: SQLite has one
    /// writer per file, so more would only wait on each other.
    #[must_use]
    pub fn readers(mut self, n: u32) -> Self {
        self.readers = n.max(1);
        self
    }

    /// Whether connecting runs the migrations (default true). With them
    /// off, connecting neither creates a missing file nor accepts one
    /// without the queue's tables ([`leaseq_core::Error::InvalidInput`]).
    #[must_use]
    pub fn migrate_on_connect(mut self, yes: bool) -> Self {
        self.migrate_on_connect = yes;
        self
    }

    /// The longest an idle worker waits between claims when no wake-up
    /// arrives. Work enqueued by this process (any handle on the same file)
    /// wakes workers at once; work enqueued by another process is seen
    /// within this interval.
    #[must_use]
    pub fn poll_interval(mut self, every: Duration) -> Self {
        self.poll_interval = every.max(Duration::from_millis(1));
        self
    }

    /// How long an operation waits for a free connection of this backend
    /// before it fails with [`leaseq_core::Error::Unavailable`].
    #[must_use]
    pub fn acquire_timeout(mut self, timeout: Duration) -> Self {
        self.acquire_timeout = timeout;
        self
    }

    /// The largest payload accepted, in bytes.
    #[must_use]
    pub fn max_payload_bytes(mut self, bytes: usize) -> Self {
        self.limits.max_payload_bytes = bytes;
        self
    }

    /// Turns on [`leaseq_core::testing::TestHooks`] for test suites (off by default:
    /// hooks expire live leases and plant corrupt rows).
    #[must_use]
    pub fn test_hooks(mut self, on: bool) -> Self {
        self.test_hooks = on;
        self
    }

    /// The durability as set.
    pub fn durability_level(&self) -> Durability {
        self.durability
    }
}

impl Default for SqliteOptions {
    fn default() -> Self {
        Self::new()
    }
}
