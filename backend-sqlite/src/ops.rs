//! The [`Backend`] implementation: one statement (or one `BEGIN IMMEDIATE`
//! transaction) per transition.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use async_trait::async_trait;
use leaseq_core::events::EventKind;
use leaseq_core::limits::{
    check_ack_batch, check_delay, clamp_reason, FINISH_MEMORY, LEASE_HORIZON,
};
use leaseq_core::schedule::{Fired, Schedule, ScheduleName, ScheduleTick, StoredSchedule};
use leaseq_core::testing::TestHooks;
use leaseq_core::{
    Admin, Backend, Bytes, Capabilities, ClaimSpec, Claimed, Enqueued, Error, Extended, Groups,
    ItemId, ItemInfo, ItemState, Lease, LeaseFate, LeaseKey, LeaseToken, LeaseTraces, LeaseTtl,
    LimitScope, NewItem, QueueLimits, QueueName, QueueStats, ReapReport, Released, Repair, Result,
    ScheduleStore, Throttles, Timestamp,
};
use sqlx::sqlite::SqliteRow;
use sqlx::{Connection, Row};

use crate::enqueue::Recalled;
use crate::rows::unapplied;
use crate::rows::{
    col, count, db, fenced_id, info, item_id, limit, millis, priority, refused, sql_id, sql_token,
    state, token, ts,
};
use crate::sql::{self, QUARANTINED};
use crate::SqliteBackend;

/// Rows one reap, promotion or redrive statement handles; the caller loops
/// while a batch comes back full. Bounded so the write lock is never held
/// long.
const BATCH: i64 = 500;

impl SqliteBackend {
    pub(crate) fn lost(key: &LeaseKey) -> Error {
        Error::LeaseLost { id: key.id }
    }

    /// Signals endings on each queue of `leases` once (an `ack_many`).
    fn finished_on(&self, leases: &[LeaseKey]) {
        let mut seen: Vec<&QueueName> = Vec::new();
        for l in leases {
            if !seen.contains(&&l.queue) {
                self.inner.wakeups.finished(l.queue.as_str());
                seen.push(&l.queue);
            }
        }
    }

    /// Leases expiring past [`LEASE_HORIZON`] expire now, in batches, each
    /// reported; the reap that follows recovers them.
    async fn expire_past_horizon(&self, queue: &QueueName) -> Result<Vec<Repair>> {
        let horizon = i64::try_from(LEASE_HORIZON.as_millis()).unwrap_or(i64::MAX);
        let mut repairs = Vec::new();
        loop {
            let rows = sqlx::query(sql::LEASE_HORIZON)
                .bind(queue.as_str())
                .bind(BATCH)
                .bind(horizon)
                .fetch_all(self.write_on([queue]))
                .await
                .map_err(db("expiring leases past the lease horizon"))?;
            for row in &rows {
                let id = item_id(col(row, 0)?)?;
                tracing::warn!(queue = %queue, %id, "leaseq-sqlite: a lease expiring past the lease horizon expired now");
                repairs.push(Repair::past_horizon(id));
            }
            if limit(rows.len()) < BATCH {
                return Ok(repairs);
            }
        }
    }

    /// Runs one of the batch statements (reap, promote, redrive) until a
    /// batch comes back short or `most` rows moved; returns the states the
    /// rows moved to (only the count, for statements returning ids).
    pub(crate) async fn batches(
        &self,
        text: &str,
        queue: &QueueName,
        most: i64,
        what: &'static str,
    ) -> Result<Vec<SqliteRow>> {
        let mut all = Vec::new();
        loop {
            let left = most - limit(all.len());
            if left <= 0 {
                break;
            }
            let n = BATCH.min(left);
            let rows = sqlx::query(text)
                .bind(queue.as_str())
                .bind(n)
                .fetch_all(self.write_on([queue]))
                .await
                .map_err(db(what))?;
            let got = limit(rows.len());
            all.extend(rows);
            if got < n {
                break;
            }
        }
        Ok(all)
    }

