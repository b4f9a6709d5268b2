//! [`History`] on PostgreSQL: the retention policy is a row of
//! `leaseq_retention`, the kept items rows of `leaseq_finished` (migration
//! 0016). The statements that end an item record it themselves (see
//! [`record`]); this module holds the rest: the policy, the listing and
//! the collection.

use async_trait::async_trait;
use leaseq_core::finished::check_result;
use leaseq_core::limits::MAX_PEEK;
use leaseq_core::signal::Signal;
use leaseq_core::{
    Bytes, Ending, Error, Finished, History, ItemId, Keep, LeaseKey, QueueName, Result, Retention,
};
use sqlx::postgres::PgRow;

use crate::rows::ms;
use crate::rows::{col, count, db, item_id, limit, millis, refused, sql_id, sql_token, ts};
use crate::PgBackend;

/// Rows one collection statement removes; `collect` loops while a batch
/// comes back full.
const COLLECT_BATCH: i64 = 1000;

/// The kept-items table of `schema`.
pub(crate) fn finished_table(schema: &str) -> String {
    format!("\"{schema}\".leaseq_finished")
}

/// The policy table of `schema`.
pub(crate) fn retention_table(schema: &str) -> String {
    format!("\"{schema}\".leaseq_retention")
}

/// The kept-item counts of `schema` (migration 0020), striped as the
/// completion counter.
pub(crate) fn kept_counts_table(schema: &str) -> String {
    format!("\"{schema}\".leaseq_kept_counts")
}

/// The CTE (`name`) that adds `delta` (an aggregate over `from`, grouped
/// by its `queue` and `ending`) to the kept counts, in the stripe of this
/// server process; groups in name order, so statements take the row
/// locks in one order.
fn count_kept(schema: &str, name: &str, from: &str, delta: &str) -> String {
    let kc = kept_counts_table(schema);
    let stripes = crate::completions::STRIPES;
    format!(
        "{name} AS ( \
           INSERT INTO {kc} AS k (queue, ending, slot, n) \
           SELECT queue, ending, (pg_backend_pid() % {stripes})::smallint, {delta} \
           FROM {from} GROUP BY queue, ending ORDER BY queue, ending \
           ON CONFLICT (queue, ending, slot) DO UPDATE SET n = k.n + EXCLUDED.n \
         )"
    )
}

/// The CTEs a statement that ends items adds once `from` (a CTE of the
/// rows it deleted from `leaseq_items`, with their `queue`, `id`,
/// `enqueued_at`, `attempts`, `payload` and `last_error`) is known:
/// `kept` records those whose ending (`ending`, an expression over the
/// deleted row `d`) the queue's policy keeps, with `result` (an
/// expression) for a completed one, `kept_counted` adds them to the kept
/// counts, and `done` sends one `done <queue>`
/// notification on `channel` per queue that kept any. The join probes
/// the policy table's primary key: a queue that keeps nothing (no row)
/// records nothing and notifies nothing. The statement's final `SELECT`
/// must read `done` (one row always), or the notification is not sent.
pub(crate) fn record(
    schema: &str,
    from: &str,
    ending: &str,
    result: &str,
    channel: &str,
) -> String {
    let f = finished_table(schema);
    let p = retention_table(schema);
    format!(
        "kept AS ( \
           INSERT INTO {f} (queue, id, ending, finished_at, enqueued_at, attempts, payload, \
                            last_error, result) \
           SELECT e.queue, e.id, e.ending, now(), e.enqueued_at, e.attempts, e.payload, \
                  e.last_error, CASE WHEN e.ending = 'completed' THEN {result} END \
           FROM (SELECT d.queue, d.id, d.enqueued_at, d.attempts, d.payload, d.last_error, \
                        {ending} AS ending FROM {from} d) e \
           JOIN {p} p ON p.queue = e.queue \
           WHERE CASE WHEN e.ending = 'completed' THEN p.keep_completed ELSE p.keep_cancelled END \
           RETURNING queue, ending \
         ), {counted}, done AS ( \
           SELECT count(pg_notify({channel}, 'done ' || queue)) AS n \
           FROM (SELECT DISTINCT queue FROM kept) x \
         )",
        counted = count_kept(schema, "kept_counted", "kept", "count(*)"),
    )
}

/// The statements of the History group.
#[derive(Debug)]
pub(crate) struct HistorySql {
    set_retention: String,
    reset_retention: String,
    retention: String,
    finished: String,
    finished_item: String,
    collect_age: String,
    collect_count: String,
    collect_dead_age: String,
    collect_dead_count: String,
}

