//! The backend handle: its pool, its schema, connecting and migrating.

use std::fmt;
use std::sync::Arc;

use leaseq_core::{Error, Result};
use sqlx::migrate::Migrator;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{Connection, PgConnection, PgPool};

use crate::notify::Wakeups;
use crate::rows::{db, refused};
use crate::sql::Sql;
use crate::PgOptions;

/// The embedded migrations. They create objects without a schema name and
/// run with the configured schema first on the `search_path`.
static MIGRATOR: Migrator = sqlx::migrate!("./migrations");

/// A leaseq [`leaseq_core::Backend`] on PostgreSQL. Cheap to clone; clones
/// share one pool and one `LISTEN` connection.
#[derive(Clone)]
pub struct PgBackend {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) pool: PgPool,
    pub(crate) sql: Sql,
    pub(crate) options: PgOptions,
    /// The `LISTEN/NOTIFY` channel of this schema.
    pub(crate) channel: String,
    pub(crate) wakeups: Wakeups,
    /// Statements run per queue, counted only with test hooks on.
    pub(crate) steps: leaseq_core::testing::StepCounter,
    /// The test hooks' statements (beside the hooks, apart from `sql`).
    pub(crate) hook_sql: crate::hooks::HookSql,
    /// The Control group's statements (beside it).
    pub(crate) control_sql: crate::control::ControlSql,
    /// The History group's statements (beside it).
    pub(crate) history_sql: crate::history::HistorySql,
    /// The WorkerRegistry group's statements (beside it).
    pub(crate) registry_sql: crate::registry::RegistrySql,
    /// When the reaper last looked at its tables, and its vacuum.
    pub(crate) upkeep: crate::upkeep::Upkeep,
    /// The gate renewals of the queues this handle's streams follow.
    pub(crate) events: crate::events::EventFeeds,
}

impl fmt::Debug for PgBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PgBackend")
            .field("schema", &self.inner.options.schema)
            .field("pool_size", &self.inner.pool.size())
            .finish_non_exhaustive()
    }
}

impl PgBackend {
    /// Connects to the database at `url` (e.g.
    /// `postgres://user@host:5432/db`) with a pool of its own, and runs the
    /// migrations unless [`PgOptions::migrate_on_connect`] is off.
    ///
    /// A bad URL or schema name is [`Error::InvalidInput`]; a server that
    /// cannot be reached (or refuses the connection) is
    /// [`Error::Unavailable`]; a failed migration is [`Error::OutcomeUnknown`].
    pub async fn connect(url: &str, options: PgOptions) -> Result<Self> {
        let connect: PgConnectOptions = url
            .parse()
            .map_err(|e| Error::invalid(format!("database url: {e}")))?;
        Self::connect_with(connect, options).await
    }

    /// Like [`PgBackend::connect`], from parsed connect options.
    pub async fn connect_with(connect: PgConnectOptions, options: PgOptions) -> Result<Self> {
        options.validate()?;
        let mut connect = connect;
        if let Some(name) = &options.application_name {
            connect = connect.application_name(name);
        }
        // One direct connection first: the pool retries a failed connect
        // until its acquire timeout and then reports only that it timed
        // out, hiding the cause (refused, unknown database, bad password).
        let probe = tokio::time::timeout(
            options.acquire_timeout,
            PgConnection::connect_with(&connect),
        );
        match probe.await {
            Ok(Ok(conn)) => {
                // Closing is courtesy; the connect already proved the server.
                let _ = conn.close().await;
            }
            Ok(Err(e)) => return Err(refused("connecting")(e)),
            Err(_) => return Err(refused("connecting")(sqlx::Error::PoolTimedOut)),
        }
        let ping_after = options.ping_idle_after;
        let pool = PgPoolOptions::new()
            .max_connections(options.max_connections)
            .acquire_timeout(options.acquire_timeout)
            // sqlx would ping before every acquire: a round trip per
            // statement. Only a connection idle a while is worth a ping.
            .test_before_acquire(false)
            .before_acquire(move |conn, meta| {
                Box::pin(async move {
                    if meta.idle_for < ping_after {
                        return Ok(true);
                    }
                    match conn.ping().await {
                        Ok(()) => Ok(true),
                        Err(e) => {
                            // Refused quietly: the pool closes it and takes another.
                            tracing::debug!(error = %e, "leaseq-postgres: idle connection failed its ping");
                            Ok(false)
                        }
                    }
                })
            })
            .connect_with(connect)
            .await
            .map_err(refused("connecting"))?;
        Self::from_pool(pool, options).await
    }

