//! `Backend` for [`RedisBackend`]: each method validates, runs one script
//! (or bounded batches of one script), and decodes the reply.

use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use leaseq_core::limits::{
    check_ack_batch, check_batch, check_delay, clamp_reason, millis_ceil, REQUEST_MEMORY,
};
use leaseq_core::testing::TestHooks;
use leaseq_core::{
    Admin, Backend, Capabilities, ClaimSpec, Claimed, Enqueued, Error, Extended, Groups, ItemId,
    ItemInfo, ItemState, LeaseFate, LeaseKey, LeaseToken, LeaseTtl, LimitScope, NewItem,
    QueueLimits, QueueName, QueueStats, ReapReport, Released, Result, ScheduleStore, Throttles,
    Timestamp,
};

use leaseq_core::schedule::{Fired, Schedule, ScheduleName, ScheduleTick, StoredSchedule};

use crate::scripts::arg;
use crate::{decode, RedisBackend, Reply, ScriptClient};

/// The most items one `peek` returns.
pub const MAX_PEEK: usize = 10_000;
const REDRIVE_BATCH: usize = 500;

/// A claim slot as [`ClaimSpec::token`] numbers it (a claim has at most
/// [`leaseq_core::limits::MAX_CLAIM`] slots).
fn slot(i: usize) -> u32 {
    u32::try_from(i).unwrap_or(u32::MAX)
}

/// Tokens as one script argument, 32 hex digits each, end to end (claim
/// and `ack_many` take them so: one value instead of one per lease).
fn packed_tokens(tokens: impl ExactSizeIterator<Item = LeaseToken>) -> Bytes {
    use std::fmt::Write;
    let mut out = String::with_capacity(32 * tokens.len());
    for token in tokens {
        let _ = write!(out, "{token}");
    }
    Bytes::from(out)
}

pub(crate) fn lease_args(lease: &LeaseKey) -> Vec<Bytes> {
    vec![arg(lease.id.get()), arg(lease.token)]
}

/// The enqueue scripts' batch arguments (after the registration, see
/// [`crate::listing::enqueue_args`]): the id floor (the highest id this
/// handle has seen in the queue), `n`, the batch's form, then per item one
/// value (form `f`: no item has a priority, a delay, a dedup key or a hold;
/// the value is the item's record without its enqueue time,
/// `max,0,payload`) or six (form `g`; see `scripts/enqueue_batch.lua`).
pub(crate) fn batch_args(floor: u64, items: &[NewItem], args: &mut Vec<Bytes>) {
    let plain = items.iter().all(|i| {
        i.priority == 0
            && millis_ceil(i.delay) == 0
            && i.dedup_key.is_none()
            && i.unique_for.is_none()
    });
    args.reserve(3 + items.len() * if plain { 1 } else { 6 });
    args.push(arg(floor));
    args.push(arg(items.len()));
    if plain {
        args.push(Bytes::from_static(b"f"));
        for item in items {
            let max = item.max_attempts.to_string();
            let payload = &item.payload;
            let mut rec = Vec::with_capacity(max.len() + 3 + payload.len());
            rec.extend_from_slice(max.as_bytes());
            rec.extend_from_slice(b",0,");
            rec.extend_from_slice(payload);
            args.push(Bytes::from(rec));
        }
        return;
    }
    args.push(Bytes::from_static(b"g"));
    for item in items {
        args.push(item.payload.clone());
        args.push(arg(item.priority));
        args.push(arg(millis_ceil(item.delay)));
        args.push(arg(item.max_attempts));
        args.push(Bytes::from(
            item.dedup_key.as_deref().unwrap_or("").to_owned(),
        ));
        args.push(arg(item.unique_for.map_or(0, millis_ceil)));
    }
}

/// Logs the enqueue script's note: set when it found the id counter lost or
/// set back and re-seeded it before writing.
pub(crate) fn log_note(queue: &QueueName, note: &crate::Reply) -> Result<()> {
    if let Some(note) = note.opt_text()? {
        tracing::warn!(queue = %queue, problem = %note, "leaseq-redis: id counter re-seeded");
    }
    Ok(())
}

