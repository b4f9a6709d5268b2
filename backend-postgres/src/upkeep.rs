//! The reaper's upkeep of the churned tables: the planner's row count kept
//! near the truth, and dead rows vacuumed before every walk pays for them.
//!
//! Every claim plan rests on how many rows PostgreSQL believes the table
//! holds (`pg_class.reltuples`), which only `ANALYZE` (or autovacuum's) and
//! `VACUUM` set. A `VACUUM` of an emptied queue table records about no rows.
//! When a burst then fills it and nothing analyzes it (autovacuum off, or
//! not yet come round, which takes up to `autovacuum_naptime`), the planner
//! takes the Ready set for one row, and every claim reads and sorts all of
//! it: 100,000 Ready items drained at under 1,000 a second instead of about
//! 20,000 (2-core machine, `leaseq-load --runtime worker -c 4`).
//!
//! Every item is inserted, updated and deleted within seconds, and each
//! claim leaves a dead entry at the head of the Ready index, where every
//! later claim walks over it until a vacuum removes it. With autovacuum off
//! or behind, the walk grows with everything the queue ever held: after
//! five 20,000-job drains an empty queue's claim read 880 index pages.
//!
//! So the reaper, at most once per [`crate::PgOptions::planner_check`],
//! reads the server's statistics for the items and kept-items tables: it
//! analyzes the items table when the planner's count is far below the live
//! rows, and vacuums a table that holds [`crate::PgOptions::vacuum_after`]
//! dead rows or more (in a task of its own, so the reap does not wait, on
//! a connection of its own without a statement timeout; `SKIP_LOCKED`, so
//! it never queues behind autovacuum or another process's vacuum; only a
//! table this role owns, as `VACUUM` requires).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sqlx::postgres::PgConnectOptions;
use sqlx::{Connection, PgConnection};

use crate::PgBackend;

/// How far below the live rows the planner's count may fall before the
/// table is analyzed: a quarter.
const UNDERCOUNT: f64 = 4.0;

/// Below this many live rows any plan is cheap: never analyzed for them.
const FLOOR: f64 = 1_000.0;

/// When the reaper last looked, and whether a vacuum it started still
/// runs (shared by the backend's clones).
#[derive(Debug, Default)]
pub(crate) struct Upkeep {
    last: Mutex<Option<Instant>>,
    vacuuming: Arc<AtomicBool>,
}

impl Upkeep {
    /// Whether a look is due at `now`; if so, it is taken now.
    fn due(&self, every: Duration, now: Instant) -> bool {
        let Ok(mut last) = self.last.lock() else {
            return false;
        };
        match *last {
            Some(at) if now.duration_since(at) < every => false,
            _ => {
                *last = Some(now);
                true
            }
        }
    }
}

/// Whether the planner's `believed` row count (`-1`: never counted) is far
/// enough below the `live` rows to analyze.
fn undercounted(believed: f64, live: f64) -> bool {
    live > UNDERCOUNT * believed.max(FLOOR)
}

/// One table as the server's statistics see it.
#[derive(Debug, sqlx::FromRow)]
struct TableLook {
    /// Schema-qualified and quoted, as the statements name it.
    name: String,
    believed: f64,
    live: f64,
    dead: i64,
    /// Whether this role may vacuum and analyze it.
    owned: bool,
}

