//! Global queue limits on PostgreSQL: one row per limited queue in
//! `leaseq_queue_limits` (migration 0004). A claim on a limited queue runs
//! as one transaction that holds the queue's row lock: it reads the limits
//! and the server's clock, counts the queue's Leased rows (through the
//! leased partial index; expired leases not yet reaped count), claims what
//! [`Admission`] allows with the leases stamped by that same clock, and
//! counts the claim in the row's rate window. Claims on one limited queue
//! take turns on the row; the plain claim statement sees the row and hands
//! over (`Sql::claim`'s gate), so no claim escapes the count.
//!
//! The row also holds the queue's pause (`paused`, migration 0015, see
//! [`crate::control`]): a row may hold a pause without limits. Clearing
//! the limits clears their columns in one statement (never deleting the
//! row, which would take a pause set meanwhile with it) and then deletes
//! the row if it holds nothing.

use leaseq_core::queue_limits::{Admission, RateWindow, CONCURRENCY_RETRY};
use leaseq_core::{ClaimSpec, Claimed, QueueLimits, QueueName, Result};

use crate::rows::{col, db, refused};
use crate::PgBackend;

/// The limits table of `schema`.
pub(crate) fn table(schema: &str) -> String {
    format!("\"{schema}\".leaseq_queue_limits")
}

fn epoch_ms(expr: &str) -> String {
    format!("(floor(extract(epoch FROM {expr}) * 1000))::bigint")
}

fn stored(conc: Option<i32>, rate: Option<i32>, per_ms: Option<i64>) -> Result<QueueLimits> {
    QueueLimits::from_stored(conc.map(i64::from), rate.map(i64::from), per_ms)
}

fn as_i32(n: u32) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

impl PgBackend {
    fn limits_table(&self) -> String {
        table(&self.inner.options.schema)
    }

    /// [`leaseq_core::Throttles::set_queue_limits`]: one statement.
    pub(crate) async fn write_limits(&self, queue: &QueueName, limits: QueueLimits) -> Result<()> {
        limits.check()?;
        let t = self.limits_table();
        if limits.is_none() {
            sqlx::query(&format!(
                "UPDATE {t} SET concurrency = NULL, rate = NULL, per_ms = NULL, \
                   window_start = NULL, window_used = 0 WHERE queue = $1"
            ))
            .bind(queue.as_str())
            .execute(&self.inner.pool)
            .await
            .map_err(db("clearing queue limits"))?;
            return self.forget_empty_limits(queue).await;
        }
        sqlx::query(&format!(
            "INSERT INTO {t} AS l (queue, concurrency, rate, per_ms) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (queue) DO UPDATE SET concurrency = excluded.concurrency, \
               rate = excluded.rate, per_ms = excluded.per_ms, \
               window_start = CASE WHEN excluded.rate IS NULL THEN NULL ELSE l.window_start END, \
               window_used = CASE WHEN excluded.rate IS NULL THEN 0 ELSE l.window_used END"
        ))
        .bind(queue.as_str())
        .bind(limits.concurrency.map(as_i32))
        .bind(limits.rate.map(|r| as_i32(r.claims())))
        .bind(
            limits
                .rate
                .map(|r| i64::try_from(r.per_millis()).unwrap_or(i64::MAX)),
        )
        .execute(&self.inner.pool)
        .await
        .map_err(db("setting queue limits"))?;
        Ok(())
    }

    /// [`leaseq_core::Throttles::queue_limits`]: one statement.
    pub(crate) async fn read_limits(&self, queue: &QueueName) -> Result<QueueLimits> {
        let t = self.limits_table();
        let row = sqlx::query(&format!(
            "SELECT concurrency, rate, per_ms FROM {t} WHERE queue = $1"
        ))
        .bind(queue.as_str())
        .fetch_optional(&self.inner.pool)
        .await
        .map_err(db("reading queue limits"))?;
        match row {
            None => Ok(QueueLimits::NONE),
            Some(row) => stored(col(&row, 0)?, col(&row, 1)?, col(&row, 2)?),
        }
    }