    /// Moves aside the poison rows a claim met (`(id, state)`): deletes the
    /// ones without a payload, quarantines to Dead the ones whose attempt
    /// counter is at its limit. Each is logged and reported.
    /// Runs the claim statement for up to `max` leases on `exec`; `held`:
    /// the clock (ms) the caller judged the queue's limits by, holding the
    /// write lock. Returns the leases and the poison rows met, which the
    /// caller moves aside ([`Self::move_aside`]) once `exec` is free.
    pub(crate) async fn claim_rows<'e>(
        &self,
        exec: impl sqlx::SqliteExecutor<'e>,
        queue: &QueueName,
        spec: &ClaimSpec,
        max: u32,
        held: Option<i64>,
    ) -> Result<(Claimed, Vec<(i64, String)>)> {
        let tokens: Vec<u8> = (0..max)
            .flat_map(|i| spec.token(i).as_u128().to_be_bytes())
            .collect();
        let rows = sqlx::query(sql::CLAIM)
            .bind(queue.as_str())
            .bind(i64::from(max))
            .bind(i64::try_from(spec.ttl().as_millis()).unwrap_or(i64::MAX))
            .bind(tokens)
            .bind(held)
            .fetch_all(exec)
            .await
            .map_err(db("claim"))?;
        let mut out = Claimed::default();
        let mut poison = Vec::new();
        for row in &rows {
            let st: String = col(row, 1)?;
            if st == "leased" {
                out.leases.push(lease(queue, row)?);
            } else {
                poison.push((col::<i64>(row, 0)?, st));
            }
        }
        out.leases
            .sort_by_key(|l| (std::cmp::Reverse(l.priority), l.key.id));
        Ok((out, poison))
    }

    pub(crate) async fn move_aside(
        &self,
        queue: &QueueName,
        poison: &[(i64, String)],
    ) -> Result<Vec<Repair>> {
        let ids = format!(
            "[{}]",
            poison
                .iter()
                .map(|(id, _)| id.to_string())
                .collect::<Vec<_>>()
                .join(",")
        );
        let removed = sqlx::query(sql::DROP_MISSING)
            .bind(queue.as_str())
            .bind(&ids)
            .fetch_all(self.write_on([queue]))
            .await
            .map_err(db("claim: removing entries without an item"))?;
        let quarantined = sqlx::query(sql::QUARANTINE)
            .bind(queue.as_str())
            .bind(&ids)
            .fetch_all(self.write_on([queue]))
            .await
            .map_err(db("claim: quarantining poison"))?;
        let was = |id: i64| -> Result<ItemState> {
            let st = poison
                .iter()
                .find(|(p, _)| *p == id)
                .map(|(_, s)| s.as_str())
                .unwrap_or("ready");
            state(st)
        };
        let mut repairs = Vec::new();
        for row in &removed {
            let id: i64 = col(row, 0)?;
            repairs.push(Repair {
                index: state(&col::<String>(row, 1)?)?,
                id: item_id(id)?,
                problem: "entry without an item (no payload); deleted".to_owned(),
            });
        }
        for row in &quarantined {
            let id: i64 = col(row, 0)?;
            repairs.push(Repair {
                index: was(id)?,
                id: item_id(id)?,
                problem: format!("{QUARANTINED} (attempts = {}); moved to Dead", i32::MAX),
            });
        }
        for repair in &repairs {
            tracing::warn!(queue = %queue, %repair, "leaseq-sqlite: moved a corrupt row aside");
        }
        Ok(repairs)
    }

    /// Moves item `id` of `queue` to Ready with `text` (`?1` queue, `?2`
    /// id; returns a row when it moved, which only one state allows) and
    /// wakes consumers: `redrive_item` and `run_now`. Answers whether it
    /// moved; [`Error::NotFound`] when there is no such item.
    pub(crate) async fn move_to_ready(
        &self,
        text: &str,
        queue: &QueueName,
        id: ItemId,
        what: &'static str,
    ) -> Result<bool> {
        let Ok(raw) = sql_id(id) else {
            return Err(Error::NotFound { id });
        };
        let moved = sqlx::query(text)
            .bind(queue.as_str())
            .bind(raw)
            .fetch_optional(self.write_on([queue]))
            .await
            .map_err(db(what))?;
        if moved.is_some() {
            self.inner.wakeups.wake(queue.as_str());
            return Ok(true);
        }
        // The update is the whole transition, and it changed nothing: the
        // item is in another state or there is none. This read only tells
        // the two apart (ids are never reused, so an item it finds existed,
        // in another state, when the update ran).
        let found = sqlx::query(sql::ITEM)
            .bind(queue.as_str())
            .bind(raw)
            .fetch_optional(self.read_on(queue))
            .await
            .map_err(db(what))?;
        match found {
            Some(_) => Ok(false),
            None => Err(Error::NotFound { id }),
        }
    }

    /// Ends `lease` with `text` (`?1` id, `?2` queue, `?3` token, `?4`
    /// `delay` in ms; returns the new state and whether a cancel was
    /// requested): release and snooze. Wakes consumers when the item is
    /// Ready.
    pub(crate) async fn put_back(
        &self,
        text: &str,
        lease: &LeaseKey,
        delay: Duration,
        what: &'static str,
    ) -> Result<Released> {
        check_delay(delay)?;
        let events = self.watch([&lease.queue]).await;
        let row = sqlx::query(text)
            .bind(fenced_id(lease.id))
            .bind(lease.queue.as_str())
            .bind(sql_token(lease.token))
            .bind(millis(delay))
            .fetch_optional(self.write_on([&lease.queue]))
            .await
            .map_err(db(what))?;
        let Some(row) = row else {
            return Err(Self::lost(lease));
        };
        let released = if col::<bool>(&row, 1)? {
            self.inner.wakeups.finished(lease.queue.as_str());
            Released::Cancelled
        } else {
            match state(&col::<String>(&row, 0)?)? {
                ItemState::Ready => {
                    self.inner.wakeups.wake(lease.queue.as_str());
                    Released::Ready
                }
                ItemState::Scheduled => Released::Scheduled,
                ItemState::Dead => Released::Dead,
                ItemState::Leased => {
                    return Err(Error::Corrupt {
                        what: format!("{what} left the item leased"),
                    })
                }
            }
        };
        if let Some(events) = events {
            let kind = match released {
                Released::Cancelled => EventKind::Cancelled,
                // The reason RELEASE records.
                Released::Dead => EventKind::dead("attempts exhausted"),
                _ => EventKind::Released,
            };
            events.send(&lease.queue, lease.id, kind);
        }
        Ok(released)
    }

    /// Runs `end` on `lease` on `exec`, with `reason` as `?4` when given:
    /// its `returning` form when `watched` (someone listens to the queue's
    /// events). `None` when the fence did not hold; otherwise whether a
    /// cancel was requested (always false unless `watched`).
    pub(crate) async fn end_lease<'e>(
        exec: impl sqlx::SqliteExecutor<'e>,
        end: sql::LeaseEnd,
        lease: &LeaseKey,
        reason: Option<&str>,
        watched: bool,
    ) -> sqlx::Result<Option<bool>> {
        let text = if watched { end.returning } else { end.plain };
        let mut query = sqlx::query(text)
            .bind(fenced_id(lease.id))
            .bind(lease.queue.as_str())
            .bind(sql_token(lease.token));
        if let Some(reason) = reason {
            query = query.bind(reason);
        }
        if !watched {
            let done = query.execute(exec).await?;
            return Ok((done.rows_affected() > 0).then_some(false));
        }
        match query.fetch_optional(exec).await? {
            Some(row) => Ok(Some(row.try_get::<bool, _>(0)?)),
            None => Ok(None),
        }
    }

    /// One batch of the reap, in one write transaction: the takeover
    /// traces of up to [`BATCH`] expired leases, then those leases back to
    /// Ready (or Dead, or deleted when a cancel was requested), judged by
    /// the clock the first statement read. Returns each reaped row's new
    /// state and cancel flag.
    async fn reap_batch(&self, queue: &QueueName) -> Result<Vec<SqliteRow>> {
        let mut tx = self
            .begin_on(queue, "reap: beginning a transaction")
            .await?;
        let taken = sqlx::query(sql::TAKE_EXPIRED)
            .bind(queue.as_str())
            .bind(BATCH)
            .fetch_all(&mut *tx)
            .await
            .map_err(db("reap: tracing takeovers"))?;
        let Some(first) = taken.first() else {
            // Nothing expired: rolled back as the transaction drops.
            return Ok(Vec::new());
        };
        let judged: i64 = col(first, 0)?;
        let rows = sqlx::query(sql::REAP)
            .bind(queue.as_str())
            .bind(BATCH)
            .bind(judged)
            .fetch_all(&mut *tx)
            .await
            .map_err(db("reap"))?;
        tx.commit().await.map_err(db("reap: commit"))?;
        Ok(rows)
    }

    /// `purge` and `delete_queue`: in one transaction, the queue's items
    /// (its leases ended first, so the delete is no ack), then its rows in
    /// `tables`, so no caller sees the items gone and their keys still
    /// held. Returns how many items were deleted.
    async fn delete_items(
        &self,
        queue: &QueueName,
        tables: &[&str],
        op: &'static str,
    ) -> Result<u64> {
        let mut tx = self.begin_on(queue, op).await?;
        sqlx::query(sql::PURGE_UNLEASE)
            .bind(queue.as_str())
            .execute(&mut *tx)
            .await
            .map_err(db(op))?;
        let done = sqlx::query(sql::PURGE)
            .bind(queue.as_str())
            .execute(&mut *tx)
            .await
            .map_err(db(op))?;
        for table in tables {
            sqlx::query(&format!("DELETE FROM {table} WHERE queue = ?1"))
                .bind(queue.as_str())
                .execute(&mut *tx)
                .await
                .map_err(db(op))?;
        }
        tx.commit().await.map_err(db(op))?;
        Ok(done.rows_affected())
    }
}

