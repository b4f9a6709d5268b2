//! One logical queue spread over K physical queues (shards) of any backend.
//!
//! ```
//! use std::sync::Arc;
//! use leaseq_core::layer::shard::Sharded;
//! use leaseq_core::Backend;
//!
//! // Any backend handle, e.g. what `leaseq::connect(url)` returns.
//! fn four_ways(backend: Arc<dyn Backend>) -> leaseq_core::Result<Sharded<Arc<dyn Backend>>> {
//!     Sharded::new(backend, 4)
//! }
//! ```
//!
//! - **Shards.** Shard `i` of queue `q` is the physical queue `q:i` (on
//!   Redis its keys carry the hash tag `{prefix:q:i}`, so shards land in
//!   different Cluster slots); [`Sharded::shard_names`] picks other names.
//!   K is fixed for a queue's life: items of a shard beyond K are not seen.
//! - **Enqueue.** An item with a dedup key goes to the shard its key hashes
//!   to, so a key is deduplicated as on one queue; others go round robin. A
//!   batch becomes one concurrent call per shard touched; each is atomic,
//!   the batch as a whole is not ([`crate::Capabilities::atomic_batch`] is
//!   false). Bad input is refused before anything is written.
//! - **`enqueue_once`** sends the batch's items without a dedup key to
//!   the one shard its request picks, under that request, so a resend is
//!   recognised there and one of another size is
//!   [`Error::InvalidInput`], as on one store. Items with a dedup key go to
//!   their key's shard under the same request: a resend that differs only
//!   in those is judged by each shard on its own part.
//! - **Ids.** An item's id is `shard_id * K + shard` ([`sharded_id`]), so
//!   ids are unique across shards and ack / extend / release / fail / item
//!   / redrive_item / remove_item go straight to the item's shard ([`split_id`]).
//! - **Claim.** Each claim starts at the next shard in turn and asks the
//!   shards concurrently, `max` split over them, so an idle claim costs one
//!   round of concurrent calls when `max >= K` (`ceil(K / max)` rounds when
//!   `max` is smaller). A shard that filled its share is asked again until
//!   the claim has `max` items or every shard came up short. A claim never
//!   leases more items than it returns.
//! - **Wait for work** waits on one shard at a time, in turn, each for a
//!   slice of the timeout: one blocking connection per waiter, not K.
//! - **Reap, stats, purge** cover every shard concurrently; stats are summed.
//! - **Queues** ([`Backend::queues`]) lists the logical queues of which at
//!   least one shard is listed by the inner backend: its listing, each
//!   physical name read back as (logical queue, shard) and kept only when
//!   the shard is below K and naming that shard gives the same name again.
//!   Physical queues that are no shard of this layer (a plain queue on the
//!   same store) are left out. Default names `queue:i` read back by
//!   splitting at the last `:`; with [`Sharded::shard_names`] give the
//!   inverse with [`Sharded::shard_parser`], or `queues` is
//!   [`Error::Unsupported`].
//! - **Limits** ([`crate::Throttles::set_queue_limits`]) are split into one
//!   share per shard ([`crate::LimitScope::Split`]): each shard enforces its
//!   share in its own atomic claim and the shares add up to the limit, so
//!   the limit holds over the logical queue. Each share must be at least 1:
//!   a concurrency limit or a rate below the shard count is
//!   [`Error::InvalidInput`]. The split is not work-conserving: a shard
//!   whose share is spent waits while another has room. `queue_limits`
//!   reads the shares back and sums them. A claim's `retry_after` is the
//!   earliest any asked shard gave.
//! - **Schedules.** A schedule put through the layer is stored for the
//!   shard its name hashes to (the stored queue is that shard's physical
//!   queue, as [`ScheduleStore::schedules`] shows), and every tick's item goes
//!   there; the id a fire returns is the sharded id. A tick's item with a
//!   dedup key is [`Error::InvalidInput`]: its key is held on the key's
//!   shard, which the fire's one step cannot reach.
//!
//! # Ordering
//! Each shard keeps every invariant, so the logical queue does too (an item
//! lives in exactly one shard), except global order: priority and FIFO hold
//! **within a shard** ([`crate::Order::PerShard`]). Items with the same
//! dedup key always share a shard. The other orders are per shard too:
//! `peek` lists shard 0's items in its index's order, then shard 1's, and
//! `redrive` takes the oldest deaths of shard 0 first. Use one shard (a
//! plain queue) when global order matters.
//!
//! A `Sharded` over another `Sharded` is not supported: the inner layer's
//! sub-claims take tokens from its caller's share, which the outer layer
//! gives to other shards too.

