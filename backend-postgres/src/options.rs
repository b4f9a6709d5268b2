//! What a [`crate::PgBackend`] is configured with, besides its pool.

use std::time::Duration;

use leaseq_core::{Bounds, Error, Result};

/// Options for [`crate::PgBackend`], built with chained setters.
///
/// ```
/// use leaseq_postgres::PgOptions;
/// use std::time::Duration;
/// let options = PgOptions::new()
///     .schema("billing_jobs")
///     .max_connections(16)
///     .poll_interval(Duration::from_millis(500))
///     .migrate_on_connect(false);
/// assert_eq!(options.schema_name(), "billing_jobs");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PgOptions {
    pub(crate) schema: String,
    pub(crate) max_connections: u32,
    pub(crate) application_name: Option<String>,
    pub(crate) migrate_on_connect: bool,
    pub(crate) poll_interval: Duration,
    pub(crate) acquire_timeout: Duration,
    pub(crate) limits: Bounds,
    pub(crate) test_hooks: bool,
    pub(crate) stats_exact_up_to: u64,
    pub(crate) planner_check: Duration,
    pub(crate) ping_idle_after: Duration,
    pub(crate) durable_claims: bool,
    pub(crate) vacuum_after: Option<u64>,
}

impl PgOptions {
    /// The schema used when none is set.
    pub const DEFAULT_SCHEMA: &'static str = "leaseq";
    /// The longest schema name accepted, in bytes (it also names the
    /// `LISTEN` channel, which PostgreSQL caps at 63 bytes).
    pub const MAX_SCHEMA_LEN: usize = 48;
    /// The default of [`PgOptions::stats_exact_up_to`].
    pub const DEFAULT_STATS_EXACT_UP_TO: u64 = 10_000;
    /// The default of [`PgOptions::planner_check`].
    pub const DEFAULT_PLANNER_CHECK: Duration = Duration::from_secs(2);
    /// The default of [`PgOptions::ping_idle_after`].
    pub const DEFAULT_PING_IDLE_AFTER: Duration = Duration::from_secs(10);
    /// The default of [`PgOptions::vacuum_after`]: 10,000 dead rows.
    pub const DEFAULT_VACUUM_AFTER: u64 = 10_000;

    /// Schema `leaseq`, 10 connections, migrations on connect, a 1 s poll
    /// fallback, a 30 s pool acquire timeout, a ping for connections idle
    /// over 10 s and the default limits.
    pub fn new() -> Self {
        PgOptions {
            schema: Self::DEFAULT_SCHEMA.to_owned(),
            max_connections: 10,
            application_name: None,
            migrate_on_connect: true,
            poll_interval: Duration::from_secs(1),
            acquire_timeout: Duration::from_secs(30),
            limits: Bounds::default(),
            test_hooks: false,
            stats_exact_up_to: Self::DEFAULT_STATS_EXACT_UP_TO,
            planner_check: Self::DEFAULT_PLANNER_CHECK,
            ping_idle_after: Self::DEFAULT_PING_IDLE_AFTER,
            durable_claims: true,
            vacuum_after: Some(Self::DEFAULT_VACUUM_AFTER),
        }
    }

    /// The schema that holds the queue's table and its migration history.
    /// Two applications sharing a database use two schemas. Lowercase ASCII
    /// letters, digits and `_`, starting with a letter or `_`, at most
    /// [`PgOptions::MAX_SCHEMA_LEN`] bytes; checked on connect.
    #[must_use]
    pub fn schema(mut self, schema: impl Into<String>) -> Self {
        self.schema = schema.into();
        self
    }

    /// Pool size when the backend builds its own pool (at least 1). The
    /// wake-up listener takes one more connection.
    #[must_use]
    pub fn max_connections(mut self, n: u32) -> Self {
        self.max_connections = n.max(1);
        self
    }

    /// `application_name` of the pool's connections, as `pg_stat_activity`
    /// shows it (only when the backend builds its own pool).
    #[must_use]
    pub fn application_name(mut self, name: impl Into<String>) -> Self {
        self.application_name = Some(name.into());
        self
    }

    /// Whether connecting runs the migrations (default true). Turn it off to
    /// run [`crate::PgBackend::migrate`] yourself, e.g. at deploy time.
    #[must_use]
    pub fn migrate_on_connect(mut self, yes: bool) -> Self {
        self.migrate_on_connect = yes;
        self
    }

    /// The longest an idle worker waits between claims when no
    /// notification arrives: the poll that backs up `LISTEN/NOTIFY`.
    #[must_use]
    pub fn poll_interval(mut self, every: Duration) -> Self {
        self.poll_interval = every.max(Duration::from_millis(1));
        self
    }

    /// How long an operation waits for a free pool connection before it
    /// fails with a backend error (only when the backend builds its pool).
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

    /// The largest count [`leaseq_core::Backend::stats`] reports exactly,
    /// per state (default [`PgOptions::DEFAULT_STATS_EXACT_UP_TO`]). Each
    /// state is counted through its index up to one more than this; a state
    /// holding more is estimated from a sample of the table's pages (about
    /// 200 pages, all of them in a smaller table, where the estimate is the
    /// exact count; within about 10% for a queue that fills most of a big
    /// table), and never reported below this number plus one. So a call
    /// reads at most this many index entries per state and the sample,
    /// whatever the queue holds.
    #[must_use]
    pub fn stats_exact_up_to(mut self, n: u64) -> Self {
        self.stats_exact_up_to = n;
        self
    }