#[async_trait]
impl<C: ScriptClient> Backend for RedisBackend<C> {
    fn capabilities(&self) -> Capabilities {
        Capabilities::all_features()
            .bounds(self.config.limits)
            .durable(self.durable)
            .shared(true)
            .unique_for(true)
            .lease_traces(leaseq_core::LeaseTraces::Takeovers)
    }

    async fn now(&self) -> Result<Timestamp> {
        // The clock needs a queue's keys only to satisfy the script shape.
        let q = QueueName::new("_")?;
        let r = self.run(&self.scripts.time, &q, Vec::new()).await?;
        Ok(Timestamp::from_millis(r.uint()?))
    }

    async fn enqueue(&self, queue: &QueueName, items: Vec<NewItem>) -> Result<Vec<Enqueued>> {
        check_batch(&items, &self.config.limits)?;
        if items.is_empty() {
            return Ok(Vec::new());
        }
        self.may_add_items("enqueue", queue).await?;
        let r = self
            .run_registered(&self.scripts.enqueue, queue, Vec::new(), &[], &items)
            .await?;
        let f = r.array()?;
        let out = match f {
            [rows, note] => {
                log_note(queue, note)?;
                decode::enqueued(rows.array()?, items.len())?
            }
            [Reply::Nil, note, first, n] => {
                log_note(queue, note)?;
                decode::consecutive(first.uint()?, n.uint()?, items.len())?
            }
            _ => {
                return Err(Error::Corrupt {
                    what: format!("enqueue answered {r:?}"),
                })
            }
        };
        self.floors.saw(queue, out.iter().map(|e| e.id));
        Ok(out)
    }

    async fn enqueue_once(
        &self,
        queue: &QueueName,
        request: LeaseToken,
        items: Vec<NewItem>,
    ) -> Result<Vec<Enqueued>> {
        check_batch(&items, &self.config.limits)?;
        self.may_add_items("enqueue_once", queue).await?;
        // The request's key carries the queue's hash tag: one slot, one
        // script that looks the request up, writes the batch and remembers
        // its results.
        let key = self.keys(queue)?.request(request);
        let memory_ms = u64::try_from(REQUEST_MEMORY.as_millis()).unwrap_or(u64::MAX);
        let r = self
            .run_registered(
                &self.scripts.enqueue_once,
                queue,
                vec![key],
                &[arg(memory_ms)],
                &items,
            )
            .await?;
        let f = r.tuple(3)?;
        log_note(queue, &f[2])?;
        let rows = f[1].array()?;
        if f[0].int()? == 1 && rows.len() != items.len() {
            return Err(Error::invalid(format!(
                "request {request} was first sent with {} items, now with {}",
                rows.len(),
                items.len()
            )));
        }
        let out = decode::enqueued(rows, items.len())?;
        self.floors.saw(queue, out.iter().map(|e| e.id));
        Ok(out)
    }

    async fn claim(&self, queue: &QueueName, spec: ClaimSpec) -> Result<Claimed> {
        let mut out = Claimed::default();
        let max = spec.max() as usize;
        let limits_key = vec![self.keys(queue)?.limits()];
        loop {
            let done = out.leases.len();
            let want = max - done;
            // Slot `i` of the whole claim (counted across its rounds) gets
            // the spec's token `i`, so a lost reply can be recovered. The
            // tokens go as one value, 32 hex digits each.
            let args = vec![
                arg(spec.ttl().as_millis()),
                arg(want),
                packed_tokens((done..max).map(|i| spec.token(slot(i)))),
            ];
            let r = self
                .run_with_keys(&self.scripts.claim, queue, limits_key.clone(), args)
                .await?;
            // An eighth value: the queue is paused, nothing was leased.
            let f = match r.array()? {
                f @ [_, _, _, _, _, _, _, paused] => {
                    out.paused = paused.int()? == 1;
                    f
                }
                _ => r.tuple(7)?,
            };
            let expires_at = f[6].uint()?;
            let ids = decode::claimed_ids(&f[0])?;
            let records = f[1].array()?;
            let attempts = match &f[2] {
                Reply::Nil => None,
                a => Some(a.array()?),
            };
            if ids.len() > want
                || records.len() != ids.len()
                || attempts.is_some_and(|a| a.len() != ids.len())
            {
                return Err(Error::Corrupt {
                    what: format!(
                        "claim of up to {want} answered {} ids, {} records and {:?} attempts",
                        ids.len(),
                        records.len(),
                        attempts.map(<[Reply]>::len)
                    ),
                });
            }
            for (k, (id, record)) in ids.into_iter().zip(records).enumerate() {
                let token = spec.token(slot(done + k));
                let attempt = attempts.map_or(Ok(1), |a| decode::attempts(&a[k]))?;
                out.leases.push(decode::claimed(
                    queue, id, record, attempt, token, expires_at,
                )?);
            }
            out.repairs.extend(decode::repairs(queue, &f[3])?);
            out.retry_after = f[5].opt_uint()?.map(Duration::from_millis);
            // `more`: the script stopped at its repair budget; go on.
            if f[4].int()? != 1 || out.leases.len() >= max {
                self.floors.saw(queue, out.leases.iter().map(|l| l.id()));
                return Ok(out);
            }
        }
    }