#[async_trait]
impl Backend for SqliteBackend {
    fn capabilities(&self) -> Capabilities {
        // `durable` means "survives a crash of the process": a file does at
        // either synchronous level (see `Durability` for power failure).
        Capabilities::all_features()
            .bounds(self.inner.options.limits)
            .durable(!self.inner.in_memory)
            .shared(!self.inner.in_memory)
            .unique_for(true)
            .lease_traces(LeaseTraces::Takeovers)
    }

    async fn now(&self) -> Result<Timestamp> {
        let row = sqlx::query(sql::NOW)
            .fetch_one(&self.inner.reader)
            .await
            .map_err(db("reading the clock"))?;
        Ok(ts(col(&row, 0)?))
    }

    async fn enqueue(&self, queue: &QueueName, items: Vec<NewItem>) -> Result<Vec<Enqueued>> {
        self.check_items(&items)?;
        if items.is_empty() {
            return Ok(Vec::new());
        }
        let events = self.watch([queue]).await;
        let mut conn = self
            .inner
            .writer
            .acquire()
            .await
            .map_err(refused("enqueue: acquiring the writer"))?;
        if !Self::needs_transaction(&items) {
            let results = self.enqueue_on(&mut conn, queue, &items).await?;
            if let Some(events) = events {
                events.enqueued(queue, &results);
            }
            return Ok(results);
        }
        self.count([queue]);
        let mut tx = conn
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(db("enqueue: beginning a transaction"))?;
        let results = self
            .enqueue_on(&mut tx, queue, &items)
            .await
            .map_err(Error::uncommitted)?;
        self.count([queue]);
        tx.commit().await.map_err(db("enqueue: commit"))?;
        if let Some(events) = events {
            events.enqueued(queue, &results);
        }
        Ok(results)
    }