    /// A backend on an existing pool (its size, names and timeouts are the
    /// pool's). Runs the migrations unless
    /// [`PgOptions::migrate_on_connect`] is off.
    pub async fn from_pool(pool: PgPool, options: PgOptions) -> Result<Self> {
        options.validate()?;
        let channel = format!("leaseq_{}", options.schema);
        let backend = PgBackend {
            inner: Arc::new(Inner {
                sql: Sql::new(&options.schema),
                hook_sql: crate::hooks::HookSql::new(&options.schema),
                control_sql: crate::control::ControlSql::new(&options.schema),
                history_sql: crate::history::HistorySql::new(&options.schema),
                registry_sql: crate::registry::RegistrySql::new(&options.schema),
                wakeups: Wakeups::new(pool.clone(), channel.clone(), options.poll_interval),
                channel,
                pool,
                steps: leaseq_core::testing::StepCounter::new(options.test_hooks),
                upkeep: crate::upkeep::Upkeep::default(),
                events: crate::events::EventFeeds::default(),
                options,
            }),
        };
        if backend.inner.options.migrate_on_connect {
            backend.migrate().await?;
        }
        Ok(backend)
    }

    /// Creates the schema if needed and applies the migrations not yet
    /// applied in it. Running it again is a no-op. Any number of processes
    /// may run it at once: they take turns on an advisory lock per schema
    /// (and sqlx's own per database), on a dedicated connection that is
    /// closed afterwards, so the lock never outlives the call.
    pub async fn migrate(&self) -> Result<()> {
        let schema = &self.inner.options.schema;
        let mut conn = PgConnection::connect_with(&self.inner.pool.connect_options())
            .await
            .map_err(refused("connecting to migrate"))?;
        let result = migrate_on(&mut conn, schema).await;
        // Closing ends the session, which releases the advisory lock even
        // when a step failed.
        let _ = conn.close().await;
        result
    }

    /// The pool (for health checks and metrics).
    pub fn pool(&self) -> &PgPool {
        &self.inner.pool
    }

    /// The schema holding the queue table.
    pub fn schema(&self) -> &str {
        &self.inner.options.schema
    }
}

async fn migrate_on(conn: &mut PgConnection, schema: &str) -> Result<()> {
    sqlx::query("SELECT pg_advisory_lock(hashtextextended($1, 0))")
        .bind(format!("leaseq-migrate:{schema}"))
        .execute(&mut *conn)
        .await
        .map_err(db("locking for migration"))?;
    sqlx::query(&format!("CREATE SCHEMA IF NOT EXISTS \"{schema}\""))
        .execute(&mut *conn)
        .await
        .map_err(db("creating the schema"))?;
    sqlx::query("SELECT set_config('search_path', $1, false)")
        .bind(format!("\"{schema}\""))
        .execute(&mut *conn)
        .await
        .map_err(db("setting the search path"))?;
    MIGRATOR
        .run_direct(&mut *conn)
        .await
        .map_err(|e| migration_error(e, &format!("schema {schema:?}")))?;
    Ok(())
}

/// A migration that failed: a store another build migrated is refused
/// ([`Error::migrated_by_another_build`]) before anything runs; anything
/// else is [`Error::OutcomeUnknown`].
pub(crate) fn migration_error(e: sqlx::migrate::MigrateError, store: &str) -> Error {
    use sqlx::migrate::MigrateError;
    match e {
        MigrateError::VersionMissing(v) => Error::migrated_by_another_build(store, v, true, e),
        MigrateError::VersionMismatch(v) => Error::migrated_by_another_build(store, v, false, e),
        e => Error::outcome_unknown("postgres: running migrations", e),
    }
}