    async fn recover_claim(&self, queue: &QueueName, spec: &ClaimSpec) -> Result<Claimed> {
        let r = self
            .run(
                &self.scripts.recover_claim,
                queue,
                vec![arg(spec.family_hex()), arg(spec.ttl().as_millis())],
            )
            .await?;
        let f = r.tuple(2)?;
        let mut leases = f[0]
            .array()?
            .iter()
            .map(|l| decode::lease(queue, l))
            .collect::<Result<Vec<_>>>()?;
        // A claim hands out its spec's tokens in slot order: token order is
        // claim order.
        leases.sort_by_key(|l| l.token().as_u128());
        self.floors.saw(queue, leases.iter().map(|l| l.id()));
        Ok(Claimed {
            leases,
            repairs: decode::repairs(queue, &f[1])?,
            retry_after: None,
            paused: false,
        })
    }

    async fn lease_fate(&self, lease: &LeaseKey, held_until: Timestamp) -> Result<LeaseFate> {
        let mut args = lease_args(lease);
        args.push(arg(held_until.as_millis()));
        let r = self
            .run(&self.scripts.lease_fate, &lease.queue, args)
            .await?;
        let f = r.tuple(2)?;
        match f[0].int()? {
            1 => Ok(LeaseFate::Held),
            2 => Ok(LeaseFate::Finished {
                state: decode::opt_state(&f[1])?,
            }),
            3 => Ok(LeaseFate::Lost),
            other => Err(Error::Corrupt {
                what: format!("unexpected lease fate {other} from the server"),
            }),
        }
    }

    async fn ack(&self, lease: &LeaseKey) -> Result<()> {
        let r = self
            .run(&self.scripts.ack, &lease.queue, lease_args(lease))
            .await?;
        match r.int()? {
            1 => Ok(()),
            _ => Err(Error::LeaseLost { id: lease.id }),
        }
    }

    async fn ack_many(&self, leases: &[LeaseKey]) -> Result<Vec<Result<()>>> {
        check_ack_batch(leases.len())?;
        let mut out: Vec<Result<()>> = leases
            .iter()
            .map(|l| Err(Error::LeaseLost { id: l.id }))
            .collect();
        // One script call per queue named in the batch, in order of first use.
        let mut groups: Vec<(&QueueName, Vec<usize>)> = Vec::new();
        for (i, lease) in leases.iter().enumerate() {
            match groups.iter_mut().find(|(q, _)| *q == &lease.queue) {
                Some((_, at)) => at.push(i),
                None => groups.push((&lease.queue, vec![i])),
            }
        }
        for (queue, mut at) in groups {
            // A lease named twice is acked once: a repeat stays lost and is
            // not sent (the script relies on it).
            let mut sent = std::collections::HashSet::with_capacity(at.len());
            at.retain(|&i| sent.insert((leases[i].id, leases[i].token)));
            let mut args = Vec::with_capacity(1 + 2 * at.len());
            args.push(arg(at.len()));
            args.extend(at.iter().map(|&i| arg(leases[i].id.get())));
            args.push(packed_tokens(at.iter().map(|&i| leases[i].token)));
            let r = self.run(&self.scripts.ack_many, queue, args).await?;
            // The script answers the positions (from 1) of the lost leases.
            let mut acked = vec![true; at.len()];
            for pos in r.array()? {
                let p = usize::try_from(pos.uint()?).unwrap_or(usize::MAX);
                match acked.get_mut(p.wrapping_sub(1)) {
                    Some(a) => *a = false,
                    None => {
                        return Err(Error::Corrupt {
                            what: format!("ack of {} leases answered position {p}", at.len()),
                        })
                    }
                }
            }
            for (&i, ok) in at.iter().zip(acked) {
                if ok {
                    out[i] = Ok(());
                }
            }
        }
        Ok(out)
    }