    async fn enqueue_once(
        &self,
        queue: &QueueName,
        request: LeaseToken,
        items: Vec<NewItem>,
    ) -> Result<Vec<Enqueued>> {
        self.check_items(&items)?;
        let events = self.watch([queue]).await;
        let mut tx = self
            .begin_on(queue, "enqueue_once: beginning a transaction")
            .await?;
        let done = self
            .enqueue_once_in(&mut tx, queue, request, &items)
            .await
            .map_err(Error::uncommitted)?;
        match done {
            Recalled::Before(results) => {
                // Nothing written: give the lock back at once.
                self.count([queue]);
                if let Err(e) = tx.rollback().await {
                    tracing::debug!(error = %e, "leaseq-sqlite: enqueue_once: rollback failed");
                }
                Ok(results)
            }
            Recalled::Now(results) => {
                self.count([queue]);
                tx.commit().await.map_err(db("enqueue_once: commit"))?;
                if let Some(events) = events {
                    events.enqueued(queue, &results);
                }
                Ok(results)
            }
        }
    }

    async fn claim(&self, queue: &QueueName, spec: ClaimSpec) -> Result<Claimed> {
        let events = self.watch([queue]).await;
        let (mut out, poison) = self
            .claim_rows(self.write_on([queue]), queue, &spec, spec.max(), None)
            .await?;
        // Sent as soon as the claim has committed, before the repairs.
        if let Some(events) = &events {
            events.started(&out.leases);
        }
        if !poison.is_empty() {
            out.repairs = self.move_aside(queue, &poison).await?;
        }
        // An empty claim may be a queue with limits or a pause, which the
        // plain statement leaves alone: claim again under them. (A claim
        // that leased some found no limits row: it is short because the
        // queue ran out, and its leases must be answered.)
        if out.leases.is_empty() && self.has_limits(queue).await? {
            let mut limited = self.claim_limited(queue, &spec).await?;
            if let Some(events) = &events {
                events.started(&limited.leases);
            }
            out.repairs.append(&mut limited.repairs);
            limited.repairs = out.repairs;
            return Ok(limited);
        }
        Ok(out)
    }

