//! The [`Backend`] implementation: one statement per transition.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use async_trait::async_trait;
use leaseq_core::limits::{
    check_ack_batch, check_batch, check_delay, clamp_reason, FINISH_MEMORY, LEASE_HORIZON,
    REQUEST_MEMORY,
};
use leaseq_core::testing::TestHooks;
use leaseq_core::{
    Admin, Backend, Bytes, Capabilities, ClaimSpec, Claimed, Enqueued, Error, Extended, Groups,
    ItemId, ItemInfo, ItemState, Lease, LeaseFate, LeaseKey, LeaseToken, LeaseTraces, LeaseTtl,
    LimitScope, NewItem, QueueLimits, QueueName, QueueStats, ReapReport, Released, Repair, Result,
    ScheduleStore, Throttles, Timestamp,
};

use crate::rows::{
    col, count, db, info, item_id, limit, millis, refused, sql_id, sql_token, state, token, ts,
};
use crate::sql::{QUARANTINED, WALK_START};
use crate::PgBackend;
use leaseq_core::schedule::{Fired, Schedule, ScheduleName, ScheduleTick, StoredSchedule};
use sqlx::postgres::PgRow;
use sqlx::{PgConnection, PgPool};

/// Rows one reap or promotion statement handles; the reaper loops while a
/// batch comes back full.
const REAP_BATCH: i64 = 500;
/// Pages of the table [`Backend::stats`] samples when a state holds more
/// than [`crate::PgOptions::stats_exact_up_to`] items: a bounded read (a
/// few milliseconds) and, for a queue that fills a good part of the table,
/// an estimate within about 10% (the number of pages drawn varies by about
/// that much).
const STATS_SAMPLE_PAGES: f64 = 200.0;
/// Rounds of retry when a dedup key's holder vanished between the insert
/// and the lookup (it was acked meanwhile).
const DEDUP_ROUNDS: usize = 8;