/// The policy's count bound of the ending named by `$2`, for queue `$1`:
/// 0 when the queue has no policy row (the default keeps nothing), NULL
/// when the row sets no count.
fn cap(p: &str, ending: &str) -> String {
    format!(
        "(SELECT CASE WHEN count(*) = 0 THEN 0 ELSE max({ending}_count) END \
          FROM {p} WHERE queue = $1)"
    )
}

impl HistorySql {
    /// Renders the statements for `schema` (already validated).
    pub(crate) fn new(schema: &str) -> Self {
        let f = finished_table(schema);
        let p = retention_table(schema);
        let t = format!("\"{schema}\".leaseq_items");
        let cols = format!(
            "id, ending, {fin} AS finished_ms, {enq} AS enqueued_ms, attempts, payload, \
             last_error, result",
            fin = ms("finished_at"),
            enq = ms("enqueued_at"),
        );
        // Newest first, cut to the ending's count bound: items past it stay
        // until the next collect, but are not listed.
        let newest = |ending: &str| {
            format!(
                "(SELECT {cols} FROM {f} WHERE queue = $1 AND ending = '{ending}' \
                   AND $2::text IS DISTINCT FROM '{other}' \
                 ORDER BY finished_at DESC, id DESC LIMIT least($3, {cap}))",
                other = if ending == "completed" {
                    "cancelled"
                } else {
                    "completed"
                },
                cap = cap(&p, ending),
            )
        };
        // The bound of the ending `$2` names, from the policy row `p`.
        let bound = |what: &str| {
            format!("CASE WHEN $2 = 'completed' THEN completed_{what} ELSE cancelled_{what} END")
        };
        HistorySql {
            // $1 queue, $2..$9 the row's columns.
            set_retention: format!(
                "INSERT INTO {p} (queue, keep_completed, completed_age_ms, completed_count, \
                                  keep_cancelled, cancelled_age_ms, cancelled_count, \
                                  dead_age_ms, dead_count) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) \
                 ON CONFLICT (queue) DO UPDATE SET keep_completed = EXCLUDED.keep_completed, \
                   completed_age_ms = EXCLUDED.completed_age_ms, \
                   completed_count = EXCLUDED.completed_count, \
                   keep_cancelled = EXCLUDED.keep_cancelled, \
                   cancelled_age_ms = EXCLUDED.cancelled_age_ms, \
                   cancelled_count = EXCLUDED.cancelled_count, \
                   dead_age_ms = EXCLUDED.dead_age_ms, dead_count = EXCLUDED.dead_count"
            ),
            // $1 queue: the default policy is no row.
            reset_retention: format!("DELETE FROM {p} WHERE queue = $1"),
            retention: format!(
                "SELECT completed_age_ms, completed_count, cancelled_age_ms, cancelled_count, \
                        dead_age_ms, dead_count \
                 FROM {p} WHERE queue = $1"
            ),
            // $1 queue, $2 the ending to list (NULL: both), $3 limit. Each
            // ending's newest through the order index, then merged.
            finished: format!(
                "SELECT * FROM ({} UNION ALL {}) x ORDER BY finished_ms DESC, id DESC LIMIT $3",
                newest("completed"),
                newest("cancelled"),
            ),
            // $1 queue, $2 id.
            finished_item: format!("SELECT {cols} FROM {f} WHERE queue = $1 AND id = $2"),
            // $1 queue, $2 ending, $3 batch. The oldest items of the ending
            // older than its age bound, through the order index from its
            // oldest end: the walk stops at the first one kept, so it costs
            // what it removes. Locked `SKIP LOCKED`, so racing collects
            // remove each once. No policy row, or no age bound: nothing.
            // The DELETE finds the locked rows by the primary key (an
            // array, as the reap does): a join to `c` may be planned as a
            // scan of the queue's kept items.
            collect_age: format!(
                "WITH c AS MATERIALIZED ( \
                   SELECT id FROM {f} WHERE queue = $1 AND ending = $2 \
                     AND finished_at <= now() - (SELECT {age} FROM {p} WHERE queue = $1) \
                                               * interval '1 millisecond' \
                   ORDER BY finished_at, id LIMIT $3 FOR UPDATE SKIP LOCKED \
                 ), d AS ( \
                   DELETE FROM {f} WHERE queue = $1 AND id = ANY(ARRAY(SELECT id FROM c)) \
                   RETURNING queue, ending \
                 ), {uncounted} \
                 SELECT (SELECT count(*) FROM c), (SELECT count(*) FROM d)",
                age = bound("age_ms"),
                uncounted = count_kept(schema, "uncounted", "d", "-count(*)"),
            ),
            // $1 queue, $2 ending, $3 batch. The oldest items past the count
            // bound: how many are past it is the kept count (the stripes'
            // sum) less the bound, so nothing walks the items the bound
            // keeps; the batch is the oldest through the order index,
            // locked as for the age. No count bound: nothing. The caller
            // holds the queue's collect lock, so no other count collect
            // takes the same excess from a count read before its own.
            collect_count: format!(
                "WITH excess AS MATERIALIZED ( \
                   SELECT greatest(0, least($3::bigint, coalesce( \
                            (SELECT sum(n) FROM {kc} WHERE queue = $1 AND ending = $2)::bigint \
                            - (SELECT {n} FROM {p} WHERE queue = $1), 0)))::bigint AS n \
                 ), c AS MATERIALIZED ( \
                   SELECT id FROM {f} WHERE queue = $1 AND ending = $2 \
                   ORDER BY finished_at, id LIMIT (SELECT n FROM excess) \
                   FOR UPDATE SKIP LOCKED \
                 ), d AS ( \
                   DELETE FROM {f} WHERE queue = $1 AND id = ANY(ARRAY(SELECT id FROM c)) \
                   RETURNING queue, ending \
                 ), {uncounted} \
                 SELECT (SELECT count(*) FROM c), (SELECT count(*) FROM d), \
                        (SELECT n FROM excess)",
                kc = kept_counts_table(schema),
                n = bound("count"),
                uncounted = count_kept(schema, "uncounted", "d", "-count(*)"),
            ),
            // $1 queue, $2 batch. As `collect_age`, over the dead letters:
            // the oldest deaths first through the dead index, up to the
            // first one the age bound keeps (no policy row or no bound:
            // nothing). Locked `SKIP LOCKED`, re-checked on the row's
            // latest version (a redrive meanwhile keeps the row), and
            // deleted as `remove_item` deletes: the dedup key is free.
            collect_dead_age: format!(
                "WITH c AS MATERIALIZED ( \
                   SELECT id FROM {t} WHERE queue = $1 AND state = 'dead' \
                     AND dead_at <= now() - (SELECT dead_age_ms FROM {p} WHERE queue = $1) \
                                            * interval '1 millisecond' \
                   ORDER BY dead_at, id LIMIT $2 FOR UPDATE SKIP LOCKED \
                 ), d AS ( \
                   DELETE FROM {t} WHERE id = ANY(ARRAY(SELECT id FROM c)) AND queue = $1 \
                   RETURNING 1 \
                 ) \
                 SELECT (SELECT count(*) FROM c), (SELECT count(*) FROM d)"
            ),
            // $1 queue, $2 batch. As `collect_count`, over the dead
            // letters: the newest death past the count bound is the edge
            // (a backward walk of the dead index over the bound's newest
            // entries), and the batch the oldest up to it.
            collect_dead_count: format!(
                "WITH edge AS MATERIALIZED ( \
                   SELECT dead_at, id FROM {t} WHERE queue = $1 AND state = 'dead' \
                     AND {n} IS NOT NULL \
                   ORDER BY dead_at DESC, id DESC OFFSET {n} LIMIT 1 \
                 ), c AS MATERIALIZED ( \
                   SELECT id FROM {t} WHERE queue = $1 AND state = 'dead' \
                     AND EXISTS (SELECT 1 FROM edge) \
                     AND (dead_at, id) <= ((SELECT dead_at FROM edge), (SELECT id FROM edge)) \
                   ORDER BY dead_at, id LIMIT $2 FOR UPDATE SKIP LOCKED \
                 ), d AS ( \
                   DELETE FROM {t} WHERE id = ANY(ARRAY(SELECT id FROM c)) AND queue = $1 \
                   RETURNING 1 \
                 ) \
                 SELECT (SELECT count(*) FROM c), (SELECT count(*) FROM d)",
                n = format!("(SELECT dead_count FROM {p} WHERE queue = $1)"),
            ),
        }
    }
}