mod history;
mod hooks;
mod ids;
mod limits;
mod rotation;

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use tokio::task::JoinSet;

pub use ids::{sharded_id, split_id};
use rotation::{shares, Rotation};

use crate::limits::{check_ack_batch, check_batch, check_delay, MAX_CLAIM};
use crate::schedule::{Fired, Schedule, ScheduleName, ScheduleTick, StoredSchedule};
use crate::testing::TestHooks;
use crate::{
    Admin, Backend, BackendExt, Cancelled, Capabilities, ClaimSpec, Claimed, Control, Enqueued,
    Error, Extended, Groups, ItemId, ItemInfo, ItemState, LayeredBackend, LeaseFate, LeaseKey,
    LeaseToken, LeaseTtl, LimitScope, NewItem, Order, QueueLimits, QueueName, QueueStats,
    ReapReport, Released, Repair, Result, ScheduleStore, Throttles, Timestamp,
};

/// The most shards one logical queue may have.
pub const MAX_SHARDS: u16 = 1024;

/// The shortest slice of a wait spent on one shard.
const MIN_WAIT_SLICE: Duration = Duration::from_millis(50);

/// Names shard `i` of a logical queue.
pub type ShardNamer = Arc<dyn Fn(&QueueName, u16) -> Result<QueueName> + Send + Sync>;

/// Reads a physical queue's name back as its logical queue and shard (the
/// inverse of a [`ShardNamer`]); `None` for a name that is no shard.
pub type ShardParser = Arc<dyn Fn(&QueueName) -> Option<(QueueName, u16)> + Send + Sync>;

/// The inverse of the default names `queue:i`.
fn default_parser(physical: &QueueName) -> Option<(QueueName, u16)> {
    let (logical, i) = physical.as_str().rsplit_once(':')?;
    Some((QueueName::new(logical).ok()?, i.parse().ok()?))
}

/// One logical queue over K physical queues of an inner backend: see the
/// [module docs](self).
pub struct Sharded<B: Backend> {
    inner: Arc<B>,
    shards: u16,
    namer: ShardNamer,
    /// `None` when custom names came without their inverse.
    parser: Option<ShardParser>,
    enqueue_turn: Arc<Rotation>,
    claim_turn: Arc<Rotation>,
    wait_turn: Arc<Rotation>,
}

impl<B: Backend> Clone for Sharded<B> {
    fn clone(&self) -> Self {
        Sharded {
            inner: Arc::clone(&self.inner),
            shards: self.shards,
            namer: Arc::clone(&self.namer),
            parser: self.parser.clone(),
            enqueue_turn: Arc::clone(&self.enqueue_turn),
            claim_turn: Arc::clone(&self.claim_turn),
            wait_turn: Arc::clone(&self.wait_turn),
        }
    }
}

impl<B: Backend> fmt::Debug for Sharded<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sharded")
            .field("inner", &self.inner)
            .field("shards", &self.shards)
            .finish()
    }
}

impl<B: Backend> Sharded<B> {
    /// `shards` (1 to [`MAX_SHARDS`]) physical queues per logical queue on
    /// `inner`.
    pub fn new(inner: B, shards: u16) -> Result<Self> {
        if !(1..=MAX_SHARDS).contains(&shards) {
            return Err(Error::invalid(format!(
                "shards must be 1 to {MAX_SHARDS}, not {shards}"
            )));
        }
        Ok(Sharded {
            inner: Arc::new(inner),
            shards,
            namer: Arc::new(|q: &QueueName, i: u16| QueueName::new(format!("{q}:{i}"))),
            parser: Some(Arc::new(default_parser)),
            enqueue_turn: Arc::default(),
            claim_turn: Arc::default(),
            wait_turn: Arc::default(),
        })
    }

    /// Names shards with `namer` instead of `queue:i`. The names must be
    /// distinct per shard and stable for the queue's life. It drops the
    /// inverse of the default names: set yours with
    /// [`Sharded::shard_parser`] (after this call) for
    /// [`Backend::queues`].
    #[must_use]
    pub fn shard_names(
        mut self,
        namer: impl Fn(&QueueName, u16) -> Result<QueueName> + Send + Sync + 'static,
    ) -> Self {
        self.namer = Arc::new(namer);
        self.parser = None;
        self
    }