impl PgBackend {
    /// The pool, for one statement on `queues` (counted for
    /// [`TestHooks::steps`] once per distinct queue).
    pub(crate) fn statement_on<'a>(
        &self,
        queues: impl IntoIterator<Item = &'a QueueName>,
    ) -> &PgPool {
        if !self.inner.steps.is_enabled() {
            return &self.inner.pool;
        }
        let mut seen: Vec<&QueueName> = Vec::new();
        for q in queues {
            if !seen.contains(&q) {
                self.inner.steps.count(q);
                seen.push(q);
            }
        }
        &self.inner.pool
    }

    /// `conn`, for one statement on `queue` inside a transaction (counted
    /// like [`PgBackend::statement_on`]).
    fn statement_in<'c>(
        &self,
        queue: &QueueName,
        conn: &'c mut PgConnection,
    ) -> &'c mut PgConnection {
        let _ = self.statement_on([queue]);
        conn
    }

    fn lost(key: &LeaseKey) -> Error {
        Error::LeaseLost { id: key.id }
    }

    /// Inserts `items` (by their index in the caller's batch); returns the
    /// result for each, or `None` where the key's holder is gone and the
    /// item must be tried again.
    async fn insert_round(
        &self,
        conn: &mut PgConnection,
        queue: &QueueName,
        items: &[(usize, &NewItem)],
    ) -> Result<Vec<Option<Enqueued>>> {
        let s = &self.inner.sql;
        let payloads: Vec<&[u8]> = items.iter().map(|(_, i)| i.payload.as_ref()).collect();
        let priorities: Vec<i32> = items.iter().map(|(_, i)| i.priority).collect();
        let attempts: Vec<i32> = items
            .iter()
            .map(|(_, i)| i32::try_from(i.max_attempts).unwrap_or(i32::MAX))
            .collect();
        let delays: Vec<i64> = items.iter().map(|(_, i)| millis(i.delay)).collect();
        if items.iter().all(|(_, i)| i.dedup_key.is_none()) {
            return self
                .insert_plain(conn, queue, &payloads, &priorities, &attempts, &delays)
                .await;
        }
        let keys: Vec<Option<&str>> = items.iter().map(|(_, i)| i.dedup_key.as_deref()).collect();
        let holds: Vec<Option<i64>> = items
            .iter()
            .map(|(_, i)| i.unique_for.map(millis))
            .collect();
        let rows = sqlx::query(&s.enqueue)
            .bind(queue.as_str())
            .bind(&payloads)
            .bind(&priorities)
            .bind(&attempts)
            .bind(&keys)
            .bind(&delays)
            .bind(&self.inner.channel)
            .bind(&holds)
            .fetch_all(self.statement_in(queue, conn))
            .await
            .map_err(db("enqueue"))?;
        if rows.len() != items.len() {
            return Err(Error::Corrupt {
                what: format!(
                    "enqueue of {} items returned {} rows",
                    items.len(),
                    rows.len()
                ),
            });
        }
        let mut out = Vec::with_capacity(items.len());
        let mut wanted: Vec<&str> = Vec::new();
        for (row, (_, item)) in rows.iter().zip(items) {
            let inserted: bool = col(row, 1)?;
            if inserted {
                out.push(Some(Enqueued {
                    id: item_id(col(row, 0)?)?,
                    deduplicated: false,
                }));
            } else {
                wanted.extend(item.dedup_key.as_deref());
                out.push(None);
            }
        }
        if wanted.is_empty() {
            return Ok(out);
        }
        let holders: HashMap<String, i64> = sqlx::query(&s.dedup_holders)
            .bind(queue.as_str())
            .bind(&wanted)
            .fetch_all(self.statement_in(queue, conn))
            .await
            .map_err(db("enqueue: looking up dedup holders"))?
            .iter()
            .map(|r| Ok((col::<String>(r, 0)?, col::<i64>(r, 1)?)))
            .collect::<Result<_>>()?;
        for (slot, (_, item)) in out.iter_mut().zip(items) {
            if slot.is_none() {
                if let Some(id) = item.dedup_key.as_deref().and_then(|k| holders.get(k)) {
                    *slot = Some(Enqueued {
                        id: item_id(*id)?,
                        deduplicated: true,
                    });
                }
            }
        }
        Ok(out)
    }

    /// Inserts a batch in which no item has a dedup key: every item is
    /// new, so no conflict can arise and the ids (sorted, drawn in batch
    /// order) map to the items in order.
    async fn insert_plain(
        &self,
        conn: &mut PgConnection,
        queue: &QueueName,
        payloads: &[&[u8]],
        priorities: &[i32],
        attempts: &[i32],
        delays: &[i64],
    ) -> Result<Vec<Option<Enqueued>>> {
        let row = sqlx::query(&self.inner.sql.enqueue_plain)
            .bind(queue.as_str())
            .bind(payloads)
            .bind(priorities)
            .bind(attempts)
            .bind(delays)
            .bind(&self.inner.channel)
            .fetch_one(self.statement_in(queue, conn))
            .await
            .map_err(db("enqueue"))?;
        let ids: Vec<i64> = col::<Option<Vec<i64>>>(&row, 0)?.unwrap_or_default();
        if ids.len() != payloads.len() {
            return Err(Error::Corrupt {
                what: format!(
                    "enqueue of {} items returned {} ids",
                    payloads.len(),
                    ids.len()
                ),
            });
        }
        ids.into_iter()
            .map(|id| {
                Ok(Some(Enqueued {
                    id: item_id(id)?,
                    deduplicated: false,
                }))
            })
            .collect()
    }

    /// [`check_batch`] against this backend's bounds (a NUL in a dedup
    /// key among them: no store is asked to keep one).
    pub(crate) fn check_items(&self, items: &[NewItem]) -> Result<()> {
        check_batch(items, &self.inner.options.limits)
    }

    /// Enqueues a checked batch on `conn` (in a transaction or not).
    pub(crate) async fn enqueue_on(
        &self,
        conn: &mut PgConnection,
        queue: &QueueName,
        items: &[NewItem],
    ) -> Result<Vec<Enqueued>> {
        let mut results: Vec<Option<Enqueued>> = vec![None; items.len()];
        let mut pending: Vec<(usize, &NewItem)> = items.iter().enumerate().collect();
        for _ in 0..DEDUP_ROUNDS {
            if pending.is_empty() {
                break;
            }
            let round = self.insert_round(conn, queue, &pending).await?;
            let mut next = Vec::new();
            for ((idx, item), got) in pending.into_iter().zip(round) {
                match got {
                    Some(e) => results[idx] = Some(e),
                    None => next.push((idx, item)),
                }
            }
            pending = next;
        }
        results
            .into_iter()
            .map(|r| {
                r.ok_or_else(|| {
                    Error::outcome_unknown(
                        "postgres: enqueue",
                        "a dedup key's holder kept vanishing; try again",
                    )
                })
            })
            .collect()
    }

    /// The statements of [`Backend::enqueue_once`] inside its transaction
    /// `tx`: claims the request's row (waiting for a concurrent first call
    /// of the same request), then either recalls the results stored with it
    /// or enqueues the batch and stores its results. The caller commits or
    /// rolls back.
    async fn enqueue_once_in(
        &self,
        tx: &mut PgConnection,
        queue: &QueueName,
        request: LeaseToken,
        items: &[NewItem],
    ) -> Result<Recalled> {
        let s = &self.inner.sql;
        let row = sqlx::query(&s.request_begin)
            .bind(queue.as_str())
            .bind(sql_token(request))
            .bind(millis(REQUEST_MEMORY))
            .fetch_one(self.statement_in(queue, tx))
            .await
            .map_err(db("enqueue_once: claiming the request"))?;
        let ids: Option<Vec<i64>> = col(&row, 0)?;
        let flags: Option<Vec<bool>> = col(&row, 1)?;
        if let (Some(ids), Some(flags)) = (ids, flags) {
            if ids.len() != flags.len() {
                return Err(Error::Corrupt {
                    what: format!(
                        "request {request} stored {} ids and {} dedup flags",
                        ids.len(),
                        flags.len()
                    ),
                });
            }
            if ids.len() != items.len() {
                return Err(Error::invalid(format!(
                    "request {request} was first sent with {} items, now with {}",
                    ids.len(),
                    items.len()
                )));
            }
            let results = ids
                .into_iter()
                .zip(flags)
                .map(|(id, deduplicated)| {
                    Ok(Enqueued {
                        id: item_id(id)?,
                        deduplicated,
                    })
                })
                .collect::<Result<Vec<_>>>()?;
            return Ok(Recalled::Before(results));
        }
        let results = if items.is_empty() {
            Vec::new()
        } else {
            self.enqueue_on(tx, queue, items).await?
        };
        let ids = results
            .iter()
            .map(|e| sql_id(e.id))
            .collect::<Result<Vec<i64>>>()?;
        let flags: Vec<bool> = results.iter().map(|e| e.deduplicated).collect();
        sqlx::query(&s.request_done)
            .bind(queue.as_str())
            .bind(sql_token(request))
            .bind(&ids)
            .bind(&flags)
            .execute(self.statement_in(queue, tx))
            .await
            .map_err(db("enqueue_once: storing the results"))?;
        Ok(Recalled::Now(results))
    }

    /// The claim statement: up to `spec.max()` leases, the n-th getting
    /// `spec.token(n)`, plus the rows it moved aside (deleted for a missing
    /// item, quarantined to Dead for an attempt counter at its limit), which
    /// take no slot.
    ///
    /// A claim with no limits on its queue; a queue with limits is
    /// claimed under its limits row ([`PgBackend::claim_limited`]).
    pub(crate) async fn claim_plain(&self, queue: &QueueName, spec: &ClaimSpec) -> Result<Claimed> {
        let (out, limited) = if self.inner.options.durable_claims {
            self.claim_rows(self.statement_on([queue]), queue, spec, spec.max(), false)
                .await?
        } else {
            self.claim_rows_unflushed(queue, spec).await?
        };
        if limited {
            return self.claim_limited(queue, spec).await;
        }
        Ok(out)
    }

    /// The claim statement in a transaction of its own that commits
    /// without waiting for its WAL to reach disk
    /// ([`crate::PgOptions::durable_claims`] off). `BEGIN` and the setting
    /// go in one round trip.
    async fn claim_rows_unflushed(
        &self,
        queue: &QueueName,
        spec: &ClaimSpec,
    ) -> Result<(Claimed, bool)> {
        let pool = self.statement_on([queue]);
        let mut tx = crate::begin::begin(pool, Some("BEGIN; SET LOCAL synchronous_commit = off"))
            .await
            .map_err(refused("claim: beginning a transaction"))?;
        let out = self
            .claim_rows(&mut *tx, queue, spec, spec.max(), false)
            .await?;
        tx.commit().await.map_err(db("claim: commit"))?;
        Ok(out)
    }

    /// Runs the claim statement for up to `max` leases on `exec`. `held`:
    /// the caller holds the queue's limits row and has judged them. Returns
    /// the claim, and whether the statement stepped aside for the queue's
    /// limits.
    pub(crate) async fn claim_rows<'e>(
        &self,
        exec: impl sqlx::PgExecutor<'e>,
        queue: &QueueName,
        spec: &ClaimSpec,
        max: u32,
        held: bool,
    ) -> Result<(Claimed, bool)> {
        let tokens: Vec<uuid::Uuid> = (0..max).map(|i| sql_token(spec.token(i))).collect();
        let rows = sqlx::query(&self.inner.sql.claim)
            .bind(queue.as_str())
            .bind(i64::from(max))
            .bind(i64::try_from(spec.ttl().as_millis()).unwrap_or(i64::MAX))
            .bind(&tokens)
            .bind(held)
            .bind(&self.inner.channel)
            .fetch_all(exec)
            .await
            .map_err(db("claim"))?;
        let mut out = Claimed::default();
        let mut limited = false;
        for row in &rows {
            match col::<Option<String>>(row, 8)?.as_deref() {
                Some("limited") => {
                    limited = true;
                    continue;
                }
                Some("paused") => {
                    out.paused = true;
                    continue;
                }
                _ => {}
            }
            let id = item_id(col(row, 0)?)?;
            if let Some(was) = col::<Option<String>>(row, 7)? {
                let kind: Option<String> = col(row, 8)?;
                let problem = match kind.as_deref() {
                    Some("missing") => "entry without an item (no payload); deleted".to_owned(),
                    Some("quarantined") => {
                        let (tried, max): (i32, i32) = (col(row, 3)?, col(row, 4)?);
                        if tried == i32::MAX {
                            format!("{QUARANTINED} (attempts = {tried}); moved to Dead")
                        } else {
                            format!(
                                "attempts exhausted ({tried} of {max}) before a claim; \
                                 moved to Dead"
                            )
                        }
                    }
                    other => {
                        return Err(Error::Corrupt {
                            what: format!("claim reported a repair of kind {other:?}"),
                        })
                    }
                };
                let repair = Repair {
                    index: state(&was)?,
                    id,
                    problem,
                };
                tracing::warn!(queue = %queue, %repair, "leaseq-postgres: moved a corrupt row aside");
                out.repairs.push(repair);
                continue;
            }
            out.leases.push(lease(queue, row)?);
        }
        out.leases
            .sort_by_key(|l| (std::cmp::Reverse(l.priority), l.key.id));
        Ok((out, limited))
    }

    /// Walks `sql`, a [`crate::sql::to_ready_walk`] statement, until it
    /// moved `n` rows or found no more; answers how many moved.
    pub(crate) async fn move_up_to(
        &self,
        sql: &str,
        queue: &QueueName,
        n: usize,
        what: &'static str,
    ) -> Result<u64> {
        let [moved, ..] = self.walk(sql, queue, REAP_BATCH, limit(n), what).await?;
        Ok(u64::try_from(moved).unwrap_or(0))
    }

    /// Runs `sql` ($1 queue, $2 id, and with `notify` $3 the notify
    /// channel), which answers a row only when the item `id` exists: that
    /// row, or [`Error::NotFound`].
    pub(crate) async fn item_row(
        &self,
        sql: &str,
        queue: &QueueName,
        id: ItemId,
        notify: bool,
        what: &'static str,
    ) -> Result<PgRow> {
        let Ok(raw) = sql_id(id) else {
            return Err(Error::NotFound { id });
        };
        let mut query = sqlx::query(sql).bind(queue.as_str()).bind(raw);
        if notify {
            query = query.bind(&self.inner.channel);
        }
        query
            .fetch_optional(self.statement_on([queue]))
            .await
            .map_err(db(what))?
            .ok_or(Error::NotFound { id })
    }

    /// Runs `sql`, a release or a snooze of `lease` ($4 delay, $5 notify
    /// channel), and reads where the item went.
    pub(crate) async fn put_back(
        &self,
        sql: &str,
        lease: &LeaseKey,
        delay: Duration,
        what: &'static str,
    ) -> Result<Released> {
        check_delay(delay)?;
        let row = sqlx::query(sql)
            .bind(fenced_id(lease))
            .bind(lease.queue.as_str())
            .bind(sql_token(lease.token))
            .bind(millis(delay))
            .bind(&self.inner.channel)
            .fetch_optional(self.statement_on([&lease.queue]))
            .await
            .map_err(db(what))?;
        match row {
            Some(row) => released(&col::<String>(&row, 0)?),
            None => Err(Self::lost(lease)),
        }
    }

    /// Forgets `enqueue_once` requests whose memory ran out, in batches,
    /// each starting at the expiry where the last one stopped.
    async fn reap_requests(&self, queue: &QueueName) -> Result<()> {
        let mut from = WALK_START.0.to_owned();
        loop {
            let row = sqlx::query(&self.inner.sql.reap_requests)
                .bind(queue.as_str())
                .bind(REAP_BATCH)
                .bind(&from)
                .fetch_one(self.statement_on([queue]))
                .await
                .map_err(db("reaping expired requests"))?;
            let locked: i64 = col(&row, 0)?;
            match col::<Option<String>>(&row, 2)? {
                Some(at) if locked >= REAP_BATCH => from = at,
                _ => return Ok(()),
            }
        }
    }

    /// Leases expiring past [`LEASE_HORIZON`] expire now, in batches, each
    /// reported; the reap's walk that follows recovers them.
    async fn expire_past_horizon(&self, queue: &QueueName) -> Result<Vec<Repair>> {
        let horizon = i64::try_from(LEASE_HORIZON.as_millis()).unwrap_or(i64::MAX);
        let mut repairs = Vec::new();
        loop {
            let rows = sqlx::query(&self.inner.sql.lease_horizon)
                .bind(queue.as_str())
                .bind(REAP_BATCH)
                .bind(horizon)
                .fetch_all(self.statement_on([queue]))
                .await
                .map_err(db("expiring leases past the lease horizon"))?;
            for row in &rows {
                let id = item_id(col(row, 0)?)?;
                tracing::warn!(queue = %queue, %id, "leaseq-postgres: a lease expiring past the lease horizon expired now");
                repairs.push(Repair::past_horizon(id));
            }
            if limit(rows.len()) < REAP_BATCH {
                return Ok(repairs);
            }
        }
    }

    /// Runs one of the keyset batch statements (reap, promote, redrive,
    /// run_all_now) on `queue` until a batch locks fewer than `batch` rows
    /// or `limit` rows were counted, each batch starting after the key
    /// where the last one stopped; returns the sums of the statement's
    /// three counts.
    pub(crate) async fn walk(
        &self,
        sql: &str,
        queue: &QueueName,
        batch: i64,
        limit: i64,
        what: &'static str,
    ) -> Result<[i64; 3]> {
        let mut sums = [0i64; 3];
        let mut after: (String, i64) = (WALK_START.0.to_owned(), WALK_START.1);
        while sums.iter().sum::<i64>() < limit {
            let n = batch.min(limit - sums.iter().sum::<i64>());
            let row = sqlx::query(sql)
                .bind(queue.as_str())
                .bind(n)
                .bind(&self.inner.channel)
                .bind(&after.0)
                .bind(after.1)
                .fetch_one(self.statement_on([queue]))
                .await
                .map_err(db(what))?;
            let locked: i64 = col(&row, 0)?;
            for (i, sum) in sums.iter_mut().enumerate() {
                *sum += col::<i64>(&row, i + 1)?;
            }
            match (
                col::<Option<String>>(&row, 4)?,
                col::<Option<i64>>(&row, 5)?,
            ) {
                (Some(at), Some(id)) if locked >= n => after = (at, id),
                _ => break,
            }
        }
        Ok(sums)
    }
}