/// A bound as stored: milliseconds or a count, clamped to `i64::MAX`.
fn stored(keep: Keep) -> (Option<i64>, Option<i64>) {
    (
        keep.max_age.map(millis),
        keep.max_count.map(|n| i64::try_from(n).unwrap_or(i64::MAX)),
    )
}

/// A stored bound back.
fn keep(age: Option<i64>, n: Option<i64>) -> Keep {
    Keep {
        max_age: age.map(|ms| std::time::Duration::from_millis(u64::try_from(ms).unwrap_or(0))),
        max_count: n.map(|n| u64::try_from(n).unwrap_or(0)),
    }
}

/// A row of the kept-item columns.
fn finished(row: &PgRow) -> Result<Finished> {
    let ending: String = col(row, 1)?;
    let ending = ending.parse().map_err(|_| Error::Corrupt {
        what: format!("unknown ending {ending:?}"),
    })?;
    let result: Option<Vec<u8>> = col(row, 7)?;
    Ok(Finished {
        id: item_id(col(row, 0)?)?,
        ending,
        finished_at: ts(col(row, 2)?),
        enqueued_at: ts(col(row, 3)?),
        attempts: count(col(row, 4)?, "attempts")?,
        payload: Bytes::from(col::<Vec<u8>>(row, 5)?),
        last_error: col(row, 6)?,
        result: result.map(Bytes::from),
    })
}

