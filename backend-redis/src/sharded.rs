//! A logical queue spread over K physical queues (shards), for throughput
//! beyond one Redis node: on Redis Cluster each shard's keys carry their own
//! hash tag `{prefix:queue:i}`, so shards land in different slots and, in
//! general, on different masters.

use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use leaseq_core::limits::check_batch;
use leaseq_core::{
    Backend, Capabilities, ClaimSpec, Claimed, Enqueued, Error, IndexSnapshot, ItemId, ItemInfo,
    ItemState, LeaseKey, LeaseTtl, Limits, NewItem, QueueName, QueueStats, ReapReport, Released,
    Repair, Result, TestHooks, Timestamp,
};
use tokio::task::JoinSet;

use crate::RedisBackend;

/// The most shards one logical queue may have.
pub const MAX_SHARDS: u16 = 1024;

/// Names shard `i` of a logical queue.
pub type ShardNamer = Arc<dyn Fn(&QueueName, u16) -> Result<QueueName> + Send + Sync>;

/// A [`ShardedBackend`] over the Redis backend.
pub type ShardedRedisBackend<C> = ShardedBackend<RedisBackend<C>>;

/// One logical queue over K physical queues of an inner backend.
///
/// - **Shards.** Shard `i` of queue `q` is the physical queue `q:i` (so on
///   Redis its keys carry the hash tag `{prefix:q:i}`); [`Self::shard_names`]
///   picks other names, e.g. to place shards on chosen cluster masters.
///   K is fixed for a queue's life: items of a shard beyond K are not seen.
/// - **Enqueue.** An item with a dedup key goes to the shard its key hashes
///   to (FNV-1a), so a key is deduplicated as on one queue; others go round
///   robin. A batch becomes one call per shard touched; each is atomic, the
///   batch as a whole is not (a failure may leave other shards' part
///   written). Bad input is refused before anything is written.
/// - **Ids.** An item's id is `shard_id * K + shard` ([`sharded_id`]), so
///   ids are unique across shards and ack / extend / release / fail / item
///   go straight to the item's shard ([`split_id`]).
/// - **Claim.** Each claim starts at the next shard in rotation and visits
///   every shard until it has `max` items, so no shard starves: a shard
///   with work is visited first at least once every K claims.
/// - **Reap, stats, purge** cover every shard; stats are summed.
///
/// # Ordering
/// Each shard keeps every invariant, so the logical queue does too (an item
/// lives in exactly one shard), except global order: priority and FIFO hold
/// **within a shard**, not across shards. Two items enqueued one after the
/// other may be claimed in either order when they sit in different shards;
/// items with the same dedup key always share a shard. Use one shard
/// (a plain queue) when global order matters.
pub struct ShardedBackend<B: Backend> {
    inner: Arc<B>,
    shards: u16,
    namer: ShardNamer,
    next_enqueue: Arc<AtomicUsize>,
    next_claim: Arc<AtomicUsize>,
}

impl<B: Backend> Clone for ShardedBackend<B> {
    fn clone(&self) -> Self {
        ShardedBackend {
            inner: Arc::clone(&self.inner),
            shards: self.shards,
            namer: Arc::clone(&self.namer),
            next_enqueue: Arc::clone(&self.next_enqueue),
            next_claim: Arc::clone(&self.next_claim),
        }
    }
}

impl<B: Backend> fmt::Debug for ShardedBackend<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ShardedBackend")
            .field("inner", &self.inner)
            .field("shards", &self.shards)
            .finish()
    }
}