#[async_trait]
impl Backend for PgBackend {
    fn capabilities(&self) -> Capabilities {
        Capabilities::all_features()
            .bounds(self.inner.options.limits)
            .durable(true)
            .shared(true)
            .lease_traces(LeaseTraces::Takeovers)
            .unique_for(true)
    }

    async fn now(&self) -> Result<Timestamp> {
        let row =
            sqlx::query("SELECT (floor(extract(epoch FROM clock_timestamp()) * 1000))::bigint")
                .fetch_one(&self.inner.pool)
                .await
                .map_err(db("reading the clock"))?;
        Ok(ts(col(&row, 0)?))
    }

    async fn enqueue(&self, queue: &QueueName, items: Vec<NewItem>) -> Result<Vec<Enqueued>> {
        self.check_items(&items)?;
        if items.is_empty() {
            return Ok(Vec::new());
        }
        // One connection for the call's statements; each commits on its own.
        let mut conn = self
            .inner
            .pool
            .acquire()
            .await
            .map_err(refused("enqueue: acquiring a connection"))?;
        self.enqueue_on(&mut conn, queue, &items).await
    }

    async fn enqueue_once(
        &self,
        queue: &QueueName,
        request: LeaseToken,
        items: Vec<NewItem>,
    ) -> Result<Vec<Enqueued>> {
        self.check_items(&items)?;
        let mut tx = crate::begin::begin(self.statement_on([queue]), None)
            .await
            .map_err(refused("enqueue_once: beginning a transaction"))?;
        let done = self
            .enqueue_once_in(&mut tx, queue, request, &items)
            .await
            .map_err(Error::uncommitted)?;
        match done {
            Recalled::Before(results) => {
                // This call wrote nothing: roll back at once, so the lock on
                // the request's row goes now. Should that fail, the server
                // rolls back when the connection goes, and the results
                // stand either way.
                let _ = self.statement_on([queue]);
                if let Err(e) = tx.rollback().await {
                    tracing::debug!(error = %e, "leaseq-postgres: enqueue_once: rollback failed");
                }
                Ok(results)
            }
            Recalled::Now(results) => {
                let _ = self.statement_on([queue]);
                tx.commit().await.map_err(db("enqueue_once: commit"))?;
                Ok(results)
            }
        }
    }