impl PgBackend {
    /// Runs one collection statement (for `ending`, or of dead letters
    /// with `None`) on `conn` until a batch locks fewer rows than a batch;
    /// answers the rows removed.
    async fn collect_by(
        conn: &mut sqlx::PgConnection,
        sql: &str,
        queue: &QueueName,
        ending: Option<Ending>,
    ) -> Result<u64> {
        let mut gone = 0u64;
        loop {
            let mut query = sqlx::query(sql).bind(queue.as_str());
            if let Some(ending) = ending {
                query = query.bind(ending.as_str());
            }
            let row = query
                .bind(COLLECT_BATCH)
                .fetch_one(&mut *conn)
                .await
                .map_err(db("collecting finished items"))?;
            let locked: i64 = col(&row, 0)?;
            gone += u64::try_from(col::<i64>(&row, 1)?).unwrap_or(0);
            if locked < COLLECT_BATCH {
                return Ok(gone);
            }
        }
    }

    /// A transaction that holds `queue`'s collect lock (a
    /// transaction-level advisory lock on the schema and queue), so
    /// collects of one queue take turns: each statement reads the kept
    /// counts the one before it left, and two never remove the same excess
    /// twice.
    async fn collect_lock(
        &self,
        queue: &QueueName,
    ) -> Result<sqlx::Transaction<'static, sqlx::Postgres>> {
        let mut tx = crate::begin::begin(self.statement_on([queue]), None)
            .await
            .map_err(refused("collect: beginning a transaction"))?;
        sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))")
            .bind(format!(
                "leaseq collect {} {}",
                self.inner.options.schema_name(),
                queue
            ))
            .execute(&mut *tx)
            .await
            .map_err(db("collect: taking the queue's collect lock"))?;
        Ok(tx)
    }

    /// Removes `queue`'s kept items past their count bounds, on `conn`
    /// (holding the collect lock).
    async fn trim(&self, conn: &mut sqlx::PgConnection, queue: &QueueName) -> Result<u64> {
        let mut gone = 0;
        for ending in Ending::ALL {
            gone += Self::collect_by(
                conn,
                &self.inner.history_sql.collect_count,
                queue,
                Some(ending),
            )
            .await?;
        }
        Ok(gone)
    }

    /// Every collection of `queue` on `conn` (holding the collect lock):
    /// the count bounds, the age bounds, then the dead letters'.
    async fn collect_all(&self, conn: &mut sqlx::PgConnection, queue: &QueueName) -> Result<u64> {
        let s = &self.inner.history_sql;
        let mut gone = self.trim(conn, queue).await?;
        for ending in Ending::ALL {
            gone += Self::collect_by(conn, &s.collect_age, queue, Some(ending)).await?;
        }
        gone += Self::collect_by(conn, &s.collect_dead_count, queue, None).await?;
        gone += Self::collect_by(conn, &s.collect_dead_age, queue, None).await?;
        Ok(gone)
    }
}