    async fn recover_claim(&self, queue: &QueueName, spec: &ClaimSpec) -> Result<Claimed> {
        let first = spec.request().as_u128() & ClaimSpec::FAMILY_MASK;
        let last = first | !ClaimSpec::FAMILY_MASK;
        let rows = sqlx::query(sql::RECOVER_CLAIM)
            .bind(queue.as_str())
            .bind(first.to_be_bytes().to_vec())
            .bind(last.to_be_bytes().to_vec())
            .bind(i64::try_from(spec.ttl().as_millis()).unwrap_or(i64::MAX))
            .fetch_all(self.write_on([queue]))
            .await
            .map_err(db("recover_claim"))?;
        let mut leases = rows
            .iter()
            .map(|row| lease(queue, row))
            .collect::<Result<Vec<_>>>()?;
        // Slot order is claim order.
        leases.sort_by_key(|l| l.token().as_u128());
        Ok(Claimed {
            leases,
            ..Claimed::default()
        })
    }

    async fn lease_fate(&self, lease: &LeaseKey, held_until: Timestamp) -> Result<LeaseFate> {
        let row = sqlx::query(sql::LEASE_FATE)
            .bind(fenced_id(lease.id))
            .bind(lease.queue.as_str())
            .bind(sql_token(lease.token))
            .bind(i64::try_from(held_until.as_millis()).unwrap_or(i64::MAX))
            .bind(millis(FINISH_MEMORY))
            .fetch_one(self.read_on(&lease.queue))
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
        let events = self.watch([&lease.queue]).await;
        let exec = self.write_on([&lease.queue]);
        let Some(cancelled) = Self::end_lease(exec, sql::ACK, lease, None, events.is_some())
            .await
            .map_err(db("ack"))?
        else {
            return Err(Self::lost(lease));
        };
        self.inner.wakeups.finished(lease.queue.as_str());
        if let Some(events) = events {
            events.acked(&lease.queue, lease.id, cancelled, None);
        }
        Ok(())
    }