    async fn claim(&self, queue: &QueueName, spec: ClaimSpec) -> Result<Claimed> {
        // Before the statement: a notification heard while it runs makes
        // the caller's next wait return at once (its snapshot may predate
        // the item).
        self.inner.wakeups.claim_begins(queue.as_str());
        // One statement: rows moved aside take no slot, so a repair never
        // makes a claim come back short.
        self.claim_plain(queue, &spec).await
    }

    async fn recover_claim(&self, queue: &QueueName, spec: &ClaimSpec) -> Result<Claimed> {
        let first = spec.request().as_u128() & ClaimSpec::FAMILY_MASK;
        let last = first | !ClaimSpec::FAMILY_MASK;
        let rows = sqlx::query(&self.inner.sql.recover_claim)
            .bind(queue.as_str())
            .bind(uuid::Uuid::from_u128(first))
            .bind(uuid::Uuid::from_u128(last))
            .bind(i64::try_from(spec.ttl().as_millis()).unwrap_or(i64::MAX))
            .fetch_all(self.statement_on([queue]))
            .await
            .map_err(db("recover_claim"))?;
        let leases = rows
            .iter()
            .map(|row| lease(queue, row))
            .collect::<Result<Vec<_>>>()?;
        Ok(Claimed {
            leases,
            ..Claimed::default()
        })
    }