    async fn extend(&self, lease: &LeaseKey, ttl: LeaseTtl) -> Result<Extended> {
        let mut args = lease_args(lease);
        args.push(arg(ttl.as_millis()));
        let r = self.run(&self.scripts.extend, &lease.queue, args).await?;
        if r == Reply::Int(0) {
            return Err(Error::LeaseLost { id: lease.id });
        }
        let f = r.tuple(2)?;
        Ok(Extended {
            expires_at: Timestamp::from_millis(f[0].uint()?),
            cancel_requested: f[1].int()? == 1,
        })
    }

    async fn release(&self, lease: &LeaseKey, delay: Duration) -> Result<Released> {
        check_delay(delay)?;
        let mut args = lease_args(lease);
        args.push(arg(millis_ceil(delay)));
        let r = self.run(&self.scripts.release, &lease.queue, args).await?;
        match r.int()? {
            1 => Ok(Released::Ready),
            2 => Ok(Released::Scheduled),
            3 => Ok(Released::Dead),
            4 => Ok(Released::Cancelled),
            _ => Err(Error::LeaseLost { id: lease.id }),
        }
    }

    async fn give_back(&self, lease: &LeaseKey) -> Result<()> {
        // Ready, quarantined or cancelled: settled all the same.
        self.give_back_after(lease, Duration::ZERO)
            .await
            .map(|_| ())
    }

    async fn fail(&self, lease: &LeaseKey, reason: &str) -> Result<()> {
        let mut args = lease_args(lease);
        args.push(Bytes::from(clamp_reason(reason).to_owned()));
        let r = self.run(&self.scripts.fail, &lease.queue, args).await?;
        match r.int()? {
            // Dead, or Cancelled when an operator asked for it.
            1 | 2 => Ok(()),
            _ => Err(Error::LeaseLost { id: lease.id }),
        }
    }

    async fn reap(&self, queue: &QueueName) -> Result<ReapReport> {
        // The reaper runs in every worker, every few seconds: the place to
        // notice a policy changed under a running backend.
        self.check_policy().await;
        let mut report = ReapReport::default();
        loop {
            let args = vec![arg(self.config.reap_batch)];
            let r = self.run(&self.scripts.reap, queue, args).await?;
            let f = r.tuple(5)?;
            report.requeued += f[0].uint()?;
            report.dead += f[1].uint()?;
            report.cancelled += f[4].uint()?;
            report.repairs.extend(decode::repairs(queue, &f[2])?);
            if f[3].int()? != 1 {
                return Ok(report);
            }
        }
    }

    async fn stats(&self, queue: &QueueName) -> Result<QueueStats> {
        let limits = vec![self.keys(queue)?.limits()];
        let r = self
            .run_with_keys(&self.scripts.stats, queue, limits, Vec::new())
            .await?;
        let f = r.tuple(6)?;
        Ok(QueueStats {
            ready: f[0].uint()?,
            scheduled: f[1].uint()?,
            leased: f[2].uint()?,
            dead: f[3].uint()?,
            paused: f[4].int()? == 1,
            completed: Some(f[5].uint()?),
        })
    }

    async fn queues(&self) -> Result<Vec<QueueName>> {
        self.list_queues().await
    }

    async fn peek(
        &self,
        queue: &QueueName,
        state: ItemState,
        limit: usize,
    ) -> Result<Vec<ItemInfo>> {
        let limit = limit.min(MAX_PEEK);
        if limit == 0 {
            return Ok(Vec::new());
        }
        let args = vec![arg(state.as_str()), arg(limit)];
        let r = self.run(&self.scripts.peek, queue, args).await?;
        let f = r.tuple(2)?;
        // Quarantines are logged; the moved items are no longer listed.
        decode::repairs(queue, &f[1])?;
        f[0].array()?.iter().map(decode::item).collect()
    }