    async fn ack_many(&self, leases: &[LeaseKey]) -> Result<Vec<Result<()>>> {
        check_ack_batch(leases.len())?;
        if leases.is_empty() {
            return Ok(Vec::new());
        }
        let mut pairs = String::with_capacity(leases.len() * 32);
        let mut tokens = Vec::with_capacity(leases.len() * 16);
        pairs.push('[');
        for (n, l) in leases.iter().enumerate() {
            if n > 0 {
                pairs.push(',');
            }
            pairs.push('[');
            pairs.push_str(&fenced_id(l.id).to_string());
            pairs.push(',');
            sql::json_string(l.queue.as_str(), &mut pairs);
            pairs.push(']');
            tokens.extend_from_slice(&sql_token(l.token));
        }
        pairs.push(']');
        let events = self.watch(leases.iter().map(|l| &l.queue)).await;
        // Every lease on a row of its own, and no events to send: first the
        // statement that deletes the whole batch only if every fence holds,
        // and so returns no rows.
        let mut ids = HashSet::with_capacity(leases.len());
        if events.is_none() && leases.iter().all(|l| ids.insert(l.id)) {
            let n = limit(leases.len());
            let done = sqlx::query(sql::ACK_ALL)
                .bind(&pairs)
                .bind(&tokens)
                .bind(n)
                .execute(self.write_on(leases.iter().map(|l| &l.queue)))
                .await
                .map_err(db("ack many"))?;
            match i64::try_from(done.rows_affected()) {
                Ok(k) if k == n => {
                    self.finished_on(leases);
                    return Ok(leases.iter().map(|_| Ok(())).collect());
                }
                Ok(0) => {}
                _ => {
                    return Err(Error::Corrupt {
                        what: format!(
                            "ack_many of {n} leases deleted {} rows, neither all nor none",
                            done.rows_affected()
                        ),
                    })
                }
            }
        }
        // Some lease is not held (or one row is named twice), or the events
        // need each row: each row deleted when its own fence holds, and the
        // deleted ones back.
        let rows = sqlx::query(sql::ACK_MANY)
            .bind(pairs)
            .bind(tokens)
            .fetch_all(self.write_on(leases.iter().map(|l| &l.queue)))
            .await
            .map_err(db("ack many"))?;
        let mut deleted = HashMap::with_capacity(rows.len());
        for row in &rows {
            let key = (
                col::<i64>(row, 0)?,
                col::<String>(row, 1)?,
                col::<Vec<u8>>(row, 2)?,
            );
            deleted.insert(key, col::<bool>(row, 3)?);
        }
        if !rows.is_empty() {
            self.finished_on(leases);
        }
        // A row is deleted once: the first lease naming it takes the
        // success, a repeat is lost like a second ack.
        let mut out = Vec::with_capacity(leases.len());
        for l in leases {
            let key = (
                fenced_id(l.id),
                l.queue.as_str().to_owned(),
                sql_token(l.token),
            );
            match deleted.remove(&key) {
                Some(cancelled) => {
                    if let Some(events) = &events {
                        events.acked(&l.queue, l.id, cancelled, None);
                    }
                    out.push(Ok(()));
                }
                None => out.push(Err(Self::lost(l))),
            }
        }
        Ok(out)
    }