    async fn lease_fate(&self, lease: &LeaseKey, held_until: Timestamp) -> Result<LeaseFate> {
        // An id out of the stored range names no row: the item is gone.
        let id = sql_id(lease.id).unwrap_or(-1);
        let row = sqlx::query(&self.inner.sql.lease_fate)
            .bind(id)
            .bind(lease.queue.as_str())
            .bind(sql_token(lease.token))
            .bind(i64::try_from(held_until.as_millis()).unwrap_or(i64::MAX))
            .bind(millis(FINISH_MEMORY))
            .fetch_one(self.statement_on([&lease.queue]))
            .await
            .map_err(db("lease_fate"))?;
        let fate: String = col(&row, 0)?;
        let st: Option<String> = col(&row, 1)?;
        match fate.as_str() {
            "held" => Ok(LeaseFate::Held),
            "finished" => Ok(LeaseFate::Finished {
                state: st.as_deref().map(state).transpose()?,
            }),
            "lost" => Ok(LeaseFate::Lost),
            other => Err(Error::Corrupt {
                what: format!("lease_fate returned {other:?}"),
            }),
        }
    }

    async fn ack(&self, lease: &LeaseKey) -> Result<()> {
        let row = sqlx::query(&self.inner.sql.ack)
            .bind(fenced_id(lease))
            .bind(lease.queue.as_str())
            .bind(sql_token(lease.token))
            .bind(&self.inner.channel)
            .fetch_one(self.statement_on([&lease.queue]))
            .await
            .map_err(db("ack"))?;
        if col::<i64>(&row, 0)? == 0 {
            return Err(Self::lost(lease));
        }
        Ok(())
    }