    /// Reads physical names back as (logical queue, shard): the inverse of
    /// the names [`Sharded::shard_names`] gives, for [`Backend::queues`].
    /// An answer is used only when the shard is below K and naming that
    /// shard of that queue gives the physical name again, so a parser that
    /// accepts too much cannot list a queue that is not there.
    #[must_use]
    pub fn shard_parser(
        mut self,
        parser: impl Fn(&QueueName) -> Option<(QueueName, u16)> + Send + Sync + 'static,
    ) -> Self {
        self.parser = Some(Arc::new(parser));
        self
    }

    /// The logical queue `physical` is a shard of, when it is one of this
    /// layer's shards.
    fn logical(&self, parser: &ShardParser, physical: &QueueName) -> Option<QueueName> {
        let (logical, i) = parser(physical)?;
        let named = (self.namer)(&logical, i).ok()?;
        (i < self.shards && named == *physical).then_some(logical)
    }

    /// The number of shards.
    pub fn shards(&self) -> u16 {
        self.shards
    }

    /// The physical queue of shard `i` of `queue`.
    pub fn shard(&self, queue: &QueueName, i: u16) -> Result<QueueName> {
        (self.namer)(queue, i)
    }

    /// Where a sharded id lives: its shard's queue and id. Id 0 of a shard
    /// is never handed out, and a queue whose shard cannot be named (too
    /// long a name once the suffix is added) holds no item: both are
    /// `None`, so a call on them is `LeaseLost` or `NotFound` as on one
    /// store, never a refusal that fails a whole batch.
    fn locate(&self, queue: &QueueName, id: ItemId) -> Result<Option<(u16, QueueName, ItemId)>> {
        let (shard, inner) = split_id(self.shards, id);
        if inner.get() == 0 {
            return Ok(None);
        }
        Ok(self.shard(queue, shard).ok().map(|q| (shard, q, inner)))
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

    /// Runs `op` on the lease's shard; a lease naming no shard item is lost,
    /// and a lost lease is reported with the caller's (sharded) id.
    async fn on_lease<T, Fut>(
        &self,
        lease: &LeaseKey,
        op: impl FnOnce(LeaseKey) -> Fut,
    ) -> Result<T>
    where
        Fut: Future<Output = Result<T>>,
    {
        match self.inner_lease(lease)? {
            // The shard names its own id; the caller's lease names this one.
            Some(l) => op(l).await.map_err(|e| match e {
                Error::LeaseLost { .. } => Error::LeaseLost { id: lease.id },
                other => other,
            }),
            None => Err(Error::LeaseLost { id: lease.id }),
        }
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

    /// Runs `op` on each listed shard at once; results in the order given.
    /// Every call runs to its end (an error in one does not cancel the
    /// others mid-flight); the first error is returned.
    async fn on_shards<T, F, Fut>(
        &self,
        queue: &QueueName,
        shards: &[u16],
        mut op: F,
    ) -> Result<Vec<(u16, T)>>
    where
        T: Send + 'static,
        F: FnMut(u16, Arc<B>, QueueName) -> Fut,
        Fut: Future<Output = Result<T>> + Send + 'static,
    {
        let mut set = JoinSet::new();
        for (pos, &i) in shards.iter().enumerate() {
            let fut = op(i, Arc::clone(&self.inner), self.shard(queue, i)?);
            set.spawn(async move { (pos, fut.await) });
        }
        let mut out: Vec<Option<T>> = shards.iter().map(|_| None).collect();
        let mut first_err = None;
        while let Some(joined) = set.join_next().await {
            match joined {
                Ok((pos, Ok(v))) => out[pos] = Some(v),
                Ok((_, Err(e))) => {
                    first_err.get_or_insert(e);
                }
                Err(e) => {
                    first_err.get_or_insert(Error::outcome_unknown("a shard task failed", e));
                }
            }
        }
        if let Some(e) = first_err {
            return Err(e);
        }
        Ok(shards
            .iter()
            .copied()
            .zip(out.into_iter().flatten())
            .collect())
    }

    /// Enqueues `items` split over the shards: a dedup key picks its
    /// shard; other items go round robin from a turn counter or, for an
    /// `enqueue_once` request, all to the one shard the request picks (so
    /// that shard sees the whole unkeyed part, and a resend of another
    /// size is refused there as on one store).
    async fn enqueue_split(
        &self,
        queue: &QueueName,
        items: Vec<NewItem>,
        request: Option<LeaseToken>,
    ) -> Result<Vec<Enqueued>> {
        check_batch(&items, &self.inner.capabilities().bounds)?;
        let total = items.len();
        let k = usize::from(self.shards);
        let start = request.map(|r| usize::try_from(r.as_u128() % k as u128).unwrap_or(0));
        let mut positions: Vec<Vec<usize>> = vec![Vec::new(); k];
        let mut batches: Vec<Vec<NewItem>> = vec![Vec::new(); k];
        for (pos, item) in items.into_iter().enumerate() {
            let shard = match (item.dedup_key.as_deref(), start) {
                (Some(key), _) => usize::from(ids::dedup_shard(key, self.shards)),
                (None, Some(start)) => start,
                (None, None) => usize::from(self.enqueue_turn.next(self.shards)),
            };
            positions[shard].push(pos);
            batches[shard].push(item);
        }
        // The request's own shard is sent its part even when it is empty,
        // so it records the request and refuses a resend of another size.
        let touched: Vec<u16> = self
            .all()
            .into_iter()
            .filter(|&i| !batches[usize::from(i)].is_empty() || start == Some(usize::from(i)))
            .collect();
        let done = self
            .on_shards(queue, &touched, |i, b, q| {
                let batch = std::mem::take(&mut batches[usize::from(i)]);
                async move {
                    match request {
                        Some(r) => b.enqueue_once(&q, r, batch).await,
                        None => b.enqueue(&q, batch).await,
                    }
                }
            })
            .await?;
        let mut out: Vec<Option<Enqueued>> = vec![None; total];
        for (shard, results) in done {
            for (&pos, e) in positions[usize::from(shard)].iter().zip(results) {
                out[pos] = Some(Enqueued {
                    id: sharded_id(self.shards, shard, e.id)?,
                    deduplicated: e.deduplicated,
                });
            }
        }
        out.into_iter()
            .map(|e| {
                e.ok_or_else(|| Error::Corrupt {
                    what: "a shard answered fewer items than it was given".into(),
                })
            })
            .collect()
    }

    /// Every shard, in order.
    fn all(&self) -> Vec<u16> {
        (0..self.shards).collect()
    }
}

// Every operation translates names and ids: none may be forwarded unseen.
#[deny(clippy::missing_trait_methods)]
#[async_trait]
impl<B: Backend> LayeredBackend for Sharded<B> {
    type Inner = B;

    fn inner(&self) -> &B {
        &self.inner
    }

    fn capabilities(&self) -> Capabilities {
        let caps = self.inner.capabilities();
        if self.shards == 1 {
            return caps;
        }
        caps.order(Order::PerShard).atomic_batch(false)
    }

    async fn now(&self) -> Result<Timestamp> {
        self.inner.now().await
    }

    async fn enqueue(&self, queue: &QueueName, items: Vec<NewItem>) -> Result<Vec<Enqueued>> {
        self.enqueue_split(queue, items, None).await
    }

    /// Splits the batch as a pure function of the request and the items,
    /// so a resend sends each shard the very batch it saw the first time.
    async fn enqueue_once(
        &self,
        queue: &QueueName,
        request: LeaseToken,
        items: Vec<NewItem>,
    ) -> Result<Vec<Enqueued>> {
        self.enqueue_split(queue, items, Some(request)).await
    }

    async fn claim(&self, queue: &QueueName, spec: ClaimSpec) -> Result<Claimed> {
        let mut out = Claimed::default();
        let mut pending = self.claim_turn.order(self.shards);
        let ttl = spec.ttl().get();
        let mut rounds = 0u32;
        loop {
            let have = u32::try_from(out.leases.len()).unwrap_or(u32::MAX);
            let round = shares(spec.max().saturating_sub(have), &pending);
            if round.is_empty() {
                // A claim that got all it asked for was held back by no
                // limit, whatever a shard's share said.
                if have >= spec.max() {
                    out.retry_after = None;
                }
                // Paused: a shard said so and none leased anything.
                out.paused &= out.leases.is_empty();
                return Ok(out);
            }
            let asked: Vec<u16> = round.iter().map(|&(shard, _)| shard).collect();
            let k = u32::from(self.shards);
            // Slot `pos` of round `rounds` takes the caller's tokens from
            // `(rounds * k + pos) * MAX_CLAIM`: all of them must stay in
            // the caller's family, or `recover_claim` would not find them.
            let last = (u64::from(rounds) + 1) * u64::from(k) * u64::from(MAX_CLAIM) - 1;
            if !u32::try_from(last).is_ok_and(|last| spec.owns(spec.token(last))) {
                return Err(Error::invalid(format!(
                    "the claim's request {} leaves too few tokens in its family for the sub-claims \
                     of {} shards (make the spec with ClaimSpec::new)",
                    spec.request(),
                    self.shards
                )));
            }
            let answers = self
                .on_shards(queue, &asked, |i, b, q| {
                    let want = round
                        .iter()
                        .find(|&&(shard, _)| shard == i)
                        .map_or(0, |&(_, n)| n);
                    // Sub-claims take tokens of the caller's family, so
                    // `recover_claim` finds them on every shard, rising in
                    // the order the leases are returned.
                    let pos = asked.iter().position(|&s| s == i).unwrap_or(0);
                    let pos = u32::try_from(pos).unwrap_or(0);
                    let offset = (rounds * k + pos) * MAX_CLAIM;
                    let sub = ClaimSpec::with_request(want, ttl, spec.token(offset));
                    async move {
                        let got = b.claim(&q, sub?).await?;
                        Ok((want, got))
                    }
                })
                .await?;
            rounds += 1;
            for (shard, (want, got)) in answers {
                // A shard that came up short has nothing more to give.
                if got.leases.len() < usize::try_from(want).unwrap_or(usize::MAX) {
                    pending.retain(|&p| p != shard);
                }
                for mut lease in got.leases {
                    lease.key.id = sharded_id(self.shards, shard, lease.key.id)?;
                    lease.key.queue = queue.clone();
                    out.leases.push(lease);
                }
                out.repairs.extend(self.repairs(shard, got.repairs)?);
                out.retry_after = limits::earliest(out.retry_after, got.retry_after);
                out.paused |= got.paused;
            }
            // Shards that were not asked this round move to the front.
            pending.sort_by_key(|p| asked.contains(p));
        }
    }

    async fn recover_claim(&self, queue: &QueueName, spec: &ClaimSpec) -> Result<Claimed> {
        let found = self
            .on_shards(queue, &self.all(), |_, b, q| {
                // Each shard's task looks up the same claim.
                let spec = spec.duplicate();
                async move { b.recover_claim(&q, &spec).await }
            })
            .await?;
        let mut out = Claimed::default();
        for (shard, got) in found {
            for mut lease in got.leases {
                lease.key.id = sharded_id(self.shards, shard, lease.key.id)?;
                lease.key.queue = queue.clone();
                out.leases.push(lease);
            }
            out.repairs.extend(self.repairs(shard, got.repairs)?);
        }
        // Tokens rise in the order the claim returned its leases.
        out.leases.sort_by_key(|l| l.key.token.as_u128());
        Ok(out)
    }

    async fn lease_fate(&self, lease: &LeaseKey, held_until: Timestamp) -> Result<LeaseFate> {
        match self.inner_lease(lease)? {
            Some(l) => self.inner.lease_fate(&l, held_until).await,
            // No shard holds such an item: judged as for an item gone.
            None if self.inner.now().await? < held_until => Ok(LeaseFate::Finished { state: None }),
            None => Ok(LeaseFate::Lost),
        }
    }

    async fn ack(&self, lease: &LeaseKey) -> Result<()> {
        self.on_lease(lease, |l| async move { self.inner.ack(&l).await })
            .await
    }

    async fn ack_many(&self, leases: &[LeaseKey]) -> Result<Vec<Result<()>>> {
        check_ack_batch(leases.len())?;
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
        // The inner backend groups the leases by queue, i.e. by shard.
        let done = self.inner.ack_many(&inner).await?;
        for (i, r) in at.into_iter().zip(done) {
            out[i] = r.map_err(|_| Error::LeaseLost { id: leases[i].id });
        }
        Ok(out)
    }

    async fn extend(&self, lease: &LeaseKey, ttl: LeaseTtl) -> Result<Extended> {
        self.on_lease(lease, |l| async move { self.inner.extend(&l, ttl).await })
            .await
    }

    async fn release(&self, lease: &LeaseKey, delay: Duration) -> Result<Released> {
        check_delay(delay)?;
        self.on_lease(
            lease,
            |l| async move { self.inner.release(&l, delay).await },
        )
        .await
    }

    async fn give_back(&self, lease: &LeaseKey) -> Result<()> {
        self.on_lease(lease, |l| async move { self.inner.give_back(&l).await })
            .await
    }

    async fn fail(&self, lease: &LeaseKey, reason: &str) -> Result<()> {
        self.on_lease(lease, |l| async move { self.inner.fail(&l, reason).await })
            .await
    }

    async fn reap(&self, queue: &QueueName) -> Result<ReapReport> {
        let reports = self
            .on_shards(
                queue,
                &self.all(),
                |_, b, q| async move { b.reap(&q).await },
            )
            .await?;
        let mut out = ReapReport::default();
        for (shard, r) in reports {
            out.requeued += r.requeued;
            out.dead += r.dead;
            out.cancelled += r.cancelled;
            out.repairs.extend(self.repairs(shard, r.repairs)?);
        }
        Ok(out)
    }

    async fn stats(&self, queue: &QueueName) -> Result<QueueStats> {
        let all = self
            .on_shards(
                queue,
                &self.all(),
                |_, b, q| async move { b.stats(&q).await },
            )
            .await?;
        // Paused when every shard is, as `Control::is_paused` says.
        let paused = all.iter().all(|(_, s)| s.paused);
        Ok(all
            .into_iter()
            .fold(QueueStats::default(), |a, (_, s)| QueueStats {
                ready: a.ready + s.ready,
                scheduled: a.scheduled + s.scheduled,
                leased: a.leased + s.leased,
                dead: a.dead + s.dead,
                paused,
                completed: match (a.completed, s.completed) {
                    (Some(x), Some(y)) => Some(x + y),
                    (x, y) => x.or(y),
                },
            }))
    }

    /// The logical queues with a listed shard, sorted, each once.
    async fn queues(&self) -> Result<Vec<QueueName>> {
        let Some(parser) = &self.parser else {
            return Err(Error::unsupported(
                "queues on a Sharded layer with custom shard names: give their inverse with Sharded::shard_parser",
            ));
        };
        let logical: std::collections::BTreeSet<QueueName> = self
            .inner
            .queues()
            .await?
            .iter()
            .filter_map(|physical| self.logical(parser, physical))
            .collect();
        Ok(logical.into_iter().collect())
    }

    /// Up to `limit` items in `state`: shard 0's in its order, then shard
    /// 1's, and so on (there is no order across shards).
    async fn peek(
        &self,
        queue: &QueueName,
        state: ItemState,
        limit: usize,
    ) -> Result<Vec<ItemInfo>> {
        let limit = limit.min(crate::limits::MAX_PEEK);
        let mut out = Vec::new();
        for shard in self.all() {
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

    /// Waits on one shard at a time, in turn, each for a slice of
    /// `timeout`; the first wake-up ends the wait.
    async fn wait_for_work(&self, queue: &QueueName, timeout: Duration) {
        let deadline = tokio::time::Instant::now() + timeout;
        let slice = (timeout / u32::from(self.shards)).max(MIN_WAIT_SLICE);
        for shard in self.wait_turn.order(self.shards) {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            if left.is_zero() {
                return;
            }
            let Ok(physical) = self.shard(queue, shard) else {
                return tokio::time::sleep(left).await;
            };
            let wait = slice.min(left);
            let started = tokio::time::Instant::now();
            self.inner.wait_for_work(&physical, wait).await;
            if started.elapsed() < wait {
                return; // woken: work may be there
            }
        }
    }

    /// Each group the inner backend offers, through this layer (which
    /// translates queue names and ids for every one of them).
    fn groups(&self) -> Groups<'_> {
        let inner = self.inner.groups();
        Groups {
            admin: inner.admin.map(|_| self as &dyn Admin),
            throttles: inner.throttles.map(|_| self as &dyn Throttles),
            schedules: inner.schedules.map(|_| self as &dyn ScheduleStore),
            control: inner.control.map(|_| self as &dyn Control),
            // Not queue-scoped: the inner backend's registry as it is.
            registry: inner.registry,
            history: inner.history.map(|_| self as &dyn crate::History),
            events: inner.events.map(|_| self as &dyn crate::Events),
            test_hooks: inner.test_hooks.map(|_| self as &dyn TestHooks),
        }
    }
}

#[deny(clippy::missing_trait_methods)]
#[async_trait]
impl<B: Backend> Admin for Sharded<B> {
    /// Redrives shard by shard until `limit` (oldest death first within a
    /// shard).
    async fn redrive(&self, queue: &QueueName, limit: usize) -> Result<u64> {
        let mut moved = 0u64;
        for shard in self.all() {
            let left = limit.saturating_sub(usize::try_from(moved).unwrap_or(usize::MAX));
            if left == 0 {
                break;
            }
            moved += self
                .inner
                .admin()?
                .redrive(&self.shard(queue, shard)?, left)
                .await?;
        }
        Ok(moved)
    }

    /// On the item's shard, found from its id as for [`Backend::item`].
    async fn redrive_item(&self, queue: &QueueName, id: ItemId) -> Result<bool> {
        let Some((_, physical, inner)) = self.locate(queue, id)? else {
            return Err(Error::NotFound { id });
        };
        match self.inner.admin()?.redrive_item(&physical, inner).await {
            Err(Error::NotFound { .. }) => Err(Error::NotFound { id }),
            other => other,
        }
    }

    /// On the item's shard, found from its id as for [`Backend::item`].
    async fn remove_item(&self, queue: &QueueName, id: ItemId) -> Result<ItemState> {
        let Some((_, physical, inner)) = self.locate(queue, id)? else {
            return Err(Error::NotFound { id });
        };
        match self.inner.admin()?.remove_item(&physical, inner).await {
            Err(Error::NotFound { .. }) => Err(Error::NotFound { id }),
            other => other,
        }
    }

    async fn purge(&self, queue: &QueueName) -> Result<u64> {
        let all = self
            .on_shards(queue, &self.all(), |_, b, q| async move {
                b.admin()?.purge(&q).await
            })
            .await?;
        Ok(all.into_iter().map(|(_, n)| n).sum())
    }

    /// Deletes every shard's queue (and with it the shares of its limits).
    async fn delete_queue(&self, queue: &QueueName) -> Result<u64> {
        let all = self
            .on_shards(queue, &self.all(), |_, b, q| async move {
                b.admin()?.delete_queue(&q).await
            })
            .await?;
        Ok(all.into_iter().map(|(_, n)| n).sum())
    }
}

#[deny(clippy::missing_trait_methods)]
#[async_trait]
impl<B: Backend> Throttles for Sharded<B> {
    /// Split over the shards (the inner scope on one shard).
    fn scope(&self) -> LimitScope {
        match self.inner.throttles() {
            Ok(inner) if self.shards == 1 => inner.scope(),
            _ => LimitScope::Split {
                shards: self.shards,
            },
        }
    }

    /// Splits `limits` into one share per shard and sets each (see the
    /// [module docs](self)).
    async fn set_queue_limits(&self, queue: &QueueName, limits: QueueLimits) -> Result<()> {
        let parts = limits::split(limits, self.shards)?;
        self.on_shards(queue, &self.all(), |i, b, q| {
            let part = parts[usize::from(i)];
            async move { b.throttles()?.set_queue_limits(&q, part).await }
        })
        .await?;
        Ok(())
    }

    /// The shards' shares, summed.
    async fn queue_limits(&self, queue: &QueueName) -> Result<QueueLimits> {
        let parts = self
            .on_shards(queue, &self.all(), |_, b, q| async move {
                b.throttles()?.queue_limits(&q).await
            })
            .await?;
        let parts: Vec<QueueLimits> = parts.into_iter().map(|(_, l)| l).collect();
        limits::join(&parts)
    }
}

#[deny(clippy::missing_trait_methods)]
#[async_trait]
impl<B: Backend> ScheduleStore for Sharded<B> {
    /// Stores the schedule for the shard its name hashes to.
    async fn put_schedule(&self, schedule: &Schedule) -> Result<StoredSchedule> {
        let shard = ids::dedup_shard(schedule.name().as_str(), self.shards);
        let physical = self.shard(schedule.queue(), shard)?;
        self.inner
            .schedule_store()?
            .put_schedule(&schedule.clone().with_queue(physical))
            .await
    }

    /// Fires on the schedule's shard; the id is the sharded id. An item
    /// with a dedup key is refused: its key lives on the key's shard, and
    /// the tick's item can only be written on the schedule's, in one step
    /// with the tick.
    async fn fire_schedule(&self, tick: &ScheduleTick, item: NewItem) -> Result<Fired> {
        if let Some(key) = item.dedup_key.as_deref() {
            return Err(Error::invalid(format!(
                "schedule {}: a tick's item with a dedup key ({key:?}) cannot be fired through the \
                 sharded layer (the key is held on its own shard, the tick on the schedule's)",
                tick.name
            )));
        }
        let shard = ids::dedup_shard(tick.name.as_str(), self.shards);
        Ok(
            match self
                .inner
                .schedule_store()?
                .fire_schedule(tick, item)
                .await?
            {
                Fired::Enqueued(e) => Fired::Enqueued(Enqueued {
                    id: sharded_id(self.shards, shard, e.id)?,
                    deduplicated: e.deduplicated,
                }),
                other => other,
            },
        )
    }

    /// Removed by name, wherever it is stored.
    async fn remove_schedule(&self, name: &ScheduleName) -> Result<bool> {
        self.inner.schedule_store()?.remove_schedule(name).await
    }

    /// Stored by name: the inner backend's list as it is (each stored
    /// queue is the shard's physical name).
    async fn schedules(&self) -> Result<Vec<StoredSchedule>> {
        self.inner.schedule_store()?.schedules().await
    }
}

#[deny(clippy::missing_trait_methods)]
#[async_trait]
impl<B: Backend> Control for Sharded<B> {
    /// On the item's shard, found from its id as for [`Backend::item`].
    async fn cancel(&self, queue: &QueueName, id: ItemId) -> Result<Cancelled> {
        let Some((_, physical, inner)) = self.locate(queue, id)? else {
            return Err(Error::NotFound { id });
        };
        match self.inner.control()?.cancel(&physical, inner).await {
            Err(Error::NotFound { .. }) => Err(Error::NotFound { id }),
            other => other,
        }
    }

    /// Pauses every shard.
    async fn pause(&self, queue: &QueueName) -> Result<()> {
        self.on_shards(queue, &self.all(), |_, b, q| async move {
            b.control()?.pause(&q).await
        })
        .await?;
        Ok(())
    }

    /// Resumes every shard.
    async fn resume(&self, queue: &QueueName) -> Result<()> {
        self.on_shards(queue, &self.all(), |_, b, q| async move {
            b.control()?.resume(&q).await
        })
        .await?;
        Ok(())
    }

    /// Paused when every shard is: a pause that failed on the way on one
    /// shard shows as not paused, and pausing again completes it.
    async fn is_paused(&self, queue: &QueueName) -> Result<bool> {
        let all = self
            .on_shards(queue, &self.all(), |_, b, q| async move {
                b.control()?.is_paused(&q).await
            })
            .await?;
        Ok(all.into_iter().all(|(_, paused)| paused))
    }

    async fn snooze(&self, lease: &LeaseKey, delay: Duration) -> Result<Released> {
        check_delay(delay)?;
        self.on_lease(lease, |l| async move {
            self.inner.control()?.snooze(&l, delay).await
        })
        .await
    }

    /// On the item's shard, found from its id as for [`Backend::item`].
    async fn run_now(&self, queue: &QueueName, id: ItemId) -> Result<bool> {
        let Some((_, physical, inner)) = self.locate(queue, id)? else {
            return Err(Error::NotFound { id });
        };
        match self.inner.control()?.run_now(&physical, inner).await {
            Err(Error::NotFound { .. }) => Err(Error::NotFound { id }),
            other => other,
        }
    }

    /// Shard by shard until `limit` (earliest due first within a shard).
    async fn run_all_now(&self, queue: &QueueName, limit: usize) -> Result<u64> {
        let mut moved = 0u64;
        for shard in self.all() {
            let left = limit.saturating_sub(usize::try_from(moved).unwrap_or(usize::MAX));
            if left == 0 {
                break;
            }
            moved += self
                .inner
                .control()?
                .run_all_now(&self.shard(queue, shard)?, left)
                .await?;
        }
        Ok(moved)
    }

    async fn progress(&self, lease: &LeaseKey, value: Bytes) -> Result<()> {
        crate::limits::check_progress(&value)?;
        self.on_lease(lease, |l| async move {
            self.inner.control()?.progress(&l, value).await
        })
        .await
    }

    /// One signal over every shard's: a lease of `queue` may be on any.
    async fn cancel_signal(&self, queue: &QueueName) -> Result<crate::signal::Signal> {
        let control = self.inner.control()?;
        let mut signals = Vec::new();
        for shard in self.all() {
            signals.push(control.cancel_signal(&self.shard(queue, shard)?).await?);
        }
        Ok(crate::signal::Signal::merge(signals))
    }
}
