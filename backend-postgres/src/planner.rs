//! The planner's row count for the items table, kept near the truth.
//!
//! Every claim plan rests on how many rows PostgreSQL believes the table
//! holds (`pg_class.reltuples`), which only `ANALYZE` (or autovacuum's) and
//! `VACUUM` set. A `VACUUM` of an emptied queue table records about no rows.
//! When a burst then fills it and nothing analyzes it (autovacuum off, or
//! not yet come round, which takes up to `autovacuum_naptime`), the planner
//! takes the Ready set for one row, and every claim reads and sorts all of
//! it: 100,000 Ready items drained at under 1,000 a second instead of about
//! 20,000 (2-core machine, `leaseq-load --runtime worker -c 4`). So the
//! reaper, at most once per [`crate::PgOptions::planner_check`], compares
//! that belief with the live rows the server's statistics count, and
//! analyzes the table when the belief is far below.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::PgBackend;

/// How far below the live rows the planner's count may fall before the
/// table is analyzed: a quarter.
const UNDERCOUNT: f64 = 4.0;

/// Below this many live rows any plan is cheap: never analyzed for them.
const FLOOR: f64 = 1_000.0;

/// When the reaper last looked (shared by the backend's clones).
#[derive(Debug, Default)]
pub(crate) struct PlannerWatch {
    last: Mutex<Option<Instant>>,
}

impl PlannerWatch {
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

impl PgBackend {
    /// Analyzes the items table when the planner's row count is far below
    /// the live rows, at most once per [`crate::PgOptions::planner_check`].
    /// Never fails the caller: a failure is logged and the next look
    /// tries again.
    pub(crate) async fn keep_planner_informed(&self) {
        let inner = &self.inner;
        if !inner
            .planner
            .due(inner.options.planner_check, Instant::now())
        {
            return;
        }
        let table = &inner.sql.items_table;
        let counts = sqlx::query_as::<_, (f64, f64)>(
            "SELECT c.reltuples::float8, coalesce(s.n_live_tup, 0)::float8 \
             FROM pg_class c LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid \
             WHERE c.oid = to_regclass($1)",
        )
        .bind(table)
        .fetch_optional(&inner.pool)
        .await;
        let (believed, live) = match counts {
            Ok(Some(counts)) => counts,
            Ok(None) => return,
            Err(e) => {
                tracing::debug!(error = %e, "leaseq-postgres: reading the planner's row count failed");
                return;
            }
        };
        if !undercounted(believed, live) {
            return;
        }
        tracing::info!(table = %table, believed, live,
            "leaseq-postgres: the planner's row count is far below the live rows; analyzing the table");
        if let Err(e) = sqlx::query(&format!("ANALYZE {table}"))
            .execute(&inner.pool)
            .await
        {
            tracing::warn!(table = %table, error = %e,
                "leaseq-postgres: ANALYZE failed; claims may read the whole Ready set until the table is analyzed");
        }
    }
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
        let w = PlannerWatch::default();
        let t = Instant::now();
        let every = Duration::from_secs(10);
        assert!(w.due(every, t));
        assert!(!w.due(every, t + Duration::from_secs(9)));
        assert!(w.due(every, t + Duration::from_secs(10)));
        assert!(w.due(Duration::ZERO, t + Duration::from_secs(10)));
    }
}
