//! What a backend supports and guarantees, as data.

use crate::Bounds;
#[cfg(doc)]
use crate::{Backend, NewItem};

/// What a backend supports and guarantees, as data: behaviour flags and
/// the input bounds it enforces. The conformance suite picks its checks
/// from it (and from the optional groups, [`Backend::groups`]) and prints
/// every check it skips and why.
///
/// Built readably at the call site:
///
/// ```
/// use leaseq_core::{Capabilities, Order};
/// let caps = Capabilities::all_features().durable(true).shared(true);
/// assert!(caps.durable && caps.dedup && caps.order == Order::Global);
/// let sharded = caps.order(Order::PerShard).atomic_batch(false);
/// assert!(!sharded.atomic_batch);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Capabilities {
    /// Items survive a crash of the storage server (or of the process, for an
    /// embedded store).
    pub durable: bool,
    /// Several processes can share one queue through this backend.
    pub shared: bool,
    /// Dedup keys are honoured.
    pub dedup: bool,
    /// Priorities are honoured.
    pub priorities: bool,
    /// Delays are honoured.
    pub delays: bool,
    /// Over which items priority and FIFO order hold.
    pub order: Order,
    /// A batch [`Backend::enqueue`] is written whole or not at all, even when
    /// the server fails midway.
    pub atomic_batch: bool,
    /// [`NewItem::unique_for`] is honoured: a dedup key stays held after
    /// its item is acked.
    pub unique_for: bool,
    /// How lost replies are settled past the lease's expiry: which trace
    /// [`Backend::lease_fate`] reads, and (with any) whether
    /// [`Backend::recover_claim`] also returns and renews the claim's
    /// expired, unreaped leases. See [`LeaseTraces`].
    pub lease_traces: LeaseTraces,
    /// The input bounds enforced (payload size), checked before anything
    /// is written.
    pub bounds: Bounds,
}

/// Which trace a backend keeps so that [`Backend::lease_fate`] can tell,
/// after a lost reply and past the lease's expiry, a lease its own call
/// ended from one a reaper took. Both kinds answer the same contract
/// (see [`Backend::lease_fate`]); they differ in what they cost and in how
/// long they stay exact.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum LeaseTraces {
    /// None: `lease_fate` answers by the expiry rule alone (Lost once
    /// `held_until` has passed), and `recover_claim` returns live leases
    /// only.
    #[default]
    None,
    /// Each finishing call (`ack`, `ack_many`, `release`, `give_back`,
    /// `fail`) leaves the trace of the (item, token) it ended, in the same
    /// atomic step, for [`crate::limits::FINISH_MEMORY`] (at most
    /// [`crate::limits::MAX_FINISH_TRACES`] per queue). Costs a write on
    /// every finishing call; exact within that memory of the call.
    Finishes,
    /// Each reap that takes an expired lease leaves the trace of the
    /// (item, token) it took, in the same atomic step, for at least
    /// [`crate::limits::FINISH_MEMORY`]. Finishing calls pay nothing; exact
    /// within that memory of `held_until`. A token that never held the
    /// item is not told apart from one whose own call ended it. A claim
    /// that leases an item under a token drops the trace an earlier lease
    /// under that token left (a claim sent again reuses its spec's
    /// tokens), so the new lease is not answered Lost.
    Takeovers,
}

impl LeaseTraces {
    /// Whether any trace is kept (and `recover_claim` renews).
    pub const fn any(self) -> bool {
        !matches!(self, LeaseTraces::None)
    }
}

/// Over which items a backend keeps claim order (priority, then FIFO).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Order {
    /// One order over every item of a queue (INV-8 as written).
    #[default]
    Global,
    /// Order holds within each shard of a queue, not across shards.
    PerShard,
}

impl Capabilities {
    /// Every feature of the core operations (dedup, priorities, delays,
    /// global order, atomic batches), neither durable nor shared: add those
    /// with [`Self::durable`] and [`Self::shared`]. Unique-for keys need
    /// the ack to hold a key: add them with [`Self::unique_for`]. The
    /// bounds are [`Bounds::DEFAULT`].
    pub const fn all_features() -> Self {
        Capabilities {
            durable: false,
            shared: false,
            dedup: true,
            priorities: true,
            delays: true,
            order: Order::Global,
            atomic_batch: true,
            unique_for: false,
            lease_traces: LeaseTraces::None,
            bounds: Bounds::DEFAULT,
        }
    }

    /// With `durable` set.
    #[must_use]
    pub const fn durable(mut self, yes: bool) -> Self {
        self.durable = yes;
        self
    }

    /// With `shared` set.
    #[must_use]
    pub const fn shared(mut self, yes: bool) -> Self {
        self.shared = yes;
        self
    }

    /// With `dedup` set.
    #[must_use]
    pub const fn dedup(mut self, yes: bool) -> Self {
        self.dedup = yes;
        self
    }

    /// With `priorities` set.
    #[must_use]
    pub const fn priorities(mut self, yes: bool) -> Self {
        self.priorities = yes;
        self
    }

    /// With `delays` set.
    #[must_use]
    pub const fn delays(mut self, yes: bool) -> Self {
        self.delays = yes;
        self
    }

    /// With `order` set.
    #[must_use]
    pub const fn order(mut self, order: Order) -> Self {
        self.order = order;
        self
    }

    /// With `atomic_batch` set.
    #[must_use]
    pub const fn atomic_batch(mut self, yes: bool) -> Self {
        self.atomic_batch = yes;
        self
    }

    /// With `unique_for` set.
    #[must_use]
    pub const fn unique_for(mut self, yes: bool) -> Self {
        self.unique_for = yes;
        self
    }

    /// With `lease_traces` set.
    #[must_use]
    pub const fn lease_traces(mut self, traces: LeaseTraces) -> Self {
        self.lease_traces = traces;
        self
    }

    /// With `bounds` set.
    #[must_use]
    pub const fn bounds(mut self, bounds: Bounds) -> Self {
        self.bounds = bounds;
        self
    }
}