    /// A claim on a queue that has limits: one transaction under the
    /// queue's limits row (see the module docs).
    pub(crate) async fn claim_limited(
        &self,
        queue: &QueueName,
        spec: &ClaimSpec,
    ) -> Result<Claimed> {
        let t = self.limits_table();
        let mut tx = crate::begin::begin(&self.inner.pool, None)
            .await
            .map_err(refused("claim: beginning a transaction"))?;
        match self.claim_limited_in(&mut tx, &t, queue, spec).await {
            Ok(Some(out)) => {
                tx.commit().await.map_err(db("claim: commit"))?;
                Ok(out)
            }
            Ok(None) => {
                // The limits went away meanwhile: a plain claim.
                let _ = tx.rollback().await;
                let (mut out, limited) = self
                    .claim_rows(&self.inner.pool, queue, spec, spec.max(), false)
                    .await?;
                if limited {
                    // And back again: come back shortly.
                    out.retry_after = Some(CONCURRENCY_RETRY);
                }
                Ok(out)
            }
            // Not committed: rolled back (on the server when the connection
            // is gone), so nothing of this call was applied.
            Err(e) => Err(e.uncommitted()),
        }
    }

    async fn claim_limited_in(
        &self,
        tx: &mut sqlx::PgConnection,
        t: &str,
        queue: &QueueName,
        spec: &ClaimSpec,
    ) -> Result<Option<Claimed>> {
        let row = sqlx::query(&format!(
            "SELECT concurrency, rate, per_ms, window_start, window_used, {now}, paused \
             FROM {t} WHERE queue = $1 FOR UPDATE",
            now = epoch_ms("clock_timestamp()"),
        ))
        .bind(queue.as_str())
        .fetch_optional(&mut *tx)
        .await
        .map_err(db("claim: locking the queue's limits"))?;
        let Some(row) = row else { return Ok(None) };
        if col::<bool>(&row, 6)? {
            // Paused while this claim waited for the row.
            return Ok(Some(Claimed {
                paused: true,
                ..Claimed::default()
            }));
        }
        let limits = stored(col(&row, 0)?, col(&row, 1)?, col(&row, 2)?)?;
        let window = match (col::<Option<i64>>(&row, 3)?, col::<i64>(&row, 4)?) {
            (Some(start), used) => Some(RateWindow {
                start_ms: u64::try_from(start).unwrap_or(0),
                used: u64::try_from(used).unwrap_or(0),
            }),
            (None, _) => None,
        };
        let now_ms: i64 = col(&row, 5)?;
        let items = &self.inner.sql.items_table;
        let leased: i64 = if limits.concurrency.is_some() {
            let row = sqlx::query(&format!(
                "SELECT count(*) FROM {items} WHERE queue = $1 AND state = 'leased'"
            ))
            .bind(queue.as_str())
            .fetch_one(&mut *tx)
            .await
            .map_err(db("claim: counting the queue's leases"))?;
            col(&row, 0)?
        } else {
            0
        };
        let now = u64::try_from(now_ms).unwrap_or(0);
        let admission = Admission::new(
            &limits,
            now,
            u64::try_from(leased).unwrap_or(0),
            window,
            spec.max(),
        );
        let mut out = if admission.allow() > 0 {
            let (out, _) = self
                .claim_rows(&mut *tx, queue, spec, admission.allow(), true)
                .await?;
            out
        } else {
            Claimed::default()
        };
        let got = u32::try_from(out.leases.len()).unwrap_or(u32::MAX);
        if let Some(mut w) = admission.window_after(got) {
            // The leases are stamped by the claim statement's own clock, a
            // moment after the limits were judged: a claim judged at the end
            // of a window whose stamp falls in the next one is counted in
            // that one (where nothing is charged yet: no claim can have
            // committed a later stamp while this one holds the limits row).
            if let (Some(rate), Some(lease)) = (limits.rate, out.leases.first()) {
                let stamped = lease
                    .expires_at
                    .as_millis()
                    .saturating_sub(spec.ttl().as_millis());
                let start = stamped - stamped % rate.per_millis();
                if start > w.start_ms {
                    w = RateWindow {
                        start_ms: start,
                        used: u64::from(got),
                    };
                }
            }
            sqlx::query(&format!(
                "UPDATE {t} SET window_start = $2, window_used = $3 WHERE queue = $1"
            ))
            .bind(queue.as_str())
            .bind(i64::try_from(w.start_ms).unwrap_or(i64::MAX))
            .bind(i64::try_from(w.used).unwrap_or(i64::MAX))
            .execute(&mut *tx)
            .await
            .map_err(db("claim: counting the claim in the rate window"))?;
        }
        out.retry_after = admission.retry_after(got);
        Ok(Some(out))
    }
}