    async fn extend(&self, lease: &LeaseKey, ttl: LeaseTtl) -> Result<Extended> {
        let row = sqlx::query(sql::EXTEND)
            .bind(fenced_id(lease.id))
            .bind(lease.queue.as_str())
            .bind(sql_token(lease.token))
            .bind(i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX))
            .fetch_optional(self.write_on([&lease.queue]))
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
        self.put_back(sql::RELEASE, lease, delay, "release").await
    }

    async fn give_back(&self, lease: &LeaseKey) -> Result<()> {
        let events = self.watch([&lease.queue]).await;
        let exec = self.write_on([&lease.queue]);
        let Some(cancelled) = Self::end_lease(exec, sql::GIVE_BACK, lease, None, events.is_some())
            .await
            .map_err(db("give_back"))?
        else {
            return Err(Self::lost(lease));
        };
        // A cancel-requested lease ends Cancelled here (no answer says so).
        self.inner.wakeups.finished(lease.queue.as_str());
        self.inner.wakeups.wake(lease.queue.as_str());
        if let Some(events) = events {
            let kind = if cancelled {
                EventKind::Cancelled
            } else {
                EventKind::Released
            };
            events.send(&lease.queue, lease.id, kind);
        }
        Ok(())
    }

    async fn fail(&self, lease: &LeaseKey, reason: &str) -> Result<()> {
        let events = self.watch([&lease.queue]).await;
        let exec = self.write_on([&lease.queue]);
        let reason = clamp_reason(reason);
        let Some(cancelled) =
            Self::end_lease(exec, sql::FAIL, lease, Some(reason), events.is_some())
                .await
                .map_err(db("fail"))?
        else {
            return Err(Self::lost(lease));
        };
        // A cancel-requested lease ends Cancelled here (no answer says so).
        self.inner.wakeups.finished(lease.queue.as_str());
        if let Some(events) = events {
            let kind = if cancelled {
                EventKind::Cancelled
            } else {
                EventKind::dead(reason)
            };
            events.send(&lease.queue, lease.id, kind);
        }
        Ok(())
    }

    async fn reap(&self, queue: &QueueName) -> Result<ReapReport> {
        let events = self.watch([queue]).await;
        let repairs = self.expire_past_horizon(queue).await?;
        let mut rows = Vec::new();
        loop {
            let batch = self.reap_batch(queue).await?;
            let got = limit(batch.len());
            if let Some(events) = &events {
                for row in &batch {
                    events.send(queue, item_id(col(row, 2)?)?, reaped(row)?);
                }
            }
            rows.extend(batch);
            if got < BATCH {
                break;
            }
        }
        let mut report = ReapReport {
            repairs,
            ..ReapReport::default()
        };
        for row in &rows {
            if col::<bool>(row, 1)? {
                report.cancelled += 1;
                continue;
            }
            match col::<String>(row, 0)?.as_str() {
                "dead" => report.dead += 1,
                _ => report.requeued += 1,
            }
        }
        let promoted = self
            .batches(sql::PROMOTE, queue, i64::MAX, "promoting due items")
            .await?;
        if report.cancelled > 0 {
            self.inner.wakeups.finished(queue.as_str());
        }
        if report.requeued > 0 || !promoted.is_empty() {
            self.inner.wakeups.wake(queue.as_str());
        }
        sqlx::query(sql::FORGET_TAKEOVERS)
            .bind(queue.as_str())
            .bind(millis(FINISH_MEMORY))
            .execute(self.write_on([queue]))
            .await
            .map_err(db("forgetting takeover traces"))?;
        // Forget `enqueue_once` requests whose memory ran out.
        loop {
            let done = sqlx::query(sql::REAP_REQUESTS)
                .bind(queue.as_str())
                .bind(BATCH)
                .execute(self.write_on([queue]))
                .await
                .map_err(db("reaping expired requests"))?;
            if done.rows_affected() < BATCH.unsigned_abs() {
                break;
            }
        }
        Ok(report)
    }

    async fn stats(&self, queue: &QueueName) -> Result<QueueStats> {
        let row = sqlx::query(sql::STATS)
            .bind(queue.as_str())
            .fetch_one(self.read_on(queue))
            .await
            .map_err(db("stats"))?;
        let n = |i: usize| -> Result<u64> { Ok(u64::try_from(col::<i64>(&row, i)?).unwrap_or(0)) };
        Ok(QueueStats {
            ready: n(0)?,
            scheduled: n(1)?,
            leased: n(2)?,
            dead: n(3)?,
            paused: col(&row, 4)?,
            completed: Some(n(5)?),
        })
    }

    async fn queues(&self) -> Result<Vec<QueueName>> {
        let rows = sqlx::query(sql::QUEUES)
            .fetch_all(&self.inner.reader)
            .await
            .map_err(db("queues"))?;
        let mut out = Vec::with_capacity(rows.len());
        for row in &rows {
            out.extend(crate::rows::queue_name(col::<String>(row, 0)?));
        }
        // The walk is in SQLite's BINARY order, which is byte order: the
        // order of `QueueName` too; sorted again all the same, cheaply.
        out.sort();
        Ok(out)
    }

    async fn peek(&self, queue: &QueueName, st: ItemState, n: usize) -> Result<Vec<ItemInfo>> {
        let text = sql::PEEK[match st {
            ItemState::Ready => 0,
            ItemState::Scheduled => 1,
            ItemState::Leased => 2,
            ItemState::Dead => 3,
        }];
        sqlx::query(text)
            .bind(queue.as_str())
            .bind(limit(n.min(leaseq_core::limits::MAX_PEEK)))
            .fetch_all(self.read_on(queue))
            .await
            .map_err(db("peek"))?
            .iter()
            .map(info)
            .collect()
    }

    async fn item(&self, queue: &QueueName, id: ItemId) -> Result<ItemInfo> {
        let Ok(raw) = sql_id(id) else {
            return Err(Error::NotFound { id });
        };
        let row = sqlx::query(sql::ITEM)
            .bind(queue.as_str())
            .bind(raw)
            .fetch_optional(self.read_on(queue))
            .await
            .map_err(db("item"))?;
        match row {
            Some(row) => info(&row),
            None => Err(Error::NotFound { id }),
        }
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
impl Admin for SqliteBackend {
    async fn redrive(&self, queue: &QueueName, n: usize) -> Result<u64> {
        let moved = self
            .batches(sql::REDRIVE, queue, limit(n), "redrive")
            .await?;
        if !moved.is_empty() {
            self.inner.wakeups.wake(queue.as_str());
        }
        Ok(u64::try_from(moved.len()).unwrap_or(u64::MAX))
    }

    async fn redrive_item(&self, queue: &QueueName, id: ItemId) -> Result<bool> {
        self.move_to_ready(sql::REDRIVE_ITEM, queue, id, "redrive_item")
            .await
    }

    // One transaction: the hold cleared and the lease ended, then the row
    // deleted, so the delete holds no key and keeps nothing finished (see
    // `sql::REMOVE_ITEM_UNHOLD`, `sql::REMOVE_ITEM_UNLEASE`). A lease on the
    // row is lost with it: every fence names the row, and a queue's limits
    // count its Leased rows.
    async fn remove_item(&self, queue: &QueueName, id: ItemId) -> Result<ItemState> {
        let Ok(raw) = sql_id(id) else {
            return Err(Error::NotFound { id });
        };
        let mut tx = self
            .begin_on(queue, "remove_item: beginning a transaction")
            .await?;
        // Not committed on an error: rolled back as the transaction drops.
        sqlx::query(sql::REMOVE_ITEM_UNHOLD)
            .bind(queue.as_str())
            .bind(raw)
            .execute(&mut *tx)
            .await
            .map_err(unapplied("remove_item: clearing the hold"))?;
        let leased = sqlx::query(sql::REMOVE_ITEM_UNLEASE)
            .bind(queue.as_str())
            .bind(raw)
            .fetch_optional(&mut *tx)
            .await
            .map_err(unapplied("remove_item: ending the lease"))?
            .is_some();
        let row = sqlx::query(sql::REMOVE_ITEM)
            .bind(queue.as_str())
            .bind(raw)
            .fetch_optional(&mut *tx)
            .await
            .map_err(unapplied("remove_item"))?;
        let Some(row) = row else {
            // Nothing written: give the lock back at once.
            if let Err(e) = tx.rollback().await {
                tracing::debug!(error = %e, "leaseq-sqlite: remove_item: rollback failed");
            }
            return Err(Error::NotFound { id });
        };
        let was = if leased {
            ItemState::Leased
        } else {
            state(&col::<String>(&row, 0)?)?
        };
        tx.commit().await.map_err(db("remove_item: commit"))?;
        Ok(was)
    }

    async fn purge(&self, queue: &QueueName) -> Result<u64> {
        // The kept items go; the policy stays.
        self.delete_items(queue, &["leaseq_held_keys", "leaseq_finished"], "purge")
            .await
    }

    // `AUTOINCREMENT` keeps ids from being reused.
    async fn delete_queue(&self, queue: &QueueName) -> Result<u64> {
        let tables = [
            "leaseq_held_keys",
            "leaseq_requests",
            "leaseq_queue_limits",
            "leaseq_takeovers",
            "leaseq_finished",
            "leaseq_retention",
            "leaseq_queue_counts",
        ];
        self.delete_items(queue, &tables, "delete_queue").await
    }
}

#[async_trait]
impl Throttles for SqliteBackend {
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
impl ScheduleStore for SqliteBackend {
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

/// A row of claim's or recover_claim's columns (id, state, token, payload,
/// attempts, max attempts, priority, expiry, enqueue time) as a [`Lease`].
fn lease(queue: &QueueName, row: &SqliteRow) -> Result<Lease> {
    let tok: Vec<u8> = col(row, 2)?;
    let payload: Vec<u8> = col(row, 3)?;
    Ok(Lease {
        key: LeaseKey {
            queue: queue.clone(),
            id: item_id(col(row, 0)?)?,
            token: token(&tok)?,
        },
        payload: Bytes::from(payload),
        attempts: count(col(row, 4)?, "attempts")?,
        max_attempts: count(col(row, 5)?, "max_attempts")?,
        priority: priority(col(row, 6)?)?,
        expires_at: ts(col(row, 7)?),
        enqueued_at: ts(col(row, 8)?),
    })
}

/// The event of a row [`sql::REAP`] returned (state, cancel flag, id).
fn reaped(row: &SqliteRow) -> Result<EventKind> {
    Ok(if col::<bool>(row, 1)? {
        EventKind::Cancelled
    } else if col::<String>(row, 0)? == "dead" {
        // The reasons REAP records, and the memory backend's.
        EventKind::dead("lease expired on final attempt")
    } else {
        EventKind::failed("lease expired")
    })
}