#[async_trait]
impl History for PgBackend {
    /// Stored as a row (none for the default); a lower count trims at
    /// once. Ages are kept to the millisecond (a part rounded up).
    async fn set_retention(&self, queue: &QueueName, retention: Retention) -> Result<()> {
        retention.check()?;
        let s = &self.inner.history_sql;
        if retention == Retention::default() {
            sqlx::query(&s.reset_retention)
                .bind(queue.as_str())
                .execute(self.statement_on([queue]))
                .await
                .map_err(db("set_retention"))?;
        } else {
            let (c_age, c_n) = stored(retention.completed);
            let (x_age, x_n) = stored(retention.cancelled);
            let (d_age, d_n) = stored(retention.dead);
            sqlx::query(&s.set_retention)
                .bind(queue.as_str())
                .bind(retention.completed.keeps_any())
                .bind(c_age)
                .bind(c_n)
                .bind(retention.cancelled.keeps_any())
                .bind(x_age)
                .bind(x_n)
                .bind(d_age)
                .bind(d_n)
                .execute(self.statement_on([queue]))
                .await
                .map_err(db("set_retention"))?;
        }
        let mut tx = self.collect_lock(queue).await?;
        self.trim(&mut tx, queue)
            .await
            .map_err(Error::uncommitted)?;
        tx.commit().await.map_err(db("set_retention: commit"))
    }

    async fn retention(&self, queue: &QueueName) -> Result<Retention> {
        let row = sqlx::query(&self.inner.history_sql.retention)
            .bind(queue.as_str())
            .fetch_optional(self.statement_on([queue]))
            .await
            .map_err(db("retention"))?;
        let Some(row) = row else {
            return Ok(Retention::default());
        };
        Ok(Retention::default()
            .completed(keep(col(&row, 0)?, col(&row, 1)?))
            .cancelled(keep(col(&row, 2)?, col(&row, 3)?))
            .dead(keep(col(&row, 4)?, col(&row, 5)?)))
    }

    /// The ack's statement, with the result bound: recorded with the
    /// ending when the queue keeps completed items.
    async fn complete(&self, lease: &LeaseKey, result: Bytes) -> Result<()> {
        check_result(&result)?;
        let row = sqlx::query(&self.inner.sql.complete)
            .bind(crate::ops::fenced_id(lease))
            .bind(lease.queue.as_str())
            .bind(sql_token(lease.token))
            .bind(&self.inner.channel)
            .bind(result.as_ref())
            .fetch_one(self.statement_on([&lease.queue]))
            .await
            .map_err(db("complete"))?;
        if col::<i64>(&row, 0)? == 0 {
            return Err(Error::LeaseLost { id: lease.id });
        }
        Ok(())
    }

    /// A count bound cuts the listing at once; the rows past it go at the
    /// next collect.
    async fn finished(
        &self,
        queue: &QueueName,
        ending: Option<Ending>,
        n: usize,
    ) -> Result<Vec<Finished>> {
        sqlx::query(&self.inner.history_sql.finished)
            .bind(queue.as_str())
            .bind(ending.map(Ending::as_str))
            .bind(limit(n.min(MAX_PEEK)))
            .fetch_all(self.statement_on([queue]))
            .await
            .map_err(db("finished"))?
            .iter()
            .map(finished)
            .collect()
    }

    /// An item past a count bound is answered until the next collect
    /// removes it.
    async fn finished_item(&self, queue: &QueueName, id: ItemId) -> Result<Finished> {
        let Ok(raw) = sql_id(id) else {
            return Err(Error::NotFound { id });
        };
        let row = sqlx::query(&self.inner.history_sql.finished_item)
            .bind(queue.as_str())
            .bind(raw)
            .fetch_optional(self.statement_on([queue]))
            .await
            .map_err(db("finished_item"))?;
        finished(&row.ok_or(Error::NotFound { id })?)
    }

    /// Ages through the order index from the oldest end (the cost follows
    /// what is removed); counts walk the bound's newest entries to find
    /// the edge, then remove what lies past it. Dead letters the same way,
    /// through the dead index: the oldest beyond the count, then those
    /// older than the age.
    async fn collect(&self, queue: &QueueName) -> Result<u64> {
        let mut tx = self.collect_lock(queue).await?;
        let gone = self
            .collect_all(&mut tx, queue)
            .await
            .map_err(Error::uncommitted)?;
        tx.commit().await.map_err(db("collect: commit"))?;
        Ok(gone)
    }

    /// Fed by the backend's `LISTEN` connection: an ending kept by any
    /// process on the database fires it (a `done <queue>` notification).
    async fn finished_signal(&self, queue: &QueueName) -> Result<Signal> {
        Ok(self.inner.wakeups.finished_signal(queue.as_str()))
    }
}