/// FNV-1a: a hash that is the same in every process and version.
fn fnv1a(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The sharded id of shard `shard`'s item `id` in a queue of `shards`
/// shards: `id * shards + shard`. Every u64 splits back into exactly one
/// (shard, id) pair, so any id a caller hands in routes somewhere.
///
/// ```
/// use leaseq_core::ItemId;
/// use leaseq_redis::{sharded_id, split_id};
/// let id = sharded_id(4, 3, ItemId::new(42))?;
/// assert_eq!(id.get(), 42 * 4 + 3);
/// assert_eq!(split_id(4, id), (3, ItemId::new(42)));
/// # Ok::<(), leaseq_core::Error>(())
/// ```
pub fn sharded_id(shards: u16, shard: u16, id: ItemId) -> Result<ItemId> {
    let k = u64::from(shards.max(1));
    id.get()
        .checked_mul(k)
        .and_then(|x| x.checked_add(u64::from(shard)))
        .filter(|_| shard < shards)
        .map(ItemId::new)
        .ok_or_else(|| Error::Corrupt {
            what: format!("shard {shard} of {shards} handed out id {id}, too large to shard"),
        })
}

/// The shard and the shard's own id of a sharded id in a queue of `shards`
/// shards.
pub fn split_id(shards: u16, id: ItemId) -> (u16, ItemId) {
    let k = u64::from(shards.max(1));
    let shard = u16::try_from(id.get() % k).unwrap_or(0);
    (shard, ItemId::new(id.get() / k))
}

impl<B: Backend> ShardedBackend<B> {
    /// `shards` (1 to [`MAX_SHARDS`]) physical queues per logical queue on
    /// `inner`.
    pub fn new(inner: B, shards: u16) -> Result<Self> {
        if !(1..=MAX_SHARDS).contains(&shards) {
            return Err(Error::invalid(format!(
                "shards must be 1 to {MAX_SHARDS}, not {shards}"
            )));
        }
        Ok(ShardedBackend {
            inner: Arc::new(inner),
            shards,
            namer: Arc::new(|q: &QueueName, i: u16| QueueName::new(format!("{q}:{i}"))),
            next_enqueue: Arc::new(AtomicUsize::new(0)),
            next_claim: Arc::new(AtomicUsize::new(0)),
        })
    }

    /// Names shards with `namer` instead of `queue:i`. The names must be
    /// distinct per shard and stable for the queue's life.
    pub fn shard_names(
        mut self,
        namer: impl Fn(&QueueName, u16) -> Result<QueueName> + Send + Sync + 'static,
    ) -> Self {
        self.namer = Arc::new(namer);
        self
    }

    /// The number of shards.
    pub fn shards(&self) -> u16 {
        self.shards
    }

    /// The inner backend.
    pub fn inner(&self) -> &B {
        &self.inner
    }

    /// The physical queue of shard `i` of `queue`.
    pub fn shard(&self, queue: &QueueName, i: u16) -> Result<QueueName> {
        (self.namer)(queue, i)
    }

    /// Where a sharded id lives: its shard's queue and id. An id naming a
    /// shard this queue does not have is `None`.
    fn locate(&self, queue: &QueueName, id: ItemId) -> Result<Option<(u16, QueueName, ItemId)>> {
        let (shard, inner) = split_id(self.shards, id);
        if inner.get() == 0 {
            return Ok(None);
        }
        Ok(Some((shard, self.shard(queue, shard)?, inner)))
    }

    /// The lease on the shard for a lease on the logical queue.
    fn inner_lease(&self, lease: &LeaseKey) -> Result<Option<LeaseKey>> {
        Ok(self
            .locate(&lease.queue, lease.id)?
            .map(|(_, queue, id)| LeaseKey {
                queue,
                id,
                token: lease.token,
            }))
    }

    fn rotation(&self, counter: &AtomicUsize) -> impl Iterator<Item = u16> {
        let k = usize::from(self.shards);
        let start = counter.fetch_add(1, Ordering::Relaxed) % k;
        (0..k).map(move |j| u16::try_from((start + j) % k).unwrap_or(0))
    }

    fn repairs(&self, shard: u16, repairs: Vec<Repair>) -> Result<Vec<Repair>> {
        repairs
            .into_iter()
            .map(|r| {
                Ok(Repair {
                    id: sharded_id(self.shards, shard, r.id)?,
                    ..r
                })
            })
            .collect()
    }

    fn info(&self, shard: u16, info: ItemInfo) -> Result<ItemInfo> {
        Ok(ItemInfo {
            id: sharded_id(self.shards, shard, info.id)?,
            ..info
        })
    }

    /// Runs `op` on every shard at once; results in shard order.
    async fn each_shard<T, F, Fut>(&self, queue: &QueueName, op: F) -> Result<Vec<T>>
    where
        T: Send + 'static,
        F: Fn(Arc<B>, QueueName) -> Fut,
        Fut: std::future::Future<Output = Result<T>> + Send + 'static,
    {
        let mut set = JoinSet::new();
        for i in 0..self.shards {
            let fut = op(Arc::clone(&self.inner), self.shard(queue, i)?);
            set.spawn(async move { (i, fut.await) });
        }
        let mut out: Vec<Option<T>> = (0..self.shards).map(|_| None).collect();
        while let Some(joined) = set.join_next().await {
            let (i, r) = joined.map_err(|e| Error::backend("a shard task failed", e))?;
            out[usize::from(i)] = Some(r?);
        }
        Ok(out.into_iter().flatten().collect())
    }
}

#[async_trait]
impl<B: Backend> Backend for ShardedBackend<B> {
    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }

    fn limits(&self) -> Limits {
        self.inner.limits()
    }

    async fn now(&self) -> Result<Timestamp> {
        self.inner.now().await
    }

    async fn enqueue(&self, queue: &QueueName, items: Vec<NewItem>) -> Result<Vec<Enqueued>> {
        check_batch(&items, &self.inner.limits())?;
        let k = u64::from(self.shards);
        let mut groups: Vec<(Vec<usize>, Vec<NewItem>)> =
            (0..self.shards).map(|_| (Vec::new(), Vec::new())).collect();
        for (pos, item) in items.into_iter().enumerate() {
            let shard = match item.get_dedup_key() {
                Some(dk) => fnv1a(dk) % k,
                None => (self.next_enqueue.fetch_add(1, Ordering::Relaxed) as u64) % k,
            };
            let g = &mut groups[usize::try_from(shard).unwrap_or(0)];
            g.0.push(pos);
            g.1.push(item);
        }
        let total: usize = groups.iter().map(|g| g.0.len()).sum();
        let mut set = JoinSet::new();
        for (i, (positions, batch)) in groups.into_iter().enumerate() {
            if batch.is_empty() {
                continue;
            }
            let shard = u16::try_from(i).unwrap_or(0);
            let inner = Arc::clone(&self.inner);
            let physical = self.shard(queue, shard)?;
            set.spawn(async move {
                let r = inner.enqueue(&physical, batch).await;
                (shard, positions, r)
            });
        }
        let mut out: Vec<Option<Enqueued>> = vec![None; total];
        let mut first_err = None;
        while let Some(joined) = set.join_next().await {
            let (shard, positions, r) =
                joined.map_err(|e| Error::backend("a shard task failed", e))?;
            match r {
                Ok(done) => {
                    for (pos, e) in positions.into_iter().zip(done) {
                        out[pos] = Some(Enqueued {
                            id: sharded_id(self.shards, shard, e.id)?,
                            deduplicated: e.deduplicated,
                        });
                    }
                }
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        if let Some(e) = first_err {
            return Err(e);
        }
        out.into_iter()
            .map(|e| {
                e.ok_or_else(|| Error::Corrupt {
                    what: "a shard answered fewer items than it was given".into(),
                })
            })
            .collect()
    }

    async fn claim(&self, queue: &QueueName, spec: ClaimSpec) -> Result<Claimed> {
        let mut out = Claimed::default();
        let max = spec.max();
        for shard in self.rotation(&self.next_claim) {
            let want = max - u32::try_from(out.leases.len()).unwrap_or(max);
            if want == 0 {
                break;
            }
            let physical = self.shard(queue, shard)?;
            let got = self
                .inner
                .claim(&physical, ClaimSpec::new(want, spec.ttl().get())?)
                .await?;
            for mut lease in got.leases {
                lease.key.id = sharded_id(self.shards, shard, lease.key.id)?;
                lease.key.queue = queue.clone();
                out.leases.push(lease);
            }
            out.repairs.extend(self.repairs(shard, got.repairs)?);
        }
        Ok(out)
    }

    async fn ack(&self, lease: &LeaseKey) -> Result<()> {
        match self.inner_lease(lease)? {
            Some(l) => self.inner.ack(&l).await,
            None => Err(Error::LeaseLost { id: lease.id }),
        }
    }

    async fn ack_many(&self, leases: &[LeaseKey]) -> Result<Vec<Result<()>>> {
        leaseq_core::limits::check_ack_batch(leases.len())?;
        let mut out: Vec<Result<()>> = leases
            .iter()
            .map(|l| Err(Error::LeaseLost { id: l.id }))
            .collect();
        let mut at = Vec::with_capacity(leases.len());
        let mut inner = Vec::with_capacity(leases.len());
        for (i, lease) in leases.iter().enumerate() {
            if let Some(l) = self.inner_lease(lease)? {
                at.push(i);
                inner.push(l);
            }
        }
        // The inner backend groups the leases by shard (one call each).
        let done = self.inner.ack_many(&inner).await?;
        for (i, r) in at.into_iter().zip(done) {
            out[i] = r.map_err(|_| Error::LeaseLost { id: leases[i].id });
        }
        Ok(out)
    }

    async fn extend(&self, lease: &LeaseKey, ttl: LeaseTtl) -> Result<Timestamp> {
        match self.inner_lease(lease)? {
            Some(l) => self.inner.extend(&l, ttl).await,
            None => Err(Error::LeaseLost { id: lease.id }),
        }
    }

    async fn release(&self, lease: &LeaseKey, delay: Duration) -> Result<Released> {
        leaseq_core::limits::check_delay(delay)?;
        match self.inner_lease(lease)? {
            Some(l) => self.inner.release(&l, delay).await,
            None => Err(Error::LeaseLost { id: lease.id }),
        }
    }

    async fn fail(&self, lease: &LeaseKey, reason: &str) -> Result<()> {
        match self.inner_lease(lease)? {
            Some(l) => self.inner.fail(&l, reason).await,
            None => Err(Error::LeaseLost { id: lease.id }),
        }
    }

    async fn reap(&self, queue: &QueueName) -> Result<ReapReport> {
        let reports = self
            .each_shard(queue, |b, q| async move { b.reap(&q).await })
            .await?;
        let mut out = ReapReport::default();
        for (i, r) in reports.into_iter().enumerate() {
            out.requeued += r.requeued;
            out.dead += r.dead;
            out.repairs
                .extend(self.repairs(u16::try_from(i).unwrap_or(0), r.repairs)?);
        }
        Ok(out)
    }

    async fn stats(&self, queue: &QueueName) -> Result<QueueStats> {
        let all = self
            .each_shard(queue, |b, q| async move { b.stats(&q).await })
            .await?;
        Ok(all
            .into_iter()
            .fold(QueueStats::default(), |a, s| QueueStats {
                ready: a.ready + s.ready,
                scheduled: a.scheduled + s.scheduled,
                leased: a.leased + s.leased,
                dead: a.dead + s.dead,
            }))
    }

    /// Up to `limit` items in `state`: shard 0's in its order, then shard
    /// 1's, and so on (there is no order across shards).
    async fn peek(
        &self,
        queue: &QueueName,
        state: ItemState,
        limit: usize,
    ) -> Result<Vec<ItemInfo>> {
        let mut out = Vec::new();
        for shard in 0..self.shards {
            if out.len() >= limit {
                break;
            }
            let physical = self.shard(queue, shard)?;
            for info in self.inner.peek(&physical, state, limit - out.len()).await? {
                out.push(self.info(shard, info)?);
            }
        }
        Ok(out)
    }

    async fn item(&self, queue: &QueueName, id: ItemId) -> Result<ItemInfo> {
        let Some((shard, physical, inner)) = self.locate(queue, id)? else {
            return Err(Error::NotFound { id });
        };
        match self.inner.item(&physical, inner).await {
            Ok(info) => self.info(shard, info),
            Err(Error::NotFound { .. }) => Err(Error::NotFound { id }),
            Err(e) => Err(e),
        }
    }

    /// Redrives shard by shard until `limit` (oldest death first within a
    /// shard).
    async fn redrive(&self, queue: &QueueName, limit: usize) -> Result<u64> {
        let mut moved = 0u64;
        for shard in 0..self.shards {
            let left = limit.saturating_sub(usize::try_from(moved).unwrap_or(usize::MAX));
            if left == 0 {
                break;
            }
            moved += self.inner.redrive(&self.shard(queue, shard)?, left).await?;
        }
        Ok(moved)
    }

    async fn purge(&self, queue: &QueueName) -> Result<u64> {
        let all = self
            .each_shard(queue, |b, q| async move { b.purge(&q).await })
            .await?;
        Ok(all.into_iter().sum())
    }

    /// Waits on every shard at once; the first wake-up (or the timeout)
    /// ends the wait.
    async fn wait_for_work(&self, queue: &QueueName, timeout: Duration) {
        let mut set = JoinSet::new();
        for i in 0..self.shards {
            let Ok(physical) = self.shard(queue, i) else {
                continue;
            };
            let inner = Arc::clone(&self.inner);
            set.spawn(async move { inner.wait_for_work(&physical, timeout).await });
        }
        if set.is_empty() {
            return tokio::time::sleep(timeout).await;
        }
        let _ = set.join_next().await;
        set.abort_all();
    }

    fn test_hooks(&self) -> Option<&dyn TestHooks> {
        self.inner.test_hooks().map(|_| self as &dyn TestHooks)
    }
}

fn hooks<B: Backend>(b: &B) -> Result<&dyn TestHooks> {
    b.test_hooks()
        .ok_or_else(|| Error::invalid("the inner backend has no test hooks"))
}

#[async_trait]
impl<B: Backend> TestHooks for ShardedBackend<B> {
    async fn expire_leases(&self, queue: &QueueName) -> Result<u64> {
        let mut n = 0;
        for i in 0..self.shards {
            n += hooks(&*self.inner)?
                .expire_leases(&self.shard(queue, i)?)
                .await?;
        }
        Ok(n)
    }

    async fn make_due(&self, queue: &QueueName) -> Result<u64> {
        let mut n = 0;
        for i in 0..self.shards {
            n += hooks(&*self.inner)?
                .make_due(&self.shard(queue, i)?)
                .await?;
        }
        Ok(n)
    }

    async fn plant_dangling_ready(&self, queue: &QueueName, id: ItemId) -> Result<()> {
        let (shard, inner) = split_id(self.shards, id);
        hooks(&*self.inner)?
            .plant_dangling_ready(&self.shard(queue, shard)?, inner)
            .await
    }

    async fn snapshot(&self, queue: &QueueName) -> Result<IndexSnapshot> {
        let mut out = IndexSnapshot::default();
        for i in 0..self.shards {
            let s = hooks(&*self.inner)?
                .snapshot(&self.shard(queue, i)?)
                .await?;
            for (state, ids) in s.indexes {
                let entry = out.indexes.entry(state).or_default();
                for id in ids {
                    entry.push(sharded_id(self.shards, i, id)?);
                }
            }
            for id in s.items {
                out.items.push(sharded_id(self.shards, i, id)?);
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_carry_their_shard() {
        for (k, shard, id) in [(4u16, 0u16, 1u64), (4, 3, 42), (1024, 1023, (1 << 53) + 7)] {
            let g = sharded_id(k, shard, ItemId::new(id)).expect("fits");
            assert_eq!(split_id(k, g), (shard, ItemId::new(id)));
        }
        assert!(sharded_id(4, 1, ItemId::new(u64::MAX)).is_err());
        assert!(sharded_id(4, 4, ItemId::new(1)).is_err());
        // Any id splits into a shard and back.
        for raw in [0u64, 5, 1_099_511_811_131, u64::MAX] {
            let (shard, inner) = split_id(4, ItemId::new(raw));
            assert_eq!(sharded_id(4, shard, inner).expect("fits").get(), raw);
        }
    }

    #[test]
    fn dedup_hashing_is_stable() {
        assert_eq!(fnv1a(""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a("a"), 0xaf63_dc4c_8601_ec8c);
    }
}