    async fn item(&self, queue: &QueueName, id: ItemId) -> Result<ItemInfo> {
        let r = self
            .run(&self.scripts.item, queue, vec![arg(id.get())])
            .await?;
        match r {
            crate::Reply::Int(0) => Err(Error::NotFound { id }),
            other => {
                let f = other.tuple(2)?;
                decode::repairs(queue, &f[1])?;
                decode::item(&f[0])
            }
        }
    }

    async fn wait_for_work(&self, queue: &QueueName, timeout: Duration) {
        let start = tokio::time::Instant::now();
        let key = match self.keys(queue) {
            Ok(k) => k.notify(),
            Err(_) => return tokio::time::sleep(timeout).await,
        };
        if let Err(e) = self.client.wait_marker(&key, timeout).await {
            // No notification channel: fall back to a plain poll.
            tracing::debug!(queue = %queue, error = %e, "leaseq-redis: wake-up wait failed");
            tokio::time::sleep(timeout.saturating_sub(start.elapsed())).await;
        }
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
            .test_hooks(self.config.test_hooks.then_some(self as &dyn TestHooks))
    }
}

#[async_trait]
impl<C: ScriptClient> Admin for RedisBackend<C> {
    async fn redrive(&self, queue: &QueueName, limit: usize) -> Result<u64> {
        let mut moved = 0u64;
        let mut left = limit;
        // Dead entries left in place by earlier calls (quarantined items
        // whose fields are still unusable): the next call starts after them.
        let mut kept = 0u64;
        while left > 0 {
            let batch = left.min(REDRIVE_BATCH);
            let r = self
                .run(&self.scripts.redrive, queue, vec![arg(batch), arg(kept)])
                .await?;
            let f = r.tuple(4)?;
            let n = f[0].uint()?;
            moved += n;
            decode::repairs(queue, &f[1])?;
            let k = f[3].uint()?;
            if k > 0 {
                tracing::warn!(queue = %queue, left_in_dead = k,
                    "leaseq-redis: redrive left quarantined items in Dead: their fields are still unusable");
            }
            kept += k;
            left = left.saturating_sub(usize::try_from(n).unwrap_or(usize::MAX));
            if f[2].int()? != 1 {
                break;
            }
        }
        Ok(moved)
    }

    async fn redrive_item(&self, queue: &QueueName, id: ItemId) -> Result<bool> {
        let r = self
            .run(&self.scripts.redrive_item, queue, vec![arg(id.get())])
            .await?;
        let f = r.tuple(3)?;
        decode::repairs(queue, &f[1])?;
        match f[0].int()? {
            1 => Ok(true),
            0 => Ok(false),
            -1 => Err(Error::NotFound { id }),
            2 => Err(Error::Corrupt {
                what: format!(
                    "item {id} stays in Dead: it was quarantined and its fields are still \
                     unusable ({})",
                    f[2].opt_text()?.unwrap_or_default()
                ),
            }),
            other => Err(Error::Corrupt {
                what: format!("unexpected redrive_item answer {other} from the server"),
            }),
        }
    }

    async fn remove_item(&self, queue: &QueueName, id: ItemId) -> Result<ItemState> {
        let r = self
            .run(&self.scripts.remove_item, queue, vec![arg(id.get())])
            .await?;
        let f = r.array()?;
        match f.first().map(crate::Reply::int).transpose()? {
            Some(1) if f.len() == 2 => decode::opt_state(&f[1])?.ok_or(Error::Corrupt {
                what: format!("remove_item of {id} answered no state"),
            }),
            Some(-1) => Err(Error::NotFound { id }),
            _ => Err(Error::Corrupt {
                what: format!("unexpected remove_item answer {f:?} from the server"),
            }),
        }
    }

    async fn purge(&self, queue: &QueueName) -> Result<u64> {
        self.purge_items(queue).await
    }

    async fn delete_queue(&self, queue: &QueueName) -> Result<u64> {
        self.delete(queue).await
    }
}

#[async_trait]
impl<C: ScriptClient> Throttles for RedisBackend<C> {
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
impl<C: ScriptClient> ScheduleStore for RedisBackend<C> {
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