    async fn ack_many(&self, leases: &[LeaseKey]) -> Result<Vec<Result<()>>> {
        check_ack_batch(leases.len())?;
        if leases.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<i64> = leases.iter().map(fenced_id).collect();
        let queues: Vec<&str> = leases.iter().map(|l| l.queue.as_str()).collect();
        let tokens: Vec<uuid::Uuid> = leases.iter().map(|l| sql_token(l.token)).collect();
        let rows = sqlx::query(&self.inner.sql.ack_many)
            .bind(&ids)
            .bind(&queues)
            .bind(&tokens)
            .bind(&self.inner.channel)
            .fetch_all(self.statement_on(leases.iter().map(|l| &l.queue)))
            .await
            .map_err(db("ack many"))?;
        let mut deleted = HashSet::with_capacity(rows.len());
        for row in &rows {
            deleted.insert((
                col::<i64>(row, 0)?,
                col::<String>(row, 1)?,
                col::<uuid::Uuid>(row, 2)?,
            ));
        }
        // A row is deleted once: the first lease that names it takes the
        // success, a repeat of it is lost like a second ack.
        Ok(leases
            .iter()
            .zip(ids)
            .map(|(l, id)| {
                let key = (id, l.queue.as_str().to_owned(), sql_token(l.token));
                if deleted.remove(&key) {
                    Ok(())
                } else {
                    Err(Self::lost(l))
                }
            })
            .collect())
    }