    /// How often, at most, the reaper looks at the server's statistics for
    /// its tables (default [`PgOptions::DEFAULT_PLANNER_CHECK`]; zero: every
    /// reap). It analyzes the items table when the planner's row count is
    /// under a quarter of the live rows the server counts (a count left
    /// behind by a `VACUUM` of an emptied table makes every claim read the
    /// whole Ready set once it fills), and vacuums a table holding
    /// [`PgOptions::vacuum_after`] dead rows; see "Operating a busy queue"
    /// in the crate docs. One cheap catalog read per look; `ANALYZE` or
    /// `VACUUM` only when a table needs it.
    #[must_use]
    pub fn planner_check(mut self, every: Duration) -> Self {
        self.planner_check = every;
        self
    }

    /// Pings a pooled connection before handing it out only when it sat
    /// idle longer than this (default [`PgOptions::DEFAULT_PING_IDLE_AFTER`];
    /// only when the backend builds its own pool). One that fails the ping
    /// is closed and another taken. sqlx's own default pings before every
    /// use, one more round trip per statement; a connection the server
    /// dropped more recently than this is found by the statement instead,
    /// which then fails as [`leaseq_core::Error::Unavailable`] or
    /// [`leaseq_core::Error::OutcomeUnknown`] (as it would if the
    /// connection dropped during the statement). `Duration::ZERO` pings
    /// before every use.
    #[must_use]
    pub fn ping_idle_after(mut self, idle: Duration) -> Self {
        self.ping_idle_after = idle;
        self
    }

    /// Whether a claim's commit waits for its WAL to reach disk (default
    /// true). Off, each claim runs in a transaction of its own with
    /// `SET LOCAL synchronous_commit = off`: the claim returns without
    /// waiting for a flush (one per claim that leased something), at the
    /// cost of two more round trips (`BEGIN` and `COMMIT`). Every other
    /// statement stays durable.
    ///
    /// What a server crash can then undo: a claim committed within the
    /// last moments before the crash (up to three times the server's
    /// `wal_writer_delay`, 600 ms by default) whose WAL was not yet
    /// flushed. Its items are Ready again, as if never claimed, with their
    /// attempt counts as before, and are handed out again as soon as the
    /// server is back (not after the lease expires): a job may run twice,
    /// as at-least-once delivery already allows, and the first holder's
    /// ack, extend or release fails with [`leaseq_core::Error::LeaseLost`].
    /// WAL is flushed in order, so once a later durable statement (an ack,
    /// an enqueue) has committed, the claims before it are on disk too. A
    /// crash of the client undoes nothing. Claims on a queue with
    /// throttles ([`leaseq_core::QueueLimits`]) stay durable.
    #[must_use]
    pub fn durable_claims(mut self, durable: bool) -> Self {
        self.durable_claims = durable;
        self
    }

    /// The reaper vacuums the items table, and the kept-items table, once
    /// the server counts this many dead rows in it (default
    /// [`PgOptions::DEFAULT_VACUUM_AFTER`]; `None`: never, leaving them to
    /// autovacuum or to you). Each claim and each ended lease leaves a dead
    /// index entry at the head of the queue's walk; until a vacuum removes
    /// them, every claim and reap steps over them all, so with autovacuum
    /// off or behind a queue slows down with everything it ever held.
    ///
    /// The vacuum (`VACUUM (SKIP_LOCKED)`) runs in a task of its own, one
    /// at a time per handle, on a connection of its own (outside the pool,
    /// with no statement timeout); it takes no lock that
    /// blocks the queue's statements and skips a table another vacuum
    /// (autovacuum's, or another process's) is working on. Only a table
    /// the connecting role owns is vacuumed, as `VACUUM` requires.
    #[must_use]
    pub fn vacuum_after(mut self, dead_rows: Option<u64>) -> Self {
        self.vacuum_after = dead_rows;
        self
    }

    /// The schema name as set.
    pub fn schema_name(&self) -> &str {
        &self.schema
    }

    /// Checks the schema name.
    pub(crate) fn validate(&self) -> Result<()> {
        check_schema(&self.schema)
    }
}

impl Default for PgOptions {
    fn default() -> Self {
        Self::new()
    }
}

fn check_schema(s: &str) -> Result<()> {
    let mut chars = s.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c == '_');
    let rest_ok = chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if !first_ok || !rest_ok || s.len() > PgOptions::MAX_SCHEMA_LEN || s.starts_with("pg_") {
        return Err(Error::invalid(format!(
            "schema {s:?} must be 1 to {} bytes of lowercase ASCII letters, digits and '_', \
             start with a letter or '_', and not start with 'pg_'",
            PgOptions::MAX_SCHEMA_LEN
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_names_are_checked() {
        for good in [
            "leaseq",
            "_x",
            "app_2",
            &"a".repeat(PgOptions::MAX_SCHEMA_LEN),
        ] {
            assert!(check_schema(good).is_ok(), "{good:?} rejected");
        }
        let long = "a".repeat(PgOptions::MAX_SCHEMA_LEN + 1);
        for bad in ["", "1abc", "Abc", "a-b", "a b", "a\"b", "pg_temp", &long] {
            assert!(check_schema(bad).is_err(), "{bad:?} accepted");
        }
    }
}