impl PgBackend {
    /// The reaper's look at its tables, at most once per
    /// [`crate::PgOptions::planner_check`]: analyzes the items table when
    /// the planner's row count is far below the live rows, and starts a
    /// vacuum of each table holding [`crate::PgOptions::vacuum_after`] dead
    /// rows. Never fails the caller: a failure is logged and the next look
    /// tries again.
    pub(crate) async fn keep_tables_healthy(&self) {
        let inner = &self.inner;
        if !inner
            .upkeep
            .due(inner.options.planner_check, Instant::now())
        {
            return;
        }
        let items = &inner.sql.items_table;
        let finished = crate::history::finished_table(&inner.options.schema);
        let looks = sqlx::query_as::<_, TableLook>(
            "SELECT t.name, c.reltuples::float8 AS believed, \
                    coalesce(s.n_live_tup, 0)::float8 AS live, \
                    coalesce(s.n_dead_tup, 0) AS dead, \
                    pg_has_role(c.relowner, 'USAGE') AS owned \
             FROM unnest($1::text[]) AS t(name) \
             JOIN pg_class c ON c.oid = to_regclass(t.name) \
             LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid",
        )
        .bind([items.clone(), finished])
        .fetch_all(&inner.pool)
        .await;
        let looks = match looks {
            Ok(looks) => looks,
            Err(e) => {
                tracing::debug!(error = %e, "leaseq-postgres: reading the tables' statistics failed");
                return;
            }
        };
        for look in &looks {
            if &look.name == items && look.owned && undercounted(look.believed, look.live) {
                self.analyze(look).await;
            }
        }
        if let Some(bound) = inner.options.vacuum_after {
            let due: Vec<&TableLook> = looks
                .iter()
                .filter(|l| l.owned && u64::try_from(l.dead).unwrap_or(0) >= bound)
                .collect();
            self.start_vacuum(&due);
        }
    }

    async fn analyze(&self, look: &TableLook) {
        let table = &look.name;
        tracing::info!(table = %table, believed = look.believed, live = look.live,
            "leaseq-postgres: the planner's row count is far below the live rows; analyzing the table");
        if let Err(e) = sqlx::query(&format!("ANALYZE {table}"))
            .execute(&self.inner.pool)
            .await
        {
            tracing::warn!(table = %table, error = %e,
                "leaseq-postgres: ANALYZE failed; claims may read the whole Ready set until the table is analyzed");
        }
    }

    /// Vacuums `tables` one after the other in a task of its own, unless
    /// one this handle started still runs.
    fn start_vacuum(&self, tables: &[&TableLook]) {
        if tables.is_empty() {
            return;
        }
        let running = Arc::clone(&self.inner.upkeep.vacuuming);
        if running.swap(true, Ordering::AcqRel) {
            return;
        }
        // A connection of its own, without the pool's statement timeout
        // (a vacuum cut short by one would redo its work at every look),
        // and taking none of the pool's slots.
        let connect = (*self.inner.pool.connect_options())
            .clone()
            .options([("statement_timeout", "0")]);
        let names: Vec<(String, i64)> = tables.iter().map(|l| (l.name.clone(), l.dead)).collect();
        tokio::spawn(async move {
            vacuum(connect, names).await;
            running.store(false, Ordering::Release);
        });
    }
}

/// Vacuums each of `tables` (name, dead rows counted) on a connection of
/// its own; a failure is logged, and the next look tries again.
async fn vacuum(connect: PgConnectOptions, tables: Vec<(String, i64)>) {
    let mut conn = match PgConnection::connect_with(&connect).await {
        Ok(conn) => conn,
        Err(e) => {
            tracing::warn!(error = %e, "leaseq-postgres: no connection to vacuum with");
            return;
        }
    };
    for (table, dead) in tables {
        tracing::debug!(table = %table, dead, "leaseq-postgres: vacuuming a table the queue churned");
        if let Err(e) = sqlx::query(&format!("VACUUM (SKIP_LOCKED) {table}"))
            .execute(&mut conn)
            .await
        {
            tracing::warn!(table = %table, error = %e,
                "leaseq-postgres: VACUUM failed; claims and reaps walk the dead rows until a vacuum runs");
        }
    }
    let _ = conn.close().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn analyzes_only_a_count_far_below_the_live_rows() {
        assert!(undercounted(1.0, 100_000.0));
        assert!(undercounted(-1.0, 5_000.0));
        assert!(!undercounted(-1.0, 3_000.0));
        assert!(!undercounted(30_000.0, 100_000.0));
        assert!(undercounted(20_000.0, 100_000.0));
    }

    #[test]
    fn a_look_is_due_once_per_interval() {
        let w = Upkeep::default();
        let t = Instant::now();
        let every = Duration::from_secs(10);
        assert!(w.due(every, t));
        assert!(!w.due(every, t + Duration::from_secs(9)));
        assert!(w.due(every, t + Duration::from_secs(10)));
        assert!(w.due(Duration::ZERO, t + Duration::from_secs(10)));
    }
}