    async fn extend(&self, lease: &LeaseKey, ttl: LeaseTtl) -> Result<Extended> {
        let row = sqlx::query(&self.inner.sql.extend)
            .bind(fenced_id(lease))
            .bind(lease.queue.as_str())
            .bind(sql_token(lease.token))
            .bind(i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX))
            .fetch_optional(self.statement_on([&lease.queue]))
            .await
            .map_err(db("extend"))?;
        match row {
            Some(row) => Ok(Extended {
                expires_at: ts(col(&row, 0)?),
                cancel_requested: col(&row, 1)?,
            }),
            None => Err(Self::lost(lease)),
        }
    }

    async fn release(&self, lease: &LeaseKey, delay: Duration) -> Result<Released> {
        self.put_back(&self.inner.sql.release, lease, delay, "release")
            .await
    }

    async fn give_back(&self, lease: &LeaseKey) -> Result<()> {
        let row = sqlx::query(&self.inner.sql.give_back)
            .bind(fenced_id(lease))
            .bind(lease.queue.as_str())
            .bind(sql_token(lease.token))
            .bind(&self.inner.channel)
            .fetch_one(self.statement_on([&lease.queue]))
            .await
            .map_err(db("give_back"))?;
        if col::<i64>(&row, 0)? == 0 {
            return Err(Self::lost(lease));
        }
        Ok(())
    }

    async fn fail(&self, lease: &LeaseKey, reason: &str) -> Result<()> {
        // PostgreSQL `text` cannot hold a NUL character: it is stored as
        // U+FFFD, so a failure is never refused for its wording.
        let reason = reason.replace('\0', "\u{FFFD}");
        let row = sqlx::query(&self.inner.sql.fail)
            .bind(fenced_id(lease))
            .bind(lease.queue.as_str())
            .bind(sql_token(lease.token))
            .bind(clamp_reason(&reason))
            .bind(&self.inner.channel)
            .fetch_one(self.statement_on([&lease.queue]))
            .await
            .map_err(db("fail"))?;
        if col::<i64>(&row, 0)? == 0 {
            return Err(Self::lost(lease));
        }
        Ok(())
    }

    async fn reap(&self, queue: &QueueName) -> Result<ReapReport> {
        self.keep_tables_healthy().await;
        let repairs = self.expire_past_horizon(queue).await?;
        let [requeued, dead, cancelled] = self
            .walk(&self.inner.sql.reap, queue, REAP_BATCH, i64::MAX, "reap")
            .await?;
        let n = |c: i64| u64::try_from(c).unwrap_or(0);
        let report = ReapReport {
            requeued: n(requeued),
            dead: n(dead),
            cancelled: n(cancelled),
            repairs,
        };
        self.walk(
            &self.inner.sql.promote,
            queue,
            REAP_BATCH,
            i64::MAX,
            "promoting due items",
        )
        .await?;
        self.reap_requests(queue).await?;
        sqlx::query(&self.inner.sql.forget_takeovers)
            .bind(queue.as_str())
            .bind(millis(FINISH_MEMORY))
            .execute(self.statement_on([queue]))
            .await
            .map_err(db("forgetting takeover traces"))?;
        Ok(report)
    }

    async fn stats(&self, queue: &QueueName) -> Result<QueueStats> {
        let s = &self.inner.sql;
        let cap = i64::try_from(self.inner.options.stats_exact_up_to)
            .unwrap_or(i64::MAX)
            .saturating_add(1)
            .min(i64::MAX - 1);
        let row = sqlx::query(&s.stats)
            .bind(queue.as_str())
            .bind(cap)
            .fetch_one(self.statement_on([queue]))
            .await
            .map_err(db("stats"))?;
        let mut counts = [0i64; 5];
        for (i, c) in counts.iter_mut().enumerate() {
            *c = col(&row, i)?;
        }
        let pages: Option<i64> = col(&row, 5)?;
        let paused: bool = col(&row, 6)?;
        let completed: i64 = col(&row, 7)?;
        if counts.iter().any(|&n| n >= cap) {
            // Whole pages, about STATS_SAMPLE_PAGES of them, scaled up by
            // the rate; a bucket is never put below what was counted.
            let pages = pages.unwrap_or(0).max(1) as f64;
            let percent = (100.0 * STATS_SAMPLE_PAGES / pages).min(100.0);
            let sample = sqlx::query(&s.stats_sample)
                .bind(queue.as_str())
                .bind(percent)
                .fetch_one(self.statement_on([queue]))
                .await
                .map_err(db("stats: sampling"))?;
            for (i, c) in counts.iter_mut().enumerate() {
                if *c >= cap {
                    let seen: i64 = col(&sample, i)?;
                    let estimate = (seen as f64 * 100.0 / percent).round() as i64;
                    *c = (*c).max(estimate);
                }
            }
        }
        let n = |c: i64| u64::try_from(c).unwrap_or(0);
        Ok(QueueStats {
            ready: n(counts[0]) + n(counts[1]),
            scheduled: n(counts[2]),
            leased: n(counts[3]),
            dead: n(counts[4]),
            paused,
            completed: Some(n(completed)),
        })
    }

    async fn queues(&self) -> Result<Vec<QueueName>> {
        let rows = sqlx::query(&self.inner.sql.queues)
            .fetch_all(&self.inner.pool)
            .await
            .map_err(db("queues"))?;
        let mut out = Vec::with_capacity(rows.len());
        for row in &rows {
            out.extend(crate::rows::queue_name(col::<String>(row, 0)?));
        }
        // The database's collation may order names otherwise than bytes.
        out.sort();
        Ok(out)
    }

    async fn peek(&self, queue: &QueueName, st: ItemState, n: usize) -> Result<Vec<ItemInfo>> {
        let sql = &self.inner.sql.peek[match st {
            ItemState::Ready => 0,
            ItemState::Scheduled => 1,
            ItemState::Leased => 2,
            ItemState::Dead => 3,
        }];
        sqlx::query(sql)
            .bind(queue.as_str())
            .bind(limit(n.min(leaseq_core::limits::MAX_PEEK)))
            .fetch_all(self.statement_on([queue]))
            .await
            .map_err(db("peek"))?
            .iter()
            .map(info)
            .collect()
    }

    async fn item(&self, queue: &QueueName, id: ItemId) -> Result<ItemInfo> {
        let row = self
            .item_row(&self.inner.sql.item, queue, id, false, "item")
            .await?;
        info(&row)
    }

    async fn wait_for_work(&self, queue: &QueueName, timeout: Duration) {
        self.inner.wakeups.wait(queue.as_str(), timeout).await;
    }

    fn groups(&self) -> Groups<'_> {
        Groups::none()
            .admin(self)
            .throttles(self)
            .schedules(self)
            .control(self)
            .registry(self)
            .history(self)
            .events(self)
            .test_hooks(
                self.inner
                    .options
                    .test_hooks
                    .then_some(self as &dyn TestHooks),
            )
    }
}

#[async_trait]
impl Admin for PgBackend {
    async fn redrive(&self, queue: &QueueName, n: usize) -> Result<u64> {
        self.move_up_to(&self.inner.sql.redrive, queue, n, "redrive")
            .await
    }

    async fn redrive_item(&self, queue: &QueueName, id: ItemId) -> Result<bool> {
        let row = self
            .item_row(
                &self.inner.sql.redrive_item,
                queue,
                id,
                true,
                "redrive_item",
            )
            .await?;
        let moved: i64 = col(&row, 0)?;
        let was: Option<String> = col(&row, 1)?;
        match (moved, was) {
            (1, _) => Ok(true),
            (0, Some(_)) => Ok(false),
            (0, None) => Err(Error::NotFound { id }),
            (n, _) => Err(Error::Corrupt {
                what: format!("redrive of item {id} moved {n} rows"),
            }),
        }
    }

    // One statement (`Sql::remove_item`). A lease on the row is lost with
    // it: every fence names the row, and a queue's limits count its Leased
    // rows.
    async fn remove_item(&self, queue: &QueueName, id: ItemId) -> Result<ItemState> {
        let row = self
            .item_row(&self.inner.sql.remove_item, queue, id, false, "remove_item")
            .await?;
        state(&col::<String>(&row, 0)?)
    }

    async fn purge(&self, queue: &QueueName) -> Result<u64> {
        let done = sqlx::query(&self.inner.sql.purge)
            .bind(queue.as_str())
            .execute(self.statement_on([queue]))
            .await
            .map_err(db("purge"))?;
        Ok(done.rows_affected())
    }

    async fn delete_queue(&self, queue: &QueueName) -> Result<u64> {
        let done = sqlx::query(&self.inner.sql.delete_queue)
            .bind(queue.as_str())
            .execute(self.statement_on([queue]))
            .await
            .map_err(db("delete_queue"))?;
        Ok(done.rows_affected())
    }
}

#[async_trait]
impl Throttles for PgBackend {
    fn scope(&self) -> LimitScope {
        LimitScope::Global
    }

    async fn set_queue_limits(&self, queue: &QueueName, limits: QueueLimits) -> Result<()> {
        self.write_limits(queue, limits).await
    }

    async fn queue_limits(&self, queue: &QueueName) -> Result<QueueLimits> {
        self.read_limits(queue).await
    }
}

#[async_trait]
impl ScheduleStore for PgBackend {
    async fn put_schedule(&self, schedule: &Schedule) -> Result<StoredSchedule> {
        self.store_schedule(schedule).await
    }

    async fn remove_schedule(&self, name: &ScheduleName) -> Result<bool> {
        self.drop_schedule(name).await
    }

    async fn schedules(&self) -> Result<Vec<StoredSchedule>> {
        self.list_schedules().await
    }

    async fn fire_schedule(&self, tick: &ScheduleTick, item: NewItem) -> Result<Fired> {
        self.fire(tick, item).await
    }
}

/// What [`Backend::enqueue_once`] found under its request.
enum Recalled {
    /// The results stored by an earlier call: nothing was written.
    Before(Vec<Enqueued>),
    /// The results of the batch this call wrote.
    Now(Vec<Enqueued>),
}

/// The id of a fenced call as stored: an id over `i64::MAX` names no row
/// (ids are never negative), so the call finds nothing and the lease is
/// lost, as for any other unknown id.
pub(crate) fn fenced_id(lease: &LeaseKey) -> i64 {
    sql_id(lease.id).unwrap_or(-1)
}

/// What a release or a snooze answers, from the state its statement
/// returned ('cancelled': the item ended Cancelled).
pub(crate) fn released(st: &str) -> Result<Released> {
    if st == "cancelled" {
        return Ok(Released::Cancelled);
    }
    match state(st)? {
        ItemState::Ready => Ok(Released::Ready),
        ItemState::Scheduled => Ok(Released::Scheduled),
        ItemState::Dead => Ok(Released::Dead),
        ItemState::Leased => Err(Error::Corrupt {
            what: "a release left the item leased".into(),
        }),
    }
}

/// A row of the lease columns (claim, recover_claim: the lease's seven,
/// two the claim uses for repairs, then the enqueue time) as a [`Lease`].
fn lease(queue: &QueueName, row: &PgRow) -> Result<Lease> {
    let tok: uuid::Uuid = col(row, 1)?;
    let payload: Vec<u8> = col(row, 2)?;
    Ok(Lease {
        key: LeaseKey {
            queue: queue.clone(),
            id: item_id(col(row, 0)?)?,
            token: token(tok),
        },
        payload: Bytes::from(payload),
        attempts: count(col(row, 3)?, "attempts")?,
        max_attempts: count(col(row, 4)?, "max_attempts")?,
        priority: col(row, 5)?,
        expires_at: ts(col(row, 6)?),
        enqueued_at: ts(col(row, 9)?),
    })
}
